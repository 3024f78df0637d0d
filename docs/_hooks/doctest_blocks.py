"""A griffe extension: the doctests in tracked's docstrings become Python code blocks.

The docstrings are prose followed by ``>>>`` examples (the style of STYLE.md), with no
"Examples:" section header; without this, Markdown would run the examples into the
paragraph before them.
"""
import griffe


def fence_doctests(text):
    """Wrap each run of ``>>>`` lines and their output in a ```pycon fence."""
    out, in_block = [], False
    for line in text.splitlines():
        starts = line.lstrip().startswith('>>>')
        if starts and not in_block:
            out.append('```pycon')
            in_block = True
        elif in_block and not line.strip():
            out.append('```')
            in_block = False
        out.append(line)
    if in_block:
        out.append('```')
    return '\n'.join(out)


class DoctestBlocks(griffe.Extension):
    def on_object(self, *, obj, **kwargs):
        if obj.docstring is not None and '>>>' in obj.docstring.value:
            obj.docstring.value = fence_doctests(obj.docstring.value)

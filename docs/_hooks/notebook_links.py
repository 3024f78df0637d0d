"""MkDocs hook: links in the notebooks work both in the repository and on the site.

A notebook links as it lives in the repository (notebooks/): to another notebook as
``02_convenience_api.ipynb``, to a page as ``../docs/guide/models.md``.  mkdocs-jupyter
renders notebooks to HTML without rewriting links, so this hook maps each relative link
to the page it names on the site, and warns (failing the strict build) for a link to a
file the site does not have.
"""
import logging
import posixpath
import re

log = logging.getLogger('mkdocs.hooks.notebook_links')

NOTEBOOKS = 'notebooks'      # where the notebooks live in the repository
SITE_DIR = 'tutorials'       # where docs/ links to them


def _site_path(repo_path):
    """The docs-relative path of a repository path, or None if the site has no such file."""
    if repo_path.startswith('docs/'):
        return repo_path[len('docs/'):]
    if repo_path.startswith(NOTEBOOKS + '/'):
        return SITE_DIR + repo_path[len(NOTEBOOKS):]
    return None


def on_page_content(html, page, config, files):
    if not page.file.src_uri.endswith('.ipynb'):
        return html

    def rewrite(match):
        href = match.group(2)
        if re.match(r'[a-z]+:|#|/', href):
            return match.group(0)
        path, _, anchor = href.partition('#')
        repo_path = posixpath.normpath(posixpath.join(NOTEBOOKS, path))
        site_path = _site_path(repo_path)
        target = files.get_file_from_path(site_path) if site_path else None
        if target is None:
            log.warning(f'{page.file.src_uri}: link "{href}" names no page of the site')
            return match.group(0)
        url = target.url_relative_to(page.file) + ('#' + anchor if anchor else '')
        return f'{match.group(1)}{url}{match.group(3)}'
    return re.sub(r'(<a\s[^>]*href=")([^"]+)(")', rewrite, html)

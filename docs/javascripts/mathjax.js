// MathJax 3 for the pages' math (pymdownx.arithmatex, generic mode: \( \) and \[ \]) and
// for the notebooks' Markdown cells ($ and $$, as Jupyter writes them); code and pre
// blocks are skipped, as MathJax does by default.  Re-typeset on each page load.
window.MathJax = {
  tex: {inlineMath: [["\\(", "\\)"], ["$", "$"]], displayMath: [["\\[", "\\]"], ["$$", "$$"]],
        processEscapes: true, processEnvironments: true}
};
if (typeof document$ !== "undefined") {
  document$.subscribe(() => { MathJax.typesetPromise && MathJax.typesetPromise(); });
}

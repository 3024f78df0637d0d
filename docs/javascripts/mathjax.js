// MathJax 3 for the pages' math (pymdownx.arithmatex, generic mode) and for the
// notebooks' Markdown cells ($...$ as Jupyter writes it); re-typeset on each page load.
window.MathJax = {
  tex: {inlineMath: [["\\(", "\\)"], ["$", "$"]], displayMath: [["\\[", "\\]"], ["$$", "$$"]],
        processEscapes: true, processEnvironments: true},
  options: {ignoreHtmlClass: ".*|", processHtmlClass: "arithmatex|jp-RenderedMarkdown"}
};
if (typeof document$ !== "undefined") {
  document$.subscribe(() => { MathJax.typesetPromise && MathJax.typesetPromise(); });
}

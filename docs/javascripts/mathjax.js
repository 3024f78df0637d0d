// MathJax for pymdownx.arithmatex (generic mode), re-typeset on each instant page load.
window.MathJax = {
  tex: {inlineMath: [["\\(", "\\)"]], displayMath: [["\\[", "\\]"]],
        processEscapes: true, processEnvironments: true},
  options: {ignoreHtmlClass: ".*|", processHtmlClass: "arithmatex"}
};
if (typeof document$ !== "undefined") {
  document$.subscribe(() => { MathJax.typesetPromise && MathJax.typesetPromise(); });
}

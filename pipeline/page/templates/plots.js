// A task's plots in a catalog with data files (pipeline/page/chunks.py plot_files): fetched once, when its grid is
// shown (its task's tab) and scrolled near, so the page parses no plot before its first view. Each is the server's SVG (every label escaped by
// pipeline/page/plots.py), parsed as XML (a DOMParser document runs no script) and kept only when it is one
// well-formed <svg> with no script, link or foreign content in it. index.js calls watch on each grid it shows.
var TRNCAT_PLOTS = function (STORE, el) {
  "use strict";
  var SVG_NS = "http://www.w3.org/2000/svg";
  // no event handler and no link on any element (the page's CSP refuses inline handlers too: this holds without it)
  function inert(svg) {
    var all = [svg].concat(Array.prototype.slice.call(svg.getElementsByTagName("*")));
    return all.every(function (node) {
      return Array.prototype.every.call(node.attributes, function (a) { return !/^on|href$/i.test(a.name); });
    });
  }
  function load(grid) {
    var src = grid.dataset.src;
    delete grid.dataset.src;
    STORE.plots(src).then(function (texts) {
      texts.forEach(function (text) {
        var doc = new DOMParser().parseFromString(String(text), "image/svg+xml"), svg = doc.documentElement;
        if (svg.namespaceURI !== SVG_NS || svg.localName !== "svg" || doc.getElementsByTagName("parsererror").length ||
            svg.querySelector("script, foreignObject, iframe, a, use, image") || !inert(svg)) return;
        grid.appendChild(document.importNode(svg, true));
      });
    }, function (err) {
      grid.appendChild(el("p", "muted", "These plots did not load (" + err.message + "); reload to try again."));
    });
  }
  // a hidden grid never intersects: only the shown task's plots load; without IntersectionObserver, at once
  var near = window.IntersectionObserver && new IntersectionObserver(function (seen) {
    seen.forEach(function (e) {
      if (e.isIntersecting && e.target.dataset.src) { near.unobserve(e.target); load(e.target); }
    });
  }, {rootMargin: "400px"});
  function watch(grid) {
    if (!grid.dataset.src || grid.dataset.watched) return;
    grid.dataset.watched = "1";
    if (near) near.observe(grid); else load(grid);
  }
  return {watch: watch};
};

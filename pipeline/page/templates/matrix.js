// The stage matrix (pipeline/page/matrix.py, carried by the inline JSON as D.matrix): per task and device class, each
// model's row (the server's HTML, every text escaped there) and its state string (a letter per stage and feature, then
// "!" for documented but fails and "?" for not yet measured), which the state filter scans. Inline in a small catalog;
// in a large one an index file per task and device class and the rows in chunks, fetched once the matrix is scrolled
// near or a control asks for it. index.js calls it once.
var TRNCAT_MATRIX = function (D, el) {
  "use strict";
  var M = D.matrix, $ = function (id) { return document.getElementById(id); };
  if (!M || !M.groups || !$("matrix")) return;
  var PAGE = D.pageSize, state = {page: 0}, loaded = {}, seq = 0, body = $("mx-rows");
  function get(path) {
    return fetch(path, {credentials: "same-origin"}).then(function (r) {
      if (!r.ok) throw new Error(path + ": HTTP " + r.status);
      return r.json();
    });
  }
  function group(key) {
    // a promise of {st, rows (sparse until fetched), chunks}
    var g = M.groups[key];
    if (!g) return Promise.resolve({st: [], rows: []});
    if (!loaded[key]) {
      loaded[key] = typeof g === "string" ? get(g).then(function (ix) { return {st: ix.st, rows: [], chunks: ix.chunks}; },
                                                        function (err) { delete loaded[key]; throw err; })
                                          : Promise.resolve(g);
    }
    return loaded[key];
  }
  function rows(g, numbers) {
    // the rows of these numbers, their chunks fetched first where the group is in files
    var need = {};
    numbers.forEach(function (n) { if (g.rows[n] === undefined) need[Math.floor(n / M.chunk)] = 1; });
    return Promise.all(Object.keys(need).map(function (c) {
      return get(g.chunks[c]).then(function (list) { list.forEach(function (html, k) { g.rows[c * M.chunk + k] = html; }); });
    })).then(function () { return numbers.map(function (n) { return g.rows[n]; }); });
  }
  function draw() {
    var key = $("mx-task").value + "/" + $("mx-device").value, want = $("mx-state").value, mine = ++seq;
    body.setAttribute("aria-busy", "true");
    group(key).then(function (g) {
      var shown = [];
      g.st.forEach(function (s, n) { if (want === "all" || s.indexOf(want) >= 0) shown.push(n); });
      var last = Math.max(0, Math.ceil(shown.length / PAGE) - 1);
      state.page = Math.min(state.page, last);
      var page = shown.slice(state.page * PAGE, (state.page + 1) * PAGE);
      return rows(g, page).then(function (html) {
        if (mine !== seq) return;
        body.innerHTML = html.join("");
        if (!page.length) {
          var tr = body.appendChild(el("tr", "empty")), td = tr.appendChild(el("td", null, "No model in this state on this device."));
          td.colSpan = 12;
        }
        $("mx-info").textContent = shown.length ? "Showing " + (state.page * PAGE + 1) + "\u2013" + (state.page * PAGE + page.length) + " of " + shown.length : "";
        $("mx-prev").disabled = state.page === 0;
        $("mx-next").disabled = state.page >= last;
        body.removeAttribute("aria-busy");
        $("matrix").dataset.drawn = key + "/" + want;
      });
    }).catch(function (err) {
      if (mine !== seq) return;
      body.textContent = "";
      body.appendChild(el("tr")).appendChild(el("td", null, "The matrix did not load (" + err.message + "); reload to try again."));
      body.removeAttribute("aria-busy");
    });
  }
  ["mx-task", "mx-device", "mx-state"].forEach(function (id) {
    $(id).addEventListener("change", function () { state.page = 0; draw(); });
  });
  $("mx-prev").addEventListener("click", function () { state.page -= 1; draw(); });
  $("mx-next").addEventListener("click", function () { state.page += 1; draw(); });
  // drawn once it is scrolled near (nothing of it is parsed or fetched before the first view); without the observer, now
  var near = window.IntersectionObserver && new IntersectionObserver(function (seen) {
    if (seen.some(function (e) { return e.isIntersecting; })) { near.disconnect(); draw(); }
  }, {rootMargin: "400px"});
  if (near) near.observe($("matrix")); else draw();
};

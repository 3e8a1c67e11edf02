// Each task's own columns on the catalog page, from the one definition (pipeline/page/task_columns.py, carried by the
// inline JSON as D.taskViews): its header, its empty state and its metrics in the details; index.js follows.
var TRNCAT_TASKS = function (D, el, metric, STORE) {
  "use strict";
  var COMMON = 10; // rank, model, status, device, cores, compile | the task's own | mem, params, date, toolchain
  var heads = Array.prototype.slice.call(document.querySelectorAll("#catalog thead th"));
  var before = heads.slice(0, 6), after = heads.slice(-4);
  var headTask = D.default.task; // the server rendered the default task's header
  function view(task) { return D.taskViews[task] || {label: task, cols: [], speed: null, compared: "", lib: null}; }
  function tableCols(task) { return view(task).cols.filter(function (m) { return m.table; }); }
  function header(task) {
    // the task's header cells; the common ones are moved, not rebuilt (their sort clicks stay)
    if (headTask === task) return;
    headTask = task;
    var tr = el("tr");
    before.forEach(function (th) { tr.appendChild(th); });
    tableCols(task).forEach(function (m) {
      var th = el("th", "num", m.label);
      th.scope = "col";
      th.dataset.sort = m.key;
      th.title = m.title;
      tr.appendChild(th);
    });
    after.forEach(function (th) { tr.appendChild(th); });
    document.querySelector("#catalog thead").replaceChildren(tr);
  }
  function empty(task) {
    // no model of the task measured, ranked or excluded yet: the page says so instead of showing an empty table
    return D.views.every(function (v) { return !STORE.count(task, v); });
  }
  function emptyText(task) {
    return "No " + view(task).label.toLowerCase() + " model measured, ranked or excluded yet: this tab fills as " +
      "the benchmark runs them.";
  }
  function metrics(e) {
    // the task's own metrics of one row, as a definition list (null when it has none)
    var shown = view(e.task).cols.filter(function (m) { return e[m.key] !== null && e[m.key] !== undefined; });
    if (!shown.length) return null;
    var dl = el("dl", "metrics");
    shown.forEach(function (m) {
      var dt = el("dt", null, m.label);
      dt.title = m.title;
      dl.appendChild(dt);
      dl.appendChild(el("dd", null, metric(e, m)));
    });
    return dl;
  }
  function history(e) {
    // the history across toolchains, with the task's own speed metric
    var F = TRNCAT_FORMAT, t = el("table", "history"), head = el("tr"), speed = view(e.task).speed;
    ["Date", "Hardware", "Cores", "Status", "Toolchain", "Compile"].concat(speed ? [speed.label] : [])
      .forEach(function (h) { head.appendChild(el("th", null, h)); });
    t.appendChild(el("thead")).appendChild(head);
    var body = t.appendChild(el("tbody"));
    e.hist.forEach(function (a) {
      var h = {};
      for (var k = 0; k < D.hcols.length; k++) h[D.hcols[k]] = a[k];
      var tr = el("tr", h.reg ? "regression" : null);
      tr.appendChild(el("td", null, h.date));
      tr.appendChild(el("td", null, h.hw + (h.device ? " (" + h.device + ")" : "")));
      tr.appendChild(el("td", "num", h.cores));
      var st = el("td", null, F.statusLabel(h.st) + (h.code ? " \u00b7 " + [h.stage, h.code].filter(Boolean).join(" \u00b7 ") : ""));
      if (h.reg) st.appendChild(el("span", "badge b-reg", "passed here, fails now"));
      tr.appendChild(st);
      tr.appendChild(el("td", null, F.toolchain(h).join(" \u00b7 ")));
      tr.appendChild(el("td", "num", F.compileText(h)));
      if (speed) tr.appendChild(el("td", "num", metric(h, {key: "speed", fmt: speed.fmt})));
      body.appendChild(tr);
    });
    return t;
  }
  return {view: view, history: history, tableCols: tableCols, header: header, empty: empty, emptyText: emptyText, metrics: metrics,
          ncols: function (task) { return COMMON + tableCols(task).length; }};
};


(function () {
  "use strict";
  var root = document.documentElement;
  root.classList.remove("no-js");
  var D = JSON.parse(document.getElementById("trncat-data").textContent);
  var SCRIPTS = null;
  var E = D.entries.map(function (a) {
    var o = {};
    for (var k = 0; k < D.cols.length; k++) o[D.cols[k]] = a[k];
    o.lid = o.id.toLowerCase();
    return o;
  });
  var SIZES = {any: [0, Infinity], xs: [0, 1e9], s: [1e9, 4e9], m: [4e9, 1e10], l: [1e10, 3.5e10],
               xl: [3.5e10, 1e11], xxl: [1e11, Infinity]};
  var STATUSES = ["all", "pass", "fail", "reg", "excluded", "unmeasured", "error"];
  var CORES = ["any", "1", "2", "4", "8", "16", "32", "64"];
  var state = {task: D.default.task, view: D.default.view, q: "", status: "all", cores: "any", size: "any",
               page: 0, sort: "", dir: 1};
  var $ = function (id) { return document.getElementById(id); };
  var tbody = $("rows");
  var NCOLS = document.querySelectorAll("#catalog thead th").length;

  function el(tag, cls, text) {
    var n = document.createElement(tag);
    if (cls) n.className = cls;
    if (text !== undefined && text !== null) n.textContent = String(text);
    return n;
  }
  function secs(v) {
    if (v === null || v === undefined) return "\u2014";
    if (v < 1) return (v * 1000).toFixed(0) + " ms";
    if (v < 100) return v.toFixed(1) + " s";
    if (v < 600) return v.toFixed(0) + " s";
    return (v / 60).toFixed(0) + " min";
  }
  function bytes(v) {
    if (v === null || v === undefined) return "\u2014";
    var units = [[1099511627776, "TiB"], [1073741824, "GiB"], [1048576, "MiB"], [1024, "KiB"]];
    for (var k = 0; k < units.length; k++) {
      if (v >= units[k][0]) { var n = v / units[k][0]; return (n >= 100 ? n.toFixed(0) : n.toFixed(1)) + " " + units[k][1]; }
    }
    return v.toFixed(0) + " B";
  }
  function params(v) {
    if (v === null || v === undefined) return "\u2014";
    var units = [[1e12, "T"], [1e9, "B"], [1e6, "M"], [1e3, "K"]];
    for (var k = 0; k < units.length; k++) {
      if (v >= units[k][0]) { var n = v / units[k][0]; return (n >= 10 ? n.toFixed(0) : n.toFixed(1).replace(".0", "")) + units[k][1]; }
    }
    return String(v);
  }
  function rate(v) { return v === null || v === undefined ? "\u2014" : (v >= 100 ? v.toFixed(0) : v.toFixed(1)); }
  function statusLabel(st) {
    return {pass: "runs", fail: "fails", error: "infra error", unmeasured: "not yet measured"}[st] || st;
  }
  function command(e) {
    // keep in step with pipeline/page.py command()
    var c = e.cores || e.pc || 1;
    var dev = (e.device === "cpu" || e.device === "cuda") ? " --device " + e.device : "";
    return "pip install -r requirements.txt && " + (c > 1 ? "torchrun --nproc-per-node " + c + " run.py" : "python run.py") + dev;
  }
  function toolchain(e) {
    var lines = [];
    if (e.cc) lines.push("neuronx-cc " + e.cc);
    if (e.tnx) lines.push("torch-neuronx " + e.tnx);
    if (!lines.length && e.device) lines.push(e.device);
    if (e.tf) lines.push("transformers " + e.tf);
    return lines;
  }

  function statusCell(e) {
    var td = el("td", "status");
    var st = e.st === "unmeasured" && e.ek ? "excluded" : e.st;
    td.appendChild(el("span", "badge b-" + st, st === "excluded" ? "excluded" : statusLabel(st)));
    if (e.reg) td.appendChild(el("span", "badge b-reg", "regression"));
    // Every measured row says who measured it: the project's CI, or a community / local submission.
    if (e.src) td.appendChild(el("span", "source src-" + (e.src === "ci" ? "ci" : "other"), e.src === "ci" ? "CI" : e.src));
    if (e.st === "fail" || e.st === "error") {
      var reason = [e.stage, e.code].filter(Boolean).join(" \u00b7 ");
      if (reason) { var r = el("span", "reason", reason); if (e.msg) r.title = e.msg; td.appendChild(r); }
    }
    if (e.ek) {
      if (st !== "excluded") td.appendChild(el("span", "badge b-excluded", "excluded"));
      var x = el("span", "reason", e.ek + ": " + e.er);
      x.title = e.er;
      td.appendChild(x);
    }
    return td;
  }
  function row(item) {
    var e = E[item[0]];
    var tr = el("tr");
    tr.dataset.i = item[0];
    if (e.reg) tr.className = "regressed";
    tr.appendChild(el("td", "rank", item[1] === null ? "" : item[1]));
    var model = el("td", "model");
    if (e.link) {
      var a = el("a", "hub", e.id);
      a.href = "https://huggingface.co/" + e.id;
      a.rel = "noopener";
      model.appendChild(a);
    } else {
      model.appendChild(el("span", "hub", e.id));
    }
    var more = el("a", "more", "details");
    more.href = e.link ? "scripts/" + e.id + "/run.py" : "#";
    model.appendChild(more);
    tr.appendChild(model);
    tr.appendChild(statusCell(e));
    var cores = e.st === "pass" ? e.cores : (e.pc !== null ? e.pc + " (plan)" : e.cores);
    tr.appendChild(el("td", "num", cores === null || cores === undefined ? "\u2014" : cores));
    tr.appendChild(el("td", "num", secs(e.compile)));
    tr.appendChild(el("td", "num", secs(e.ttft)));
    tr.appendChild(el("td", "num", rate(e.tps)));
    tr.appendChild(el("td", "num", secs(e.wall)));
    tr.appendChild(el("td", "num", bytes(e.mem)));
    tr.appendChild(el("td", "num", params(e.params)));
    tr.appendChild(el("td", "date", e.date || "\u2014"));
    var tc = el("td", "toolchain");
    toolchain(e).forEach(function (line) { tc.appendChild(el("span", null, line)); });
    tr.appendChild(tc);
    return tr;
  }

  function matches(e, q) {
    if (q && e.lid.indexOf(q) < 0) return false;
    switch (state.status) {
      case "pass": case "fail": case "error": case "unmeasured": if (e.st !== state.status) return false; break;
      case "reg": if (!e.reg) return false; break;
      case "excluded": if (!e.ek) return false; break;
    }
    if (state.cores !== "any" && !(e.need !== null && e.need <= +state.cores)) return false;
    if (state.size !== "any") {
      var range = SIZES[state.size];
      if (e.params === null || e.params < range[0] || e.params >= range[1]) return false;
    }
    return true;
  }
  function sortKey(item) { return state.sort === "rank" ? item[1] : E[item[0]][state.sort]; }
  function visible() {
    var listing = D.lists[state.task + "/" + state.view];
    var items = listing ? listing.items : [];
    var q = state.q.trim().toLowerCase();
    var shown = [];
    for (var k = 0; k < items.length; k++) if (matches(E[items[k][0]], q)) shown.push(items[k]);
    if (state.sort) {
      shown.sort(function (a, b) {
        var x = sortKey(a), y = sortKey(b);
        if (x === y) return 0;
        if (x === null || x === undefined) return 1;
        if (y === null || y === undefined) return -1;
        return (x < y ? -1 : 1) * state.dir;
      });
    }
    return {listing: listing, total: items.length, shown: shown};
  }
  function render() {
    var v = visible();
    var pages = Math.max(1, Math.ceil(v.shown.length / D.pageSize));
    state.page = Math.min(Math.max(0, state.page), pages - 1);
    var start = state.page * D.pageSize;
    var frag = document.createDocumentFragment();
    v.shown.slice(start, start + D.pageSize).forEach(function (item) { frag.appendChild(row(item)); });
    if (!v.shown.length) {
      var tr = el("tr", "empty"), td = el("td", null, v.listing ? "No model matches these filters in this view" + (state.view === "all" ? "." : ": try All.") :
        "No " + D.labels[state.view] + " snapshot for " + state.task + " yet: see All.");
      td.colSpan = NCOLS;
      tr.appendChild(td);
      frag.appendChild(tr);
    }
    tbody.replaceChildren(frag);
    $("info").textContent = v.shown.length ?
      "Showing " + (start + 1) + "\u2013" + Math.min(start + D.pageSize, v.shown.length) + " of " + v.shown.length +
      (v.shown.length < v.total ? " (" + v.total + " in this view)" : "") : "0 of " + v.total;
    $("prev").disabled = state.page === 0;
    $("next").disabled = state.page >= pages - 1;
    $("caption").textContent = state.task + " \u00b7 " + D.labels[state.view] + (v.listing && v.listing.date ?
      " \u00b7 ranked by the snapshot of " + v.listing.date : state.view === "all" ? " \u00b7 every measured or excluded model, by name" : "");
    document.querySelectorAll("#task-tabs button").forEach(function (b) { b.setAttribute("aria-selected", String(b.dataset.task === state.task)); });
    document.querySelectorAll("#view-tabs button").forEach(function (b) { b.setAttribute("aria-selected", String(b.dataset.view === state.view)); });
    document.querySelectorAll("#catalog th[data-sort]").forEach(function (th) {
      th.setAttribute("aria-sort", th.dataset.sort === state.sort ? (state.dir > 0 ? "ascending" : "descending") : "none");
    });
    writeHash();
  }

  function scripts(id) {
    if (SCRIPTS === null) SCRIPTS = JSON.parse($("trncat-scripts").textContent);
    var slots = SCRIPTS.models[id] || [null, null];
    return slots.map(function (s) { return s === null || s === undefined ? null : SCRIPTS.texts[s]; });
  }
  function fallbackCopy(text) {
    var ta = el("textarea");
    ta.value = text;
    ta.setAttribute("readonly", "");
    ta.className = "offscreen";
    document.body.appendChild(ta);
    ta.select();
    var ok = false;
    try { ok = document.execCommand("copy"); } catch (err) { ok = false; }
    ta.remove();
    return ok;
  }
  function copyButton(getText, label) {
    var b = el("button", "copy", label || "Copy");
    b.type = "button";
    b.addEventListener("click", function () {
      var text = getText();
      var done = function (ok) { b.textContent = ok ? "Copied" : "Copy failed"; setTimeout(function () { b.textContent = label || "Copy"; }, 1500); };
      if (text === null) return done(false);
      if (navigator.clipboard && window.isSecureContext) {
        navigator.clipboard.writeText(text).then(function () { done(true); }, function () { done(fallbackCopy(text)); });
      } else {
        done(fallbackCopy(text));
      }
    });
    return b;
  }
  function fileBlock(e, name, text) {
    var box = el("div", "file");
    var head = el("div", "file-head");
    head.appendChild(el("strong", null, name));
    var pre = el("pre", "code", text === null ? "" : text);
    var current = text;
    head.appendChild(copyButton(function () { return current; }));
    if (text !== null) {
      var dl = el("a", "download", "download");
      dl.href = "data:text/plain;charset=utf-8," + encodeURIComponent(text);
      dl.download = name;
      head.appendChild(dl);
    }
    if (e.link) {
      var rel = el("a", "download", "open file");
      rel.href = "scripts/" + e.id + "/" + name;
      head.appendChild(rel);
      if (text === null && /^https?:$/.test(location.protocol)) {
        pre.textContent = "loading\u2026";
        fetch(rel.href).then(function (r) { if (!r.ok) throw new Error(r.status); return r.text(); })
          .then(function (t) { current = t; pre.textContent = t; })
          .catch(function () { pre.textContent = "Not embedded in this page: use the link above."; });
      } else if (text === null) {
        pre.textContent = "Not embedded in this page: use the link above.";
      }
    }
    box.appendChild(head);
    box.appendChild(pre);
    return box;
  }
  function historyTable(e) {
    var t = el("table", "history");
    var head = el("tr");
    ["Date", "Hardware", "Cores", "Status", "Toolchain", "Compile", "Decode tok/s"].forEach(function (h) { head.appendChild(el("th", null, h)); });
    t.appendChild(el("thead")).appendChild(head);
    var body = t.appendChild(el("tbody"));
    e.hist.forEach(function (a) {
      var h = {};
      for (var k = 0; k < D.hcols.length; k++) h[D.hcols[k]] = a[k];
      var tr = el("tr", h.reg ? "regression" : null);
      tr.appendChild(el("td", null, h.date));
      tr.appendChild(el("td", null, h.hw + (h.device ? " (" + h.device + ")" : "")));
      tr.appendChild(el("td", "num", h.cores));
      var st = el("td", null, statusLabel(h.st) + (h.code ? " \u00b7 " + [h.stage, h.code].filter(Boolean).join(" \u00b7 ") : ""));
      if (h.reg) st.appendChild(el("span", "badge b-reg", "passed here, fails now"));
      tr.appendChild(st);
      tr.appendChild(el("td", null, toolchain(h).join(" \u00b7 ")));
      tr.appendChild(el("td", "num", secs(h.compile)));
      tr.appendChild(el("td", "num", rate(h.tps)));
      body.appendChild(tr);
    });
    return t;
  }
  function detail(e) {
    var box = el("div", "detail-box");
    box.appendChild(el("h3", null, e.id + " \u00b7 " + e.task));
    if (e.st === "fail" || e.st === "error") {
      box.appendChild(el("p", null, (e.st === "fail" ? "Fails at stage " : "Infrastructure error (retried, not an incompatibility) at stage ") +
        (e.stage || "?") + (e.code ? " (" + e.code + ")" : "") + (e.hw ? " on " + e.hw : "") + ":"));
      if (e.msg) box.appendChild(el("pre", "message", e.msg));
    } else if (e.st === "pass") {
      box.appendChild(el("p", null, "Runs unmodified on " + (e.hw || e.device) + " over " + e.cores + " core(s)."));
    }
    if (e.reg) box.appendChild(el("p", "regression-note", "Regression: it passed with an older toolchain and fails with the current one (see the history)."));
    if (e.ek) box.appendChild(el("p", "excluded-note", "Excluded (" + e.ek + "): " + e.er));
    if (e.pc !== null) {
      var plan = "Planner: needs " + e.pc + " NeuronCore" + (e.pc > 1 ? "s" : "");
      if (e.tp && e.tp > 1) plan += ", tensor parallel degree " + e.tp + " (torchrun, tp_plan=\"auto\")";
      if (e.fits === false) plan += "; does not fit the instance";
      box.appendChild(el("p", "plan", plan + (e.advice ? " \u2014 " + e.advice : "")));
    }
    if (e.st === "unmeasured") {
      box.appendChild(el("p", null, "Not yet measured: no script yet."));
      return box;
    }
    var files = scripts(e.id);
    box.appendChild(el("p", null, "Run it: put run.py and requirements.txt in a folder, then"));
    var cmd = el("div", "command");
    cmd.appendChild(el("code", "cmd", command(e)));
    cmd.appendChild(copyButton(function () { return command(e); }, "Copy command"));
    box.appendChild(cmd);
    var grid = el("div", "files");
    grid.appendChild(fileBlock(e, "run.py", files[0]));
    grid.appendChild(fileBlock(e, "requirements.txt", files[1]));
    box.appendChild(grid);
    if (e.hist.length) {
      box.appendChild(el("h4", null, "History across toolchains"));
      box.appendChild(historyTable(e));
    }
    return box;
  }
  function toggle(tr) {
    var next = tr.nextElementSibling;
    if (next && next.classList.contains("detail")) { next.remove(); tr.classList.remove("open"); return; }
    var d = el("tr", "detail"), td = el("td");
    td.colSpan = NCOLS;
    td.appendChild(detail(E[+tr.dataset.i]));
    d.appendChild(td);
    tr.after(d);
    tr.classList.add("open");
  }

  function readHash() {
    var p = new URLSearchParams(location.hash.slice(1));
    if (D.tasks.indexOf(p.get("task")) >= 0) state.task = p.get("task");
    if (D.views.indexOf(p.get("view")) >= 0) state.view = p.get("view");
    if (STATUSES.indexOf(p.get("status")) >= 0) state.status = p.get("status");
    if (CORES.indexOf(p.get("cores")) >= 0) state.cores = p.get("cores");
    if (Object.prototype.hasOwnProperty.call(SIZES, p.get("size"))) state.size = p.get("size");
    state.q = p.get("q") || "";
    state.page = Math.max(0, parseInt(p.get("page"), 10) - 1 || 0);
  }
  function writeHash() {
    var p = new URLSearchParams({task: state.task, view: state.view});
    if (state.q) p.set("q", state.q);
    if (state.status !== "all") p.set("status", state.status);
    if (state.cores !== "any") p.set("cores", state.cores);
    if (state.size !== "any") p.set("size", state.size);
    if (state.page) p.set("page", String(state.page + 1));
    try { history.replaceState(null, "", "#" + p.toString()); } catch (err) { /* file:// may refuse: state stays */ }
  }

  readHash();
  $("q").value = state.q;
  $("f-status").value = state.status;
  $("f-cores").value = state.cores;
  $("f-size").value = state.size;
  $("task-tabs").addEventListener("click", function (ev) {
    var b = ev.target.closest("button[data-task]");
    if (b) { state.task = b.dataset.task; state.page = 0; render(); }
  });
  $("view-tabs").addEventListener("click", function (ev) {
    var b = ev.target.closest("button[data-view]");
    if (b) { state.view = b.dataset.view; state.page = 0; render(); }
  });
  $("q").addEventListener("input", function () { state.q = this.value; state.page = 0; render(); });
  [["f-status", "status"], ["f-cores", "cores"], ["f-size", "size"]].forEach(function (pair) {
    $(pair[0]).addEventListener("change", function () { state[pair[1]] = this.value; state.page = 0; render(); });
  });
  $("prev").addEventListener("click", function () { state.page -= 1; render(); });
  $("next").addEventListener("click", function () { state.page += 1; render(); });
  document.querySelector("#catalog thead").addEventListener("click", function (ev) {
    var th = ev.target.closest("th[data-sort]");
    if (!th) return;
    if (state.sort === th.dataset.sort) state.dir = -state.dir; else { state.sort = th.dataset.sort; state.dir = 1; }
    render();
  });
  tbody.addEventListener("click", function (ev) {
    var more = ev.target.closest("a.more");
    if (!more) return;
    ev.preventDefault();
    toggle(more.closest("tr"));
  });
  render();
  root.dataset.readyMs = String(Math.round(performance.now()));
  root.dataset.ready = "1";
})();

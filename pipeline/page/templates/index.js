
(function () {
  "use strict";
  var root = document.documentElement;
  root.classList.remove("no-js");
  var D = JSON.parse(document.getElementById("trncat-data").textContent);
  var STORE = TRNCAT_STORE(D);
  var SIZES = {any: [0, Infinity], xs: [0, 1e9], s: [1e9, 4e9], m: [4e9, 1e10], l: [1e10, 3.5e10],
               xl: [3.5e10, 1e11], xxl: [1e11, Infinity]};
  var STATUSES = ["all", "pass", "fail", "reg", "excluded", "unmeasured", "error"];
  var CORES = ["any", "1", "2", "4", "8", "16", "32", "64"];
  var DEVICES = ["neuron", "cpu", "cuda", "all"];
  var DEFAULTS = {task: D.default.task, view: D.default.view, q: "", status: "all", cores: "any", size: "any",
                  device: D.default.device, page: 0, m: ""};
  var state = {sort: "", dir: 1};
  Object.keys(DEFAULTS).forEach(function (k) { state[k] = DEFAULTS[k]; });
  var $ = function (id) { return document.getElementById(id); };
  var tbody = $("rows");

  function el(tag, cls, text) {
    var n = document.createElement(tag);
    if (cls) n.className = cls;
    if (text !== undefined && text !== null) n.textContent = String(text);
    return n;
  }
  var secs = TRNCAT_FORMAT.secs, bytes = TRNCAT_FORMAT.bytes, params = TRNCAT_FORMAT.params;
  var metric = TRNCAT_FORMAT.metric;
  var TASKS = TRNCAT_TASKS(D, el, metric, STORE), taskView = TASKS.view, tableCols = TASKS.tableCols;
  var NCOLS = TASKS.ncols(state.task);
  var statusLabel = TRNCAT_FORMAT.statusLabel, command = TRNCAT_FORMAT.command, toolchain = TRNCAT_FORMAT.toolchain;
  var dlamiCommand = TRNCAT_FORMAT.dlamiCommand, runBadges = TRNCAT_FORMAT.runBadges, runNotes = TRNCAT_FORMAT.runNotes;
  var FILES = TRNCAT_FILES(el, TRNCAT_FORMAT.fallbackCopy), copyButton = FILES.copyButton;
  var PLOTS = TRNCAT_PLOTS(STORE, el);
  var FAMILIES = TRNCAT_FAMILIES(D, STORE.hasRow, el, copyButton, function (t) { return taskView(t).label; });

  function deviceLabel(d) { return d ? (D.devices[d] || d) : "\u2014"; }
  function statusCell(e) {
    var td = el("td", "status");
    var st = e.st === "unmeasured" && e.ek ? "excluded" : e.st;
    td.appendChild(el("span", "badge b-" + st, st === "excluded" ? "excluded" : statusLabel(st)));
    if (e.device === "cpu" || e.device === "cuda" || e.device === "trainium3") {
      var dev = el("span", "badge b-dev", deviceLabel(e.device));
      dev.title = "measured on " + deviceLabel(e.device) + ", not on Trainium2";
      td.appendChild(dev);
    }
    // gr: the answer check's grade (issue 31); a diverging run is a fail, never shown as runs
    if (e.st === "pass" && (e.gr || e.cos !== null && e.cos !== undefined)) {
      var grade = el("span", "badge b-grade", e.gr || "grade unknown");
      grade.title = e.gr ? "answer check against a CPU float32 reference: " + e.gr :
        "an older record: its answer was checked by cosine only, its grade is unknown";
      td.appendChild(grade);
    }
    runBadges(e).forEach(function (b) { var n = el("span", "badge " + b[0], b[1]); n.title = b[2]; td.appendChild(n); });
    if (e.reg) td.appendChild(el("span", "badge b-reg", "regression"));
    // Every measured row says who measured it: the project's CI, or a community / local submission.
    if (e.src) td.appendChild(el("span", "source src-" + (e.src === "ci" ? "ci" : "other"), e.src === "ci" ? "CI" : e.src));
    if (e.st === "fail" || e.st === "error") {
      var reason = [e.stage, e.code, e.gr === "diverges" ? "diverges at step " + e.gst : null].filter(Boolean).join(" \u00b7 ");
      if (reason) { var r = el("span", "reason", reason); if (e.msg) r.title = e.msg; td.appendChild(r); }
    }
    if (e.ek) {
      if (st !== "excluded") td.appendChild(el("span", "badge b-excluded", "excluded"));
      td.appendChild(el("span", "reason excluded-reason", e.er));
    }
    return td;
  }
  function row(item) {
    var e = STORE.entry(state.task, item[0]);
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
    more.href = e.sc ? "scripts/" + e.id + "/run.py" : "#";
    model.appendChild(more);
    tr.appendChild(model);
    tr.appendChild(statusCell(e));
    tr.appendChild(el("td", "device", deviceLabel(e.device)));
    var cores = e.st === "pass" ? e.cores : (e.pc !== null ? e.pc + " (plan)" : e.cores);
    tr.appendChild(el("td", "num", cores === null || cores === undefined ? "\u2014" : cores));
    var compile = el("td", "num compile", TRNCAT_FORMAT.compileText(e));
    if (e.warm !== null && e.warm !== undefined) {
      compile.appendChild(el("span", "warm", "later runs start in " + secs(e.warm)));
      compile.title = "first run compiles in " + secs(e.compile) + "; later runs start in " + secs(e.warm);
    }
    if (e.ccb !== null && e.ccb !== undefined) {  // issue 25: run.py starts warm from the project's compiled cache
      compile.appendChild(el("span", "warm", "compiled cache " + bytes(e.ccb)));
      compile.title += "; run.py starts warm from the project's compiled cache (" + bytes(e.ccb) + ")";
    }
    tr.appendChild(compile);
    tableCols(e.task).forEach(function (m) {
      var td = el("td", "num", metric(e, m));
      if (m.cell_title) { if (e[m.cell_title]) td.title = e[m.cell_title]; }  // where the figure comes from
      else if (m.fmt === "usd") td.title = TRNCAT_FORMAT.priceText(e);
      tr.appendChild(td);
    });
    tr.appendChild(el("td", "num", bytes(e.mem)));
    tr.appendChild(el("td", "num", params(e.params)));
    tr.appendChild(el("td", "date", e.date || "\u2014"));
    var tc = el("td", "toolchain");
    toolchain(e, taskView(e.task).lib).forEach(function (line) { tc.appendChild(el("span", null, line)); });
    tr.appendChild(tc);
    return tr;
  }

  function deviceShown(device) { return state.device === "all" || !device || device === state.device; }
  function matches(ix, no, q) {
    // whether entry no of the task's (columnar) index passes the search and the filters
    var C = ix.cols;
    if (q && ix.lid[no].indexOf(q) < 0) return false;
    if (!deviceShown(C.device[no])) return false;
    switch (state.status) {
      case "pass": case "fail": case "error": case "unmeasured": if (C.st[no] !== state.status) return false; break;
      case "reg": if (!C.reg[no]) return false; break;
      case "excluded": if (!C.ek[no]) return false; break;
    }
    var need = C.need[no], p = C.params[no];
    if (state.cores !== "any" && !(need !== null && need <= +state.cores)) return false;
    if (state.size !== "any") {
      var range = SIZES[state.size];
      if (p === null || p < range[0] || p >= range[1]) return false;
    }
    return true;
  }
  function firstView() {
    // the view the server rendered, shown from the inline first page before the task's index is fetched
    return D.first && state.task === D.default.task && state.view === D.default.view && state.device === D.default.device &&
      !state.q.trim() && state.status === "all" && state.cores === "any" && state.size === "any" && !state.sort && !state.page;
  }
  function visible() {
    // the view's rows after the filters (null: the task's index is still to fetch)
    var ix = STORE.loaded(state.task, state.sort);
    if (!ix) {
      return !firstView() ? null : {listing: {date: STORE.date(state.task, state.view)}, total: D.first.total,
                                    shown: D.first.items, count: D.first.shown, hidden: D.first.hidden};
    }
    var listing = ix.lists[state.view], sortCol = ix.cols[state.sort] || [];
    var sortKey = function (item) { return state.sort === "rank" ? item[1] : sortCol[item[0]]; };
    var items = listing ? listing.items : [];
    var q = state.q.trim().toLowerCase();
    var shown = [], hidden = 0, devices = ix.cols.device;
    for (var k = 0; k < items.length; k++) {
      var no = items[k][0];
      if (matches(ix, no, q)) shown.push(items[k]);
      else if (!deviceShown(devices[no])) hidden++;
    }
    if (state.sort) {
      shown.sort(function (a, b) {
        var x = sortKey(a), y = sortKey(b);
        if (x === y) return 0;
        if (x === null || x === undefined) return 1;
        if (y === null || y === undefined) return -1;
        return (x < y ? -1 : 1) * state.dir;
      });
    }
    return {listing: listing, total: items.length, shown: shown, count: shown.length, hidden: hidden};
  }
  var SEQ = 0;
  function render(push) {
    writeHash(push);
    draw(++SEQ);
  }
  function draw(seq) {
    // the table as the state asks, once its data is at hand (fetched first, if need be; a newer render wins)
    TASKS.header(state.task);
    NCOLS = TASKS.ncols(state.task);
    if (state.sort && !document.querySelector('#catalog th[data-sort="' + state.sort + '"]')) state.sort = "";
    var empty = TASKS.empty(state.task), date = STORE.date(state.task, state.view);
    $("table-wrap").hidden = $("pager").hidden = empty;
    $("task-empty").hidden = !empty;
    $("task-empty").textContent = TASKS.emptyText(state.task);
    $("caption").textContent = taskView(state.task).label + " \u00b7 " + D.labels[state.view] + (date ?
      " \u00b7 ranked by the snapshot of " + date : state.view === "all" ? " \u00b7 every measured or excluded model, by name" : "") +
      (state.device !== "all" ? " \u00b7 " + deviceLabel(state.device) + " rows" : "");
    document.querySelectorAll(".plot-grid[data-task]").forEach(function (g) {
      g.hidden = g.dataset.task !== state.task;
      if (!g.hidden) PLOTS.watch(g);
    });
    document.querySelectorAll("#task-tabs button").forEach(function (b) { b.setAttribute("aria-selected", String(b.dataset.task === state.task)); });
    document.querySelectorAll("#view-tabs button").forEach(function (b) { b.setAttribute("aria-selected", String(b.dataset.view === state.view)); });
    document.querySelectorAll("#catalog th[data-sort]").forEach(function (th) {
      th.setAttribute("aria-sort", th.dataset.sort === state.sort ? (state.dir > 0 ? "ascending" : "descending") : "none");
    });
    var v = visible(), pages = 1, start = 0, page = [];
    if (v) {
      pages = Math.max(1, Math.ceil(v.count / D.pageSize));
      state.page = Math.min(Math.max(0, state.page), pages - 1);
      start = state.page * D.pageSize;
      page = v.shown.slice(start, start + D.pageSize);
    }
    var wait = v ? STORE.entries(state.task, page.map(function (item) { return item[0]; })) : STORE.index(state.task, state.sort);
    if (wait) {
      root.dataset.busy = "1";
      $("info").textContent = "Loading\u2026";
      wait.then(function () { if (seq === SEQ) draw(seq); }, function (err) { if (seq === SEQ) failed(err); });
      return;
    }
    var frag = document.createDocumentFragment();
    page.forEach(function (item) { frag.appendChild(row(item)); });
    if (!v.count) {
      var tr = el("tr", "empty"), td = el("td", null, v.hidden ? "No " + deviceLabel(state.device) + " row in this view; " +
        v.hidden + " measured on another device: choose \u201cevery device\u201d." :
        v.listing ? "No model matches these filters in this view" + (state.view === "all" ? "." : ": try All.") :
        "No " + D.labels[state.view] + " snapshot for " + taskView(state.task).label + " yet: see All.");
      td.colSpan = NCOLS;
      tr.appendChild(td);
      frag.appendChild(tr);
    }
    tbody.replaceChildren(frag);
    FAMILIES.update(state.q);
    $("info").textContent = v.count ?
      "Showing " + (start + 1) + "\u2013" + Math.min(start + D.pageSize, v.count) + " of " + v.count +
      (v.count < v.total ? " (" + v.total + " in this view)" : "") : "0 of " + v.total;
    $("prev").disabled = state.page === 0;
    $("next").disabled = state.page >= pages - 1;
    if (state.m) {
      var open = Array.prototype.find.call(tbody.querySelectorAll("tr[data-i]"), function (tr) { return entryOf(tr).id === state.m; });
      if (open) openDetail(open);
    }
    writeHash(false);
    delete root.dataset.busy;
    root.dataset.drawn = String(seq);
  }
  function failed(err) {
    // a data file that did not load: said in place of the rows (opened from disk, a page needs a web server to fetch)
    delete root.dataset.busy;
    var td = el("td", null, "This view's data did not load (" + err.message + ")" + (location.protocol === "file:" ?
      ": a catalog this large keeps its rows in files beside the page; serve the folder over HTTP to read them." : "; reload to try again."));
    td.colSpan = NCOLS;
    var tr = el("tr", "empty");
    tr.appendChild(td);
    tbody.replaceChildren(tr);
    $("info").textContent = "";
  }
  function entryOf(tr) { return STORE.entry(state.task, +tr.dataset.i); }

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
    var dl = TASKS.metrics(e);
    if (dl) box.appendChild(dl);
    runNotes(e, taskView(e.task)).forEach(function (n) { box.appendChild(el("p", n[0], n[1])); });
    if (e.reg) box.appendChild(el("p", "regression-note", "Regression: it passed with an older toolchain and fails with the current one (see the history)."));
    if (e.ek) box.appendChild(el("p", "excluded-note", "Excluded from the benchmark: " + e.er));
    if (e.pc !== null) {
      var plan = "Planner: needs " + e.pc + " NeuronCore" + (e.pc > 1 ? "s" : "");
      if (e.tp && e.tp > 1) plan += ", tensor parallel degree " + e.tp + " (torchrun, tp_plan=\"auto\")";
      if (e.fits === false) plan += "; does not fit the instance";
      box.appendChild(el("p", "plan", plan + (e.advice ? " \u2014 " + e.advice : "")));
    }
    if (e.st === "unmeasured") {
      box.appendChild(el("p", null, e.ek ? "It is kept out of the benchmark for that reason, so it has no measurement and no script." :
        "Not yet measured: no script yet."));
      return box;
    }
    var files = FILES.scripts(e.id);
    box.appendChild(el("p", null, "Run it: put run.py and requirements.txt in a folder, then"));
    [command(e), dlamiCommand(e)].forEach(function (text, k) {
      if (!text) return;
      if (k) box.appendChild(el("p", null, "or, on the Neuron DLAMI, in its own environment:"));
      var cmd = el("div", "command");
      cmd.appendChild(el("code", "cmd", text));
      cmd.appendChild(copyButton(function () { return text; }, "Copy command"));
      box.appendChild(cmd);
    });
    var grid = el("div", "files");
    grid.appendChild(FILES.fileBlock(e, "run.py", files[0]));
    grid.appendChild(FILES.fileBlock(e, "requirements.txt", files[1]));
    box.appendChild(grid);
    if (e.hist.length) {
      box.appendChild(el("h4", null, "History across toolchains"));
      box.appendChild(TASKS.history(e));
    }
    return box;
  }
  function openDetail(tr) {
    var d = el("tr", "detail"), td = el("td");
    td.colSpan = NCOLS;
    td.appendChild(detail(entryOf(tr)));
    d.appendChild(td);
    tr.after(d);
    tr.classList.add("open");
  }
  function toggle(tr) {
    var id = entryOf(tr).id;
    state.m = state.m === id ? "" : id;
    render(true);
  }

  // The state lives in the URL hash: each step (tab, filter, page, details) is a history entry, so back and
  // forward walk through them; typing a search replaces the current entry instead of adding one per key.
  function readHash() {
    var p = new URLSearchParams(location.hash.slice(1));
    Object.keys(DEFAULTS).forEach(function (k) { state[k] = DEFAULTS[k]; });
    if (D.tasks.indexOf(p.get("task")) >= 0) state.task = p.get("task");
    if (D.views.indexOf(p.get("view")) >= 0) state.view = p.get("view");
    if (STATUSES.indexOf(p.get("status")) >= 0) state.status = p.get("status");
    if (CORES.indexOf(p.get("cores")) >= 0) state.cores = p.get("cores");
    if (DEVICES.indexOf(p.get("device")) >= 0) state.device = p.get("device");
    if (Object.prototype.hasOwnProperty.call(SIZES, p.get("size"))) state.size = p.get("size");
    state.q = p.get("q") || "";
    state.m = p.get("m") || "";
    state.page = Math.max(0, parseInt(p.get("page"), 10) - 1 || 0);
  }
  function hashOf() {
    var p = new URLSearchParams({task: state.task, view: state.view});
    if (state.q) p.set("q", state.q);
    if (state.status !== "all") p.set("status", state.status);
    if (state.cores !== "any") p.set("cores", state.cores);
    if (state.size !== "any") p.set("size", state.size);
    if (state.device !== DEFAULTS.device) p.set("device", state.device);
    if (state.page) p.set("page", String(state.page + 1));
    if (state.m) p.set("m", state.m);
    return "#" + p.toString();
  }
  function writeHash(push) {
    var h = hashOf();
    if (h === location.hash) return;
    try {
      if (push) history.pushState(null, "", h); else history.replaceState(null, "", h);
    } catch (err) {
      if (push) location.hash = h; // where the History API is refused (file://), a plain hash change still adds an entry
    }
  }
  function syncControls() {
    $("q").value = state.q;
    $("f-status").value = state.status;
    $("f-cores").value = state.cores;
    $("f-size").value = state.size;
    $("f-device").value = state.device;
  }
  function fromHash() {
    if (location.hash === hashOf()) return;
    readHash();
    syncControls();
    render(false);
  }

  readHash();
  syncControls();
  $("task-tabs").addEventListener("click", function (ev) {
    var b = ev.target.closest("button[data-task]");
    if (b) { state.task = b.dataset.task; state.page = 0; state.m = ""; render(true); }
  });
  $("view-tabs").addEventListener("click", function (ev) {
    var b = ev.target.closest("button[data-view]");
    if (b) { state.view = b.dataset.view; state.page = 0; state.m = ""; render(true); }
  });
  $("q").addEventListener("input", function () { state.q = this.value; state.page = 0; render(false); });
  [["f-status", "status"], ["f-cores", "cores"], ["f-size", "size"], ["f-device", "device"]].forEach(function (pair) {
    $(pair[0]).addEventListener("change", function () { state[pair[1]] = this.value; state.page = 0; render(true); });
  });
  $("prev").addEventListener("click", function () { state.page -= 1; render(true); });
  $("next").addEventListener("click", function () { state.page += 1; render(true); });
  document.querySelector("#catalog thead").addEventListener("click", function (ev) {
    var th = ev.target.closest("th[data-sort]");
    if (!th) return;
    if (state.sort === th.dataset.sort) state.dir = -state.dir; else { state.sort = th.dataset.sort; state.dir = 1; }
    render(false);
  });
  tbody.addEventListener("click", function (ev) {
    var more = ev.target.closest("a.more");
    if (!more) return;
    ev.preventDefault();
    toggle(more.closest("tr"));
  });
  window.addEventListener("popstate", fromHash);
  window.addEventListener("hashchange", fromHash);
  // A catalog with data files draws its first view from the page alone, then fetches the shown task's index once that
  // view is painted and the browser is idle (sooner when a control is reached for), never before: a search typed at
  // once finds it in flight or at hand instead of starting it. The entry files stay on demand.
  var warm = function () { STORE.index(state.task).catch(function () {}); };
  ["task-tabs", "view-tabs", "pager"].forEach(function (id) { $(id).addEventListener("pointerdown", warm); });
  document.querySelector(".controls").addEventListener("focusin", warm);
  document.querySelector("#catalog thead").addEventListener("pointerdown", warm);
  render(false);
  var idle = window.requestIdleCallback ? function (f) { requestIdleCallback(f, {timeout: 500}); } : function (f) { setTimeout(f, 50); };
  // (not for a reader who asked the browser to save data: their first search fetches it, as before)
  var saving = navigator.connection && navigator.connection.saveData;
  if (!saving) requestAnimationFrame(function () { setTimeout(function () { idle(warm); }, 0); });  // after first paint
  root.dataset.readyMs = String(Math.round(performance.now()));
  root.dataset.ready = "1";
})();

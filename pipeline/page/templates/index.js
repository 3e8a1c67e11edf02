
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
  function taskView(task) { return D.taskViews[task] || {label: task, head: "", ncols: 10}; }
  var NCOLS = taskView(state.task).ncols, headTask = D.default.task;
  var FILES = TRNCAT_FILES(el), copyButton = FILES.copyButton;
  var PLOTS = TRNCAT_PLOTS(STORE, el);
  var FAMILIES = TRNCAT_FAMILIES(D, STORE.hasRow, el, copyButton);

  function deviceLabel(d) { return d ? (D.devices[d] || d) : "\u2014"; }
  function header(task) {
    // the task's header row, as the server made it (pipeline/page/cells.py head_html); sort clicks are delegated
    if (headTask === task) return;
    headTask = task;
    document.querySelector("#catalog thead").innerHTML = taskView(task).head;
  }
  function empty(task) {
    // no model of the task measured, ranked or excluded yet: the page says so instead of showing an empty table
    return D.views.every(function (v) { return !STORE.count(task, v); });
  }
  function rows(page) {
    // the page's rows as the server made them (pipeline/page/cells.py row_parts), each with its rank in this view
    var box = document.createElement("tbody");
    box.innerHTML = page.map(function (item) { return STORE.entry(state.task, item[0]); }).join("");
    var frag = document.createDocumentFragment();
    Array.prototype.forEach.call(box.querySelectorAll("tr"), function (tr, k) {
      tr.cells[0].textContent = page[k][1] === null ? "" : page[k][1];
      frag.appendChild(tr);
    });
    return frag;
  }

  function deviceShown(device) { return state.device === "all" || !device || device === state.device; }
  function matches(ix, no, q) {
    // whether entry no of the task's (columnar) index passes the search and the filters
    var C = ix.cols;
    if (q && ix.lid[no].indexOf(q) < 0) return false;
    if (!deviceShown(C.device[no])) return false;
    switch (state.status) {
      case "pass": case "fail": case "error": case "unmeasured": if (C.status[no] !== state.status) return false; break;
      case "reg": if (!C.regression[no]) return false; break;
      case "excluded": if (!C.excluded[no]) return false; break;
    }
    var need = C.cores_needed[no], p = C.params[no];
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
    header(state.task);
    NCOLS = taskView(state.task).ncols;
    if (state.sort && !document.querySelector('#catalog th[data-sort="' + state.sort + '"]')) state.sort = "";
    var none = empty(state.task), date = STORE.date(state.task, state.view);
    $("table-wrap").hidden = $("pager").hidden = none;
    $("task-empty").hidden = !none;
    $("task-empty").textContent = "No " + taskView(state.task).label.toLowerCase() + " model measured, ranked or " +
      "excluded yet: this tab fills as the benchmark runs them.";
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
    var frag = rows(page);
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
      var open = Array.prototype.find.call(tbody.querySelectorAll("tr[data-i]"), function (tr) { return idOf(tr) === state.m; });
      var more = open && STORE.details(state.task, +open.dataset.i);
      if (more) {  // its details' file first
        root.dataset.busy = "1";
        more.then(function () { if (seq === SEQ) draw(seq); }, function (err) { if (seq === SEQ) failed(err); });
        return;
      }
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
  function idOf(tr) { return tr.querySelector("td.model .hub").textContent; }
  function openDetail(tr) {
    // the entry's details as the server made them (pipeline/page/details.py); the script adds its files
    var d = el("tr", "detail"), td = el("td");
    td.colSpan = NCOLS;
    td.innerHTML = STORE.detail(state.task, +tr.dataset.i);
    var files = td.querySelector(".files");
    if (files) FILES.fill(files);
    d.appendChild(td);
    tr.after(d);
    tr.classList.add("open");
  }
  function toggle(tr) {
    var id = idOf(tr);
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
    var copy = ev.target.closest(".command button.copy");
    if (copy) return FILES.copy(copy, copy.parentNode.querySelector("code").textContent);
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
  TRNCAT_MATRIX(D, el);
  var idle = window.requestIdleCallback ? function (f) { requestIdleCallback(f, {timeout: 500}); } : function (f) { setTimeout(f, 50); };
  // (not for a reader who asked the browser to save data: their first search fetches it, as before)
  var saving = navigator.connection && navigator.connection.saveData;
  if (!saving) requestAnimationFrame(function () { setTimeout(function () { idle(warm); }, 0); });  // after first paint
  root.dataset.readyMs = String(Math.round(performance.now()));
  root.dataset.ready = "1";
})();

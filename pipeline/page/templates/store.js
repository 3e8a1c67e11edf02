// The page's data (pipeline/page/chunks.py, carried by the inline JSON as D.store): every entry inline in a small
// catalog; in a large one, per task, a columnar index (one array per search and filter field, each view's order), its
// sort columns and the entries in files beside the page, fetched from the page's own origin when a view, a search, a
// sort or a page of rows needs them (index.js asks for the shown task's index early too, once the first view is painted
// and the browser is idle).
// Entries are numbered per task in model-id order; each is its row's HTML and its details' HTML (in a large catalog,
// files of their own, fetched when details are opened), made on the server (pipeline/page/cells.py, details.py) and
// carried as parts, each distinct part once (chunks.py texts), which joined() puts together; the index's columns are
// named in full. The plots are files too (plots.js). index.js follows.
var TRNCAT_STORE = function (D) {
  "use strict";
  var S = D.store, T = {};
  function setIndex(t, cols, lists) {
    // the index is columnar: cols[field][entry number]; lid, the ids in lower case, is what a search scans
    var lid = cols.model_id.map(function (id) { return String(id).toLowerCase(); });
    t.index = {cols: cols, lid: lid, lists: lists};
    t.ids = new Set(lid);
  }
  function joined(f) {
    // the texts of a chunks.py texts(): each the parts at its places, joined
    return f.e.map(function (at) { return at.map(function (k) { return f.s[k]; }).join(""); });
  }
  function column(c, n) {
    // a column of a fetched index (chunks.py _column): its values; null when all are; or codes into its few values
    if (c === null) return new Array(n).fill(null);
    return Array.isArray(c) ? c : c.i.map(function (k) { return k < 0 ? null : c.v[k]; });
  }
  D.tasks.forEach(function (task) {
    var t = T[task] = {meta: S.tasks[task], index: null, ids: null, entries: [], details: [], pending: {}, loading: null,
                       sorting: null, sorted: !!S.inline};
    if (S.inline) {
      t.entries = joined(t.meta.rows);
      t.details = joined(t.meta.details);
      var cols = {};
      Object.keys(t.meta.cols).forEach(function (c) { cols[c] = column(t.meta.cols[c], t.meta.n); });
      setIndex(t, cols, t.meta.lists);
    }
  });
  if (D.first) {  // the first view's rows: the server's, in the table already (not repeated in the inline JSON)
    document.querySelectorAll("#rows tr[data-i]").forEach(function (tr) {
      T[D.default.task].entries[+tr.dataset.i] = tr.outerHTML;
    });
  }
  function get(path) {
    return fetch(path, {credentials: "same-origin"}).then(function (r) {
      if (!r.ok) throw new Error(path + ": HTTP " + r.status);
      return r.json();
    });
  }
  function listing(l) {
    // a view's list of a fetched index: the All view's as runs [[first, count], ...] of consecutive entry numbers
    if (!l || !l.runs) return l;
    var items = [];
    l.runs.forEach(function (run) { for (var k = 0; k < run[1]; k++) items.push([run[0] + k, null]); });
    return {date: l.date, items: items};
  }
  function sorted(t) {
    // a promise of the task's index with its sort columns too (fetched once, on the first sort by one of them)
    if (!t.sorting) {
      t.sorting = get(t.meta.sort).then(function (raw) {
        Object.keys(raw.cols).forEach(function (c) { t.index.cols[c] = column(raw.cols[c], t.meta.n); });
        t.sorted = true;
        return t.index;
      }, function (err) { t.sorting = null; throw err; });
    }
    return t.sorting;
  }
  function index(task, sort) {
    // a promise of the task's index, and of its sort columns when sort names one (each fetched once; a failed fetch
    // is tried again on the next call)
    var t = T[task];
    if (t.index && !sortable(t, sort)) return Promise.resolve(t.index);
    if (!t.loading) {
      t.loading = get(t.meta.index).then(function (raw) {
        var cols = {}, lists = {};
        Object.keys(raw.cols).forEach(function (c) { cols[c] = column(raw.cols[c], raw.n); });
        Object.keys(raw.lists).forEach(function (v) { lists[v] = listing(raw.lists[v]); });
        setIndex(t, cols, lists);
        return t.index;
      }, function (err) { t.loading = null; throw err; });
    }
    return t.loading.then(function () { return sortable(t, sort) ? sorted(t) : t.index; });
  }
  function sortable(t, sort) {
    // whether sorting by sort needs the task's sort columns, still to fetch
    return !!sort && sort !== "rank" && !t.sorted && !(t.index && sort in t.index.cols);
  }
  function entries(task, nos) {
    // null when every entry numbered in nos is at hand, else a promise of the files that hold the others
    var t = T[task], want = {};
    nos.forEach(function (no) { if (!t.entries[no]) want[Math.floor(no / S.chunk)] = true; });
    var chunks = Object.keys(want);
    if (!chunks.length) return null;
    return Promise.all(chunks.map(function (k) {
      if (!t.pending[k]) {
        t.pending[k] = get(t.meta.chunks[k]).then(function (f) {
          joined(f).forEach(function (a, j) { t.entries[k * S.chunk + j] = a; });
        }, function (err) { delete t.pending[k]; throw err; });
      }
      return t.pending[k];
    }));
  }
  function details(task, no) {
    // null when entry no's details are at hand, else a promise of the file that holds them
    var t = T[task], k = Math.floor(no / S.chunk);
    if (t.details[no] !== undefined) return null;
    if (!t.pending["d" + k]) {
      t.pending["d" + k] = get(t.meta.details[k]).then(function (f) {
        joined(f).forEach(function (d, j) { t.details[k * S.chunk + j] = d; });
      }, function (err) { delete t.pending["d" + k]; throw err; });
    }
    return t.pending["d" + k];
  }
  function summary(task, view) { return T[task] ? T[task].meta.lists[view] : null; }
  function count(task, view) {
    var l = summary(task, view);
    return !l ? 0 : l.items ? l.items.length : l.n;
  }
  function hasRow(lower, fetchAll) {
    // whether any task has an entry with this id (lower case); with fetchAll, a promise while some task's index is
    // still to fetch (without, the indexes at hand answer)
    var missing = D.tasks.filter(function (task) { return !T[task].ids; });
    if (D.tasks.some(function (task) { return T[task].ids && T[task].ids.has(lower); })) return true;
    return fetchAll && missing.length ? Promise.all(missing.map(index)) : false;
  }
  return {
    index: index, entries: entries, details: details, hasRow: hasRow, count: count,
    plots: function (path) { return get(path); },  // a task's plots (a list of SVG texts), fetched with its tab
    // the task's index, if at hand (and with its sort columns, when sort names one), else null
    loaded: function (task, sort) { var t = T[task]; return t && t.index && !sortable(t, sort) ? t.index : null; },
    entry: function (task, no) { return T[task].entries[no]; },  // its row's HTML
    detail: function (task, no) { return T[task].details[no]; },  // its details' HTML, once details() has them
    date: function (task, view) { var l = summary(task, view); return l ? l.date : null; },
    listed: function (task, view) { return !!summary(task, view); }
  };
};

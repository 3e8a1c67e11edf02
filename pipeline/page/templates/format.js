// Number and text formats of the catalog page (kept in step with pipeline/page/plots.py); index.js follows in the same script.
var TRNCAT_FORMAT = (function () {
  "use strict";
  function secs(v) {
    if (v === null || v === undefined) return "\u2014";
    if (v < 1) return (v * 1000).toFixed(0) + " ms";
    if (v < 100) return v.toFixed(1) + " s";
    if (v < 600) return v.toFixed(0) + " s";
    return (v / 60).toFixed(0) + " min";
  }
  // keep in step with pipeline/page/catalog.py DEMO_TITLE
  var D_WARM = {
    "verified": ["b-warm", "warm start verified", "a second trn2 runner with an empty cache ran this row's run.py --require-warm: every graph came from its compiled-cache bundle, none compiled"],
    "emulated": ["b-dev", "warm start: emulated", "only the Neuron emulator checked this bundle's warm start: not a Trainium2 verification"],
    "missed": ["b-fallback", "warm check missed", "a second trn2 runner ran this row's run.py --require-warm: some graphs compiled instead of coming from the bundle"],
    "refused": ["b-fallback", "warm check refused", "a second trn2 runner's run.py would not start warm from this bundle (another key or toolchain)"],
    "error": ["b-fallback", "warm check failed", "the second machine's run.py --require-warm failed before counting"]
  };
  var D_DEMO_TITLE = "a row of trncat's offline demo: a tiny model measured on this machine's CPU, priced at an " +
    "invented demo price; not a Trainium2 or a GPU result";
  function compileText(e) {
    // a row's compile cell: a CPU row compiles nothing (keep in step with pipeline/page/catalog.py compile_text)
    return e.device === "cpu" ? "\u2014, not compiled on CPU" : secs(e.compile);
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
  function usd(v) {
    // keep in step with pipeline/page/catalog.py usd_text
    if (v === null || v === undefined) return "\u2014";
    if (v >= 100) return "$" + v.toFixed(0);
    if (v >= 1) return "$" + v.toFixed(2);
    return v >= 0.01 ? "$" + v.toFixed(3) : "< $0.01";
  }
  function priceText(e) {
    // a cost cell's title: the price it came from (keep in step with pipeline/page/catalog.py price_text)
    if (e.usd === null || e.usd === undefined) {
      return e.device === "cpu" ? "No cost: a CPU row names no instance, so it has no price" :
        "No cost: the price table has no price for this row's instance under the build's purchase option";
    }
    var text = "At $" + String(e.usd) + " per instance-hour (" + e.popt + ", " + (e.preg || "region not stated") + "; " +
      e.psrc + "; " + (e.pdate || "undated") + "), for the run's share of the instance";
    return e.st !== "pass" ? text + "; no cost: the run did not pass" : text;
  }
  function metric(e, m) {
    // a task metric's cell (keep in step with pipeline/page/html.py metric_text; m is one of D.taskViews[task].cols)
    var v = e[m.key];
    if (v === null || v === undefined) return "\u2014";
    if (m.fmt === "secs") return secs(v);
    if (m.fmt === "rate") return rate(v);
    if (m.fmt === "res") return v + "\u00b2" + (e.steps === null || e.steps === undefined ? "" : " \u00b7 " + e.steps + " steps");
    if (m.fmt === "usd") return usd(v);
    return String(v);
  }
  function statusLabel(st) {
    return {pass: "runs", fail: "fails", error: "infra error", unmeasured: "not yet measured"}[st] || st;
  }
  function command(e) {
    // keep in step with pipeline/page/catalog.py command()
    var c = e.cores || e.pc || 1;
    var dev = (e.device === "cpu" || e.device === "cuda") ? " --device " + e.device : "";
    return FRESH_VENV + " && " + (c > 1 ? "torchrun --nproc-per-node " + c + " run.py" : "python run.py") + dev;
  }
  var FRESH_VENV = "python3 -m venv .venv && . .venv/bin/activate && pip install -r requirements.txt";
  function dlamiCommand(e) {
    // The Neuron DLAMI keeps the stack in /opt/aws_neuronx_venv_torch_neuronx_<major>_<minor>_0
    // (pipeline/backends/neuron/backend.py dlami_venv; docs/neuron-facts.md).
    var m = /^(\d+)\.(\d+)/.exec(e.tnx || "");
    if (e.device !== "neuron" || !m) return null;
    var venv = "/opt/aws_neuronx_venv_torch_neuronx_" + m[1] + "_" + m[2] + "_0";
    return command(e).replace(FRESH_VENV, "source " + venv + "/bin/activate && pip install -r requirements.txt");
  }
  function fallbackCopy(text) {
    // copying without the Clipboard API (an http:// page, an old browser): a hidden textarea and execCommand
    var ta = document.createElement("textarea");
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
  function runBadges(e) {
    // [class, text, title] of what a run did that its verdict alone does not say (pipeline/page/html.py renders the same)
    var out = [];
    if (e.fb && e.fb.length) out.push(["b-fallback", "CPU fallback", "ops run on the CPU, not the device: " + fallbackText(e.fb)]);
    if (e.rc) out.push(["b-fallback", "recompiled", e.rc + " graph(s) compiled during the timed calls: the speed figures include compilation"]);
    if (e.demo) out.push(["b-demo", "demo", D_DEMO_TITLE]);
    // wv: the bundle's second-machine warm check (issue 32); pipeline/page/warm.py's WARM_BADGES, the same three fields
    if (e.wv && Object.prototype.hasOwnProperty.call(D_WARM, e.wv)) out.push(D_WARM[e.wv]);
    return out;
  }
  function runNotes(e, tv) {
    // [class, text] lines of the details: CPU fallback, recompiles, the warm start, the answer check
    var out = [];
    if (e.fb && e.fb.length) out.push(["fallback-note", "These ops ran on the CPU instead of the device (TorchNeuron's " +
      "eager fallback; it still runs unmodified): " + fallbackText(e.fb) + "."]);
    if (e.rc) out.push(["fallback-note", e.rc + " graph(s) compiled again during the timed calls: its speed figures include compilation."]);
    if (e.warm !== null && e.warm !== undefined) out.push([null, "The first run compiles in " + secs(e.compile) +
      "; later runs start in " + secs(e.warm) + " from the compile cache."]);
    // ccb / ccs: the compiled-cache bundle run.py starts warm from (issue 25), or why there is none
    if (e.ccb !== null && e.ccb !== undefined) out.push([null, "Its run.py starts warm: it downloads the " + bytes(e.ccb) +
      " NEFF cache this project's CI compiled (digest checked; --cold compiles instead) rather than compile for " +
      secs(e.compile) + "."]);
    else if (e.ccs) out.push([null, "No compiled cache ships with this row: " + e.ccs]);
    // pf: how a compiling run ran the prompt (the record's prefill_mode)
    if (e.pf === "eager") out.push([null, "The prompt ran eagerly (op by op, not through the compiled forward): its " +
      "TTFT and first call include eager kernels."]);
    // tv: the task's view (D.taskViews[task]): what its answer check compares
    if (e.usd !== null && e.usd !== undefined) out.push([null, "Price: " + priceText(e) + "."]);
    if (e.gr) out.push([null, gradeText(e, tv)]);
    else if (e.cos !== null && e.cos !== undefined) out.push([null, "Answer check: " + (tv.cm || "cosine") + " " +
      e.cos + " between " +
      tv.compared + " and a CPU float32 reference of the same input" + (e.thr === null || e.thr === undefined ? "" :
      " (a pass needs at least " + e.thr + ")") + "; an older record: its grade is unknown."]);
    return out;
  }
  // gr, gst, gm, gd, sig, bc, tk: the graded answer check (issue 31) and its figures
  function gradeText(e, tv) {
    var parts = [];
    if (e.tk) parts.push("largest relative error " + e.tk.map(function (g) {
      return "top-" + g[0] + " " + g[1] + " (tolerance " + g[2] + ")"; }).join(", "));
    if (e.gm !== null && e.gm !== undefined) parts.push("greedy tokens match at a rate of " + e.gm +
      (e.gd !== null && e.gd !== undefined ? ", first parting at step " + e.gd : ""));
    if (e.cos !== null && e.cos !== undefined && !e.tk) parts.push((tv.cm || "cosine") + " " + e.cos);
    if (e.sig !== null && e.sig !== undefined) parts.push("\u03c3-ratio " + e.sig + " and Bhattacharyya " + e.bc +
      " against a CPU bfloat16 run");
    return "Answer check: " + e.gr + (e.gr === "diverges" ? " at step " + e.gst : "") + ", " + tv.compared +
      " against a CPU float32 reference of the same input" + (parts.length ? ": " + parts.join("; ") : "") + ".";
  }
  function fallbackText(fb) {
    // keep in step with pipeline/page/catalog.py fallback_text()
    return fb.map(function (o) { return o[0] + " \u00d7" + o[1]; }).join(", ");
  }
  function toolchain(e, lib) {
    var lines = [];
    if (e.cc) lines.push("neuronx-cc " + e.cc);
    if (e.tnx) lines.push("torch-neuronx " + e.tnx);
    if (!lines.length && e.device) lines.push(e.device);
    if (e.tf) lines.push("transformers " + e.tf);
    if (lib && e.lib) lines.push(lib + " " + e.lib);
    return lines;
  }
  return {secs: secs, compileText: compileText, bytes: bytes, params: params, rate: rate, usd: usd, priceText: priceText, metric: metric,
          statusLabel: statusLabel, command: command,
          toolchain: toolchain, dlamiCommand: dlamiCommand, fallbackText: fallbackText, runBadges: runBadges,
          runNotes: runNotes, fallbackCopy: fallbackCopy};
})();

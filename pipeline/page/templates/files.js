// A model's files in its details (the box pipeline/page/cells.py leaves for them: .files, data-id, data-sc when it
// has scripts beside the page) and the copy buttons: run.py / requirements.txt inline (a small catalog) or fetched
// from beside the page (scripts/, in the Space's tree). index.js follows.
var TRNCAT_FILES = function (el) {
  "use strict";
  var SCRIPTS = null;
  function scripts(id) {
    if (SCRIPTS === null) SCRIPTS = JSON.parse(document.getElementById("trncat-scripts").textContent);
    var slots = SCRIPTS.models[id] || [null, null];
    return slots.map(function (s) { return s === null || s === undefined ? null : SCRIPTS.texts[s]; });
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
  function copy(b, text) {
    var label = b.dataset.label || (b.dataset.label = b.textContent);
    var done = function (ok) { b.textContent = ok ? "Copied" : "Copy failed"; setTimeout(function () { b.textContent = label; }, 1500); };
    if (text === null) return done(false);
    if (navigator.clipboard && window.isSecureContext) {
      navigator.clipboard.writeText(text).then(function () { done(true); }, function () { done(fallbackCopy(text)); });
    } else {
      done(fallbackCopy(text));
    }
  }
  function copyButton(getText, label) {
    var b = el("button", "copy", label || "Copy");
    b.type = "button";
    b.addEventListener("click", function () { copy(b, getText()); });
    return b;
  }
  function fileBlock(id, sc, name, text) {
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
    if (sc) {
      var rel = el("a", "download", "open file");
      rel.href = "scripts/" + id + "/" + name;
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
  function fill(box) {
    var id = box.dataset.id, sc = box.hasAttribute("data-sc"), files = scripts(id);
    box.appendChild(fileBlock(id, sc, "run.py", files[0]));
    box.appendChild(fileBlock(id, sc, "requirements.txt", files[1]));
  }
  return {copyButton: copyButton, copy: copy, fill: fill};
};

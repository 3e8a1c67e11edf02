// A model's files in its details: the copy buttons, and run.py / requirements.txt inline (a small catalog) or fetched
// from beside the page (scripts/, in the Space's tree). index.js follows.
var TRNCAT_FILES = function (el, fallbackCopy) {
  "use strict";
  var SCRIPTS = null;
  var $ = function (id) { return document.getElementById(id); };
  function scripts(id) {
    if (SCRIPTS === null) SCRIPTS = JSON.parse($("trncat-scripts").textContent);
    var slots = SCRIPTS.models[id] || [null, null];
    return slots.map(function (s) { return s === null || s === undefined ? null : SCRIPTS.texts[s]; });
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
    if (e.sc) {
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
  return {scripts: scripts, copyButton: copyButton, fileBlock: fileBlock};
};

// The search box for a model with no row: the family evidence `trncat check` answers from, guessed here from the name
// only. D.fam: per family, [model_type, architecture, its line as pipeline/page/families.py family_line says it].
var TRNCAT_FAMILIES = function (D, hasRow, el, copyButton) {
  "use strict";
  // A Hub model id (pipeline/ids.py): only such text is ever put in a command to copy.
  var MODEL_ID = /^[A-Za-z0-9](?:[A-Za-z0-9._-]{0,94}[A-Za-z0-9])?\/[A-Za-z0-9](?:[A-Za-z0-9._-]{0,94}[A-Za-z0-9])?$/;
  var F = D.fam || [];
  function norm(s) { return String(s || "").toLowerCase().replace(/[-_.\s]/g, ""); }
  function stem(arch) { return String(arch).replace(/(For[A-Z]\w*|Model|Pipeline)$/, ""); }
  function keys(f) { return [f[0], stem(f[1])].map(norm).filter(function (k) { return k.length >= 3; }); }
  function guesses(id) {
    var name = norm(id.split("/").pop());
    return F.filter(function (f) { return keys(f).some(function (k) { return name.indexOf(k) >= 0; }); });
  }
  var asked = null;
  function update(q) {
    var card = document.getElementById("family-card");
    var id = q.trim(), lower = id.toLowerCase();
    asked = q;
    // only a Hub id is looked up in every task's index (fetched, in a catalog with data files); other text is
    // looked up in the indexes at hand
    var known = id.indexOf("/") < 0 || hasRow(lower, MODEL_ID.test(id));
    if (known) {
      card.hidden = true;
      card.replaceChildren();
      // a catalog with data files: answered once every task's index is fetched, if the search has not moved on
      if (known.then) known.then(function () { if (asked === q) update(q); }, function () {});
      return;
    }
    var frag = document.createDocumentFragment();
    frag.appendChild(el("p", "family-head", id + " has no row in this catalog: trncat has not measured it."));
    var found = guesses(id);
    if (found.length) {
      frag.appendChild(el("p", null, "Families whose name it contains (a guess from the name alone; trncat check reads its config and card):"));
      var list = el("ul", "family-list");
      found.slice(0, 6).forEach(function (f) { list.appendChild(el("li", null, f[2])); });
      frag.appendChild(list);
    } else {
      frag.appendChild(el("p", null, "No measured family matches its name: trncat check reads its config and card to find its own."));
    }
    if (MODEL_ID.test(id) && !/--|\.\.|\.git$/.test(id)) {
      var text = "trncat check " + id;
      var cmd = el("div", "command");
      cmd.appendChild(el("code", "cmd", text));
      cmd.appendChild(copyButton(function () { return text; }, "Copy command"));
      frag.appendChild(cmd);
    } else {
      frag.appendChild(el("p", "muted", "That is not a Hub model id (org/name), so there is no command to run for it."));
    }
    card.replaceChildren(frag);
    card.hidden = false;
  }
  return {update: update};
};

// The filters: each select (or the URL's fragment or query, e.g.
// #status=failed&kernel=debian-7.3, a comma meaning "any of") hides the
// cell sections and grid entries whose data-* attribute does not match.
// Reads only attributes and the URL; writes only `hidden` and counts.
(function () {
  "use strict";
  var keys = ["status", "kernel", "topology", "suite"];
  var form = document.getElementById("filters");
  var count = document.getElementById("filter-count");
  var select = function (k) { return document.getElementById("filter-" + k); };
  var items = document.querySelectorAll("section.cell, a.cellref");
  var cells = document.querySelectorAll("section.cell").length;
  form.hidden = false;

  function apply() {
    var want = {};
    keys.forEach(function (k) {
      var v = select(k).value;
      if (v) { want[k] = v.split(","); }
    });
    var shown = 0;
    for (var i = 0; i < items.length; i++) {
      var el = items[i];
      var ok = keys.every(function (k) {
        return !want[k] || want[k].indexOf(el.getAttribute("data-" + k)) >= 0;
      });
      el.hidden = !ok;
      if (ok && el.tagName === "SECTION") { shown++; }
    }
    count.textContent = shown + " of " + cells + " cells shown";
  }

  // A value the select lacks (a comma list) is added as an option.
  function set(k, v) {
    var s = select(k);
    var have = false;
    for (var i = 0; i < s.options.length; i++) {
      if (s.options[i].value === v) { have = true; }
    }
    if (!have) {
      var o = document.createElement("option");
      o.value = v;
      o.textContent = v;
      s.appendChild(o);
    }
    s.value = v;
  }

  function fromUrl() {
    var q = location.hash.replace(/^#/, "");
    if (q.indexOf("=") < 0) { q = location.search.replace(/^\?/, ""); }
    if (q.indexOf("=") < 0) { return; }
    keys.forEach(function (k) { select(k).value = ""; });
    q.split("&").forEach(function (pair) {
      var kv = pair.split("=");
      try {
        var k = decodeURIComponent(kv[0]);
        if (keys.indexOf(k) >= 0) { set(k, decodeURIComponent(kv[1] || "")); }
      } catch (e) { /* a malformed pair is ignored */ }
    });
  }

  function toUrl() {
    var q = keys.filter(function (k) { return select(k).value; }).map(function (k) {
      return k + "=" + encodeURIComponent(select(k).value);
    }).join("&");
    try { history.replaceState(null, "", q ? "#" + q : location.pathname); } catch (e) { /* file:// may refuse */ }
  }

  keys.forEach(function (k) {
    select(k).addEventListener("change", function () { apply(); toUrl(); });
  });
  window.addEventListener("hashchange", function () { fromUrl(); apply(); });
  fromUrl();
  apply();
})();

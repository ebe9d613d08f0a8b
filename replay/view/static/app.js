// Chains too long to verify before a page answers (CHAIN_INLINE): verified by /chain, filled in.
// Live pages: follow the server-sent events of /live and swap in the fresh #live block.
(function () {
  "use strict";
  function verifyChains() {
    document.querySelectorAll("a.chain-pending[data-chain]").forEach(function (link) {
      link.classList.remove("chain-pending");
      link.textContent = "verifying…";
      fetch("/chain?id=" + encodeURIComponent(link.dataset.chain), { credentials: "same-origin" })
        .then(function (r) { return r.json(); })
        .then(function (c) {
          var shown = document.createElement("span");
          if (c.ok) {
            shown.className = "ok";
            shown.textContent = "verified ✓ (" + Number(c.checked).toLocaleString("en") + " events)";
          } else {
            shown.className = "bad";
            shown.textContent = (c.seq === null || c.seq === undefined ? "projection differs"
              : "broken at seq " + c.seq) + (c.conversation_id && c.conversation_id !== link.dataset.chain
              ? " of ancestor " + c.conversation_id : "") + ": " + (c.reason || c.message || "");
          }
          link.replaceWith(shown);
        })
        .catch(function () { link.textContent = "verify (failed to load)"; });
    });
  }
  verifyChains();
  var config = document.getElementById("live-config");
  if (!config || !window.EventSource) { return; }
  var live = JSON.parse(config.textContent);
  var url = "/live?after=" + encodeURIComponent(live.after) +
    (live.conversation === null ? "" : "&c=" + encodeURIComponent(live.conversation));
  var status = document.getElementById("live-status");
  var busy = false;
  function refresh() {
    if (busy) { return; }
    busy = true;
    fetch(window.location.href, { credentials: "same-origin" })
      .then(function (r) { return r.text(); })
      .then(function (html) {
        var fresh = new DOMParser().parseFromString(html, "text/html").getElementById("live");
        var current = document.getElementById("live");
        if (fresh && current) { current.replaceWith(document.importNode(fresh, true)); }
        verifyChains();
        document.body.dataset.updates = String(Number(document.body.dataset.updates || 0) + 1);
      })
      .finally(function () { busy = false; });
  }
  var source = new EventSource(url);
  source.addEventListener("open", function () { if (status) { status.hidden = false; } });
  source.addEventListener("append", refresh);
})();

// Chains not verified before a page answered (the list's, and a conversation's beyond
// CHAIN_INLINE): verified by /chains after the page is shown, a batch of about CHAIN_BATCH
// events per request (a long chain alone), and filled in.
// Live pages: follow the server-sent events of /live and swap in the fresh #live block.
(function () {
  "use strict";
  var CHAIN_BATCH = 500;
  function show(link, c) {
    var shown = document.createElement("span");
    if (c && c.ok) {
      shown.className = "ok";
      shown.textContent = "verified ✓ (" + Number(c.checked).toLocaleString("en") + " events)";
    } else {
      c = c || {};
      shown.className = "bad";
      shown.textContent = (c.seq === null || c.seq === undefined ? "projection differs"
        : "broken at seq " + c.seq) + (c.conversation_id && c.conversation_id !== link.dataset.chain
        ? " of ancestor " + c.conversation_id : "") + ": " + (c.reason || c.message || "");
    }
    link.replaceWith(shown);
  }
  function send(group) {
    var query = group.map(function (link) {
      return "id=" + encodeURIComponent(link.dataset.chain);
    }).join("&");
    fetch("/chains?" + query, { credentials: "same-origin" })
      .then(function (r) {
        if (!r.ok) { throw new Error("/chains: " + r.status); }
        return r.json();
      })
      .then(function (states) {
        group.forEach(function (link) { show(link, states[link.dataset.chain]); });
      })
      .catch(function () {
        group.forEach(function (link) { link.textContent = "verify (failed to load)"; });
      });
  }
  function verifyChains() {
    var batch = [], held = 0;
    // a row painted with the state of an earlier look is checked again (it stays shown)
    document.querySelectorAll("a.chain-pending[data-chain], .chain-recheck[data-chain]")
      .forEach(function (link) {
      if (link.classList.contains("chain-pending")) { link.textContent = "verifying…"; }
      link.classList.remove("chain-pending", "chain-recheck");
      var events = Number(link.dataset.events) || CHAIN_BATCH;
      if (batch.length && held + events > CHAIN_BATCH) {
        send(batch);
        batch = [];
        held = 0;
      }
      batch.push(link);
      held += events;
    });
    if (batch.length) { send(batch); }
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

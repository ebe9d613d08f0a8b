// Live pages: follow the server-sent events of /live and swap in the fresh #live block.
(function () {
  "use strict";
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
        document.body.dataset.updates = String(Number(document.body.dataset.updates || 0) + 1);
      })
      .finally(function () { busy = false; });
  }
  var source = new EventSource(url);
  source.addEventListener("open", function () { if (status) { status.hidden = false; } });
  source.addEventListener("append", refresh);
})();

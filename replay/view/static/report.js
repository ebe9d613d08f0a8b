// The report's one control: open or close every collapsed block (thinking, system prompt).
(function () {
  "use strict";
  document.body.dataset.js = "on";
  var button = document.getElementById("toggle-all");
  var blocks = document.querySelectorAll("details");
  if (!button || !blocks.length) { return; }
  button.hidden = false;
  button.addEventListener("click", function () {
    var open = button.textContent === "expand all";
    blocks.forEach(function (d) { d.open = open; });
    button.textContent = open ? "collapse all" : "expand all";
  });
})();

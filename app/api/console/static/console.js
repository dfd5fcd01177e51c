// Live updates for the console; every page also reads fine without this file.
(function () {
  "use strict";

  function statusBadge(value) {
    var span = document.createElement("span");
    span.className = "status status-" + value;
    span.textContent = value;
    return span;
  }

  function followRun(section) {
    var source = new EventSource(section.getAttribute("data-events"));
    // A form on its way (cancel) must not be overtaken by a reload of this page.
    document.addEventListener("submit", function () { source.close(); });
    source.addEventListener("receipt", function (message) {
      var receipt = JSON.parse(message.data);
      var row = document.getElementById("receipt-" + (receipt.item_key || "") + "-" + receipt.call_key);
      if (row) {
        var cell = row.querySelector(".status-cell");
        cell.replaceChildren(statusBadge(receipt.status));
        if (receipt.duration_ms !== null) {
          row.querySelector(".duration-cell").textContent = receipt.duration_ms.toFixed(1) + " ms";
        }
      } else {
        source.close();
        window.location.reload();
      }
    });
    source.addEventListener("end", function (message) {
      source.close();
      document.getElementById("run-status").replaceChildren(statusBadge(JSON.parse(message.data).status));
      window.location.reload();
    });
  }

  function refreshRows(body) {
    window.setTimeout(function () {
      fetch(body.getAttribute("data-refresh"), { credentials: "same-origin" })
        .then(function (response) { return response.ok ? response.text() : Promise.reject(); })
        .then(function (html) {
          var page = new DOMParser().parseFromString(html, "text/html");
          var fresh = page.getElementById("run-rows");
          if (fresh) {
            body.replaceWith(fresh);
            if (fresh.hasAttribute("data-refresh")) { refreshRows(fresh); }
          }
        })
        .catch(function () { refreshRows(body); });
    }, 2000);
  }

  document.addEventListener("DOMContentLoaded", function () {
    var run = document.querySelector("[data-events]");
    if (run && window.EventSource) { followRun(run); }
    var rows = document.querySelector("[data-refresh]");
    if (rows && window.fetch) { refreshRows(rows); }
  });
})();

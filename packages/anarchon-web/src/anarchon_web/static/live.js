/* anarchon-web: live pages. Every data-refresh-s seconds (the server renders it on <body>) this re-reads
   the page's own URL, query string included (so filters, page and time range stay as they are), and
   swaps each element marked data-live for the element of the same id in the fresh page. It never sends a
   form, waits while the tab is hidden, while a form control has the focus (someone is typing a filter)
   and while text inside a live region is selected, and leaves the page as it is when a read fails.
   Without this script (or with refresh_s=0) the pages are the same, refreshed by reloading them. */
(function () {
  "use strict";
  var body = document.body;
  var seconds = Number(body && body.getAttribute("data-refresh-s"));
  if (!(seconds > 0) || typeof window.fetch !== "function" || typeof window.DOMParser !== "function") {
    return;
  }
  var timer = null;
  var reading = false;
  var state = document.createElement("span");
  state.className = "live-state";
  var header = document.querySelector("header");
  if (header) {
    header.appendChild(state);
  }

  function show(words, failed) {
    state.textContent = words;
    state.classList.toggle("failed", failed);
  }

  // What the script does now, for people and tests: waiting, reading, held (skipped a turn: busy), hidden.
  function phase(word) {
    body.setAttribute("data-live-state", word);
  }

  function busy() {
    if (document.visibilityState === "hidden") {
      return true;
    }
    var active = document.activeElement;
    if (active && active !== body && active.closest("form, input, select, textarea, [contenteditable]")) {
      return true;
    }
    var selection = window.getSelection ? window.getSelection() : null;
    if (selection && !selection.isCollapsed && selection.anchorNode) {
      var node = selection.anchorNode.nodeType === 1 ? selection.anchorNode : selection.anchorNode.parentElement;
      if (node && node.closest("[data-live]")) {
        return true;
      }
    }
    return false;
  }

  function swap(html) {
    var fresh = new DOMParser().parseFromString(html, "text/html");
    var regions = document.querySelectorAll("[data-live][id]");
    for (var i = 0; i < regions.length; i++) {
      var next = fresh.getElementById(regions[i].id);
      if (next && next.hasAttribute("data-live")) {
        regions[i].replaceWith(document.adoptNode(next));
      }
    }
    body.setAttribute("data-live-at", String(Date.now()));
  }

  function schedule() {
    if (timer === null && !reading && document.visibilityState !== "hidden") {
      timer = window.setTimeout(tick, seconds * 1000);
      phase("waiting");
    }
  }

  function tick() {
    timer = null;
    if (busy()) {
      schedule();
      phase("held");
      return;
    }
    reading = true;
    phase("reading");
    var url = window.location.href.split("#")[0];
    window.fetch(url, { headers: { Accept: "text/html" }, credentials: "same-origin", cache: "no-store" })
      .then(function (answer) {
        var type = answer.headers.get("content-type") || "";
        if (answer.redirected) {
          throw new Error("the page now answers with another page: reload it");
        }
        if (!answer.ok || type.indexOf("text/html") !== 0) {
          throw new Error("the page answered " + answer.status);
        }
        return answer.text();
      })
      .then(function (html) {
        if (!busy()) {
          swap(html);
        }
        show("live: every " + seconds + " s", false);
      })
      .catch(function (error) {
        show("live: not updated (" + (error && error.message ? error.message : "no answer") + ")", true);
      })
      .then(function () {
        reading = false;
        schedule();
      });
  }

  document.addEventListener("visibilitychange", function () {
    if (document.visibilityState === "hidden") {
      if (timer !== null) {
        window.clearTimeout(timer);
        timer = null;
      }
      phase("hidden");
    } else if (timer === null && !reading) {
      tick(); // back in view: fresh at once
    }
  });
  show("live: every " + seconds + " s", false);
  schedule();
})();

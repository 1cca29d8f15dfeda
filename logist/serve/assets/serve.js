/* logist serve's script, served from /assets/serve.js (the server's
   Content-Security-Policy allows no inline script). It follows the page's
   event stream (body[data-stream]): a job page appends each new history
   entry's row (event "step", whose id is the entry's number, so that a
   reconnect resumes after the last one shown) and replaces the part above
   the timeline (event "state"); the jobs list replaces its table ("jobs").
   The stream is closed while the tab is hidden and opened again, from the
   last entry shown, when it is visible. The page works without it: the
   forms post and come back to the page. */
(function () {
  "use strict";
  var body = document.body, url = body.dataset.stream, live = document.getElementById("live");
  if (!url || !window.EventSource) { return; }
  var source = null, retry = null;
  // What the person has typed into a form that is still the same form (the
  // same decision at the same entry) survives the state part being replaced.
  function typedIn(box) {
    var typed = {};
    box.querySelectorAll("form").forEach(function (form) {
      var text = form.querySelector("textarea");
      if (text && text.value) { typed[form.action + "@" + form.elements.at.value] = text.value; }
    });
    return typed;
  }
  function replaceKeepingTyped(box, html) {
    var typed = typedIn(box), focused = null, active = document.activeElement;
    if (active && active.tagName === "TEXTAREA" && box.contains(active) && active.form) {
      focused = active.form.action + "@" + active.form.elements.at.value;
    }
    box.innerHTML = html;
    box.querySelectorAll("form").forEach(function (form) {
      var text = form.querySelector("textarea"), key = form.action + "@" + form.elements.at.value;
      if (text && typed[key] !== undefined) { text.value = typed[key]; }
      if (text && key === focused) { text.focus(); text.setSelectionRange(text.value.length, text.value.length); }
    });
    // The state part now is what the stream last sent (a test waits for this before typing).
    box.dataset.streamed = "1";
  }
  function show(on) { if (live) { live.hidden = !on; } }
  function close() {
    if (source) { source.close(); source = null; }
    show(false);
  }
  function open() {
    if (source || document.hidden) { return; }
    clearTimeout(retry);
    var after = body.dataset.last;
    source = new EventSource(after === undefined ? url : url + (url.indexOf("?") < 0 ? "?" : "&") + "after=" + encodeURIComponent(after));
    source.addEventListener("open", function () { show(true); });
    source.addEventListener("step", function (event) {
      var steps = document.getElementById("steps");
      if (steps) { steps.insertAdjacentHTML("beforeend", event.data); }
      body.dataset.last = event.lastEventId;
    });
    source.addEventListener("state", function (event) {
      var state = document.getElementById("state");
      if (state) { replaceKeepingTyped(state, event.data); }
    });
    source.addEventListener("jobs", function (event) {
      var jobs = document.getElementById("jobs");
      if (jobs) { jobs.innerHTML = event.data; }
    });
    source.addEventListener("error", function () {
      show(false);
      // The browser reconnects by itself unless the server refused (a new
      // run, a new token): then try again now and then, from the last entry shown.
      if (source && source.readyState === EventSource.CLOSED) {
        source = null;
        retry = setTimeout(open, 2000);
      }
    });
  }
  document.addEventListener("visibilitychange", function () { if (document.hidden) { close(); } else { open(); } });
  window.addEventListener("pagehide", close);
  open();
})();

/* logist serve's script, served from /assets/serve.js (the server's
   Content-Security-Policy allows no inline script). It follows the page's
   event stream (body[data-stream]): a job page appends each new history
   entry's row (event "step", whose id is the entry's number, so that a
   reconnect resumes after the last one shown) and replaces the part above
   the timeline (event "state"); the jobs list replaces its table ("jobs").
   The stream is closed while the tab is hidden and opened again, from the
   last entry shown, when it is visible. The page works without it: the
   forms post and come back to the page.

   Nothing typed is lost: when the state part is replaced, text typed into a
   form that is still there (the same decision at the same entry) stays in
   it; text whose form went away (the job moved on) is kept beside the new
   state (#kept, the markup pages.kept_html writes for a refused decision),
   and put back in its decision's form whenever the job offers it again. */
(function () {
  "use strict";
  var body = document.body, url = body.dataset.stream, live = document.getElementById("live");
  // A page sent in answer to a POST (a refused decision) shows the job page's
  // address: a reload asks for the page, never the POST again.
  if (body.dataset.address && location.pathname !== body.dataset.address && window.history.replaceState) {
    history.replaceState(null, "", body.dataset.address);
  }
  if (!url || !window.EventSource) { return; }
  var source = null, retry = null;

  function actionOf(form) {
    var button = form.querySelector("button[data-action]");
    return button ? button.dataset.action : "";
  }
  function keyOf(form) { return form.action + "@" + (form.elements.at ? form.elements.at.value : ""); }
  function typedIn(box) {
    var typed = {};
    box.querySelectorAll("form").forEach(function (form) {
      var text = form.querySelector("textarea");
      if (text && text.value.trim()) {
        typed[keyOf(form)] = {text: text.value, action: actionOf(form), label: form.querySelector("button").textContent};
      }
    });
    return typed;
  }
  function statusIn(box) {
    var status = box.querySelector("h1 .status");
    return status ? status.textContent : "";
  }
  // The text of a decision that was not made, kept in #kept (one box per decision).
  function keep(typed, status) {
    var kept = document.getElementById("kept");
    if (!kept) { return; }
    var old = kept.querySelector('.kept[data-action="' + typed.action + '"]');
    if (old) { old.remove(); }
    var div = document.createElement("div"), said = document.createElement("p"), text = document.createElement("textarea");
    div.className = "kept"; div.dataset.action = typed.action; div.dataset.label = typed.label;
    said.textContent = "The job moved on: it is now " + status + ". What you typed for " + typed.label +
      " was not sent; it is kept here to copy.";
    text.readOnly = true; text.rows = 3; text.value = typed.text;
    text.setAttribute("aria-label", "what you typed for " + typed.label);
    div.appendChild(said); div.appendChild(text);
    kept.appendChild(div);
  }
  // Kept text goes back into its decision's form, empty, wherever the job offers it again.
  function refill(box) {
    document.querySelectorAll("#kept .kept").forEach(function (div) {
      box.querySelectorAll("form").forEach(function (form) {
        var text = form.querySelector("textarea");
        if (text && !text.value && actionOf(form) === div.dataset.action) {
          text.value = div.querySelector("textarea").value;
          div.querySelector("p").textContent = "What you typed for " + (div.dataset.label || div.dataset.action) +
            " was not sent; it is back in its form: check that it still applies before you send it.";
        }
      });
    });
  }
  function replaceKeepingTyped(box, html) {
    var typed = typedIn(box), focused = null, active = document.activeElement;
    if (active && active.tagName === "TEXTAREA" && box.contains(active) && active.form) {
      focused = keyOf(active.form);
    }
    box.innerHTML = html;
    var placed = {};
    box.querySelectorAll("form").forEach(function (form) {
      var text = form.querySelector("textarea"), key = keyOf(form);
      if (text && typed[key] !== undefined) { text.value = typed[key].text; placed[key] = true; }
      if (text && key === focused) { text.focus(); text.setSelectionRange(text.value.length, text.value.length); }
    });
    Object.keys(typed).forEach(function (key) { if (!placed[key]) { keep(typed[key], statusIn(box)); } });
    refill(box);
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

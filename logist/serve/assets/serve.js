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
   and put back in its decision's form whenever the job offers it again.

   A live update keeps the keyboard's focus where it was (the same control,
   found again in the new part), says a change of state in #announce (an
   aria-live region), and brings the tab's title and the counters of
   entries up to date (event "counts"). Text blocks that scroll (<pre>) are
   made reachable from the keyboard, each named for what it holds. */
(function () {
  "use strict";
  var body = document.body, url = body.dataset.stream, live = document.getElementById("live");
  // A page sent in answer to a POST (a refused decision) shows the job page's
  // address: a reload asks for the page, never the POST again.
  if (body.dataset.address && location.pathname !== body.dataset.address && window.history.replaceState) {
    history.replaceState(null, "", body.dataset.address);
  }
  // Each scrolling text block is focusable (its content can be scrolled from the keyboard) and named.
  function scrollable(root) {
    root.querySelectorAll("pre:not([tabindex])").forEach(function (pre) {
      var who = pre.parentElement && pre.parentElement.querySelector(":scope > .who"), section = pre.closest("section");
      var heading = section && section.querySelector("h3"), step = pre.closest("details.step");
      var what = who ? who.textContent + " message" : pre.closest(".held-decision") ? "held command" : heading ? heading.textContent : "text";
      pre.tabIndex = 0;
      pre.setAttribute("role", "group");
      pre.setAttribute("aria-label", (step ? "entry " + step.dataset.seq + ": " : "") + what);
    });
  }
  scrollable(document);
  // A step's full prompt is put together on a click (report.js): name its blocks once they are there.
  document.addEventListener("click", function () { setTimeout(function () { scrollable(document); }, 0); });
  // A restep asks first (its form says confirm=ask; without this script the
  // server answers with the same question as a page): a dialog that names
  // the entries it undoes, with the page's rows of them.
  // A list's button that cannot be taken back (cancel, rerun) asks first; without this script it posts at once.
  document.addEventListener("submit", function (event) {
    var said = event.target.dataset && event.target.dataset.confirm;
    if (said && !window.confirm(said)) { event.preventDefault(); event.stopImmediatePropagation(); }
  }, true);
  document.addEventListener("submit", function (event) {
    var form = event.target, ask = form.elements && form.elements.confirm;
    if (!ask || ask.value !== "ask" || !window.HTMLDialogElement) { return; }
    event.preventDefault();
    var at = Number(form.elements.at.value), to = form.elements.to.value ? Number(form.elements.to.value) : at - 1;
    var dialog = document.createElement("dialog"), heading = document.createElement("h2"), said = document.createElement("p");
    var list = document.createElement("ul"), yes = document.createElement("button"), no = document.createElement("button");
    dialog.className = "confirm"; dialog.setAttribute("aria-labelledby", "confirm-heading");
    heading.id = "confirm-heading"; heading.textContent = "Restep to entry " + to + "?";
    said.textContent = "This undoes entries " + (to + 1) + "–" + at + " (" + (at - to) + (at - to === 1 ? " entry" : " entries") +
      "): the job goes back to its state after entry " + to + " and its workspace to that entry's commit; the file changes, " +
      "answers and decisions of the later entries no longer count, and the job works on from there. " +
      "The history keeps every entry (a rewind entry is added), and the calls made stay counted.";
    for (var n = to + 1, listed = 0; n <= at; n++) {
      var row = document.getElementById("step-" + n), text = row && row.querySelector(".text");
      if (!row) { continue; }
      if (listed++ === 20) { break; }
      var item = document.createElement("li");
      item.textContent = "#" + n + " " + row.dataset.role + " " + row.dataset.action + (text && text.textContent ? ": " + text.textContent : "");
      list.appendChild(item);
    }
    list.tabIndex = 0; list.setAttribute("aria-label", "the entries it undoes");  // it scrolls when long
    yes.type = "button"; yes.textContent = "Restep to entry " + to; yes.dataset.confirm = "yes";
    no.type = "button"; no.textContent = "Cancel"; no.dataset.confirm = "no";
    [heading, said, list, yes, document.createTextNode(" "), no].forEach(function (part) { dialog.appendChild(part); });
    function done() { dialog.close(); dialog.remove(); form.querySelector("button").focus(); }
    no.addEventListener("click", done);
    dialog.addEventListener("cancel", function (e) { e.preventDefault(); done(); });
    yes.addEventListener("click", function () { ask.disabled = true; dialog.close(); form.submit(); });
    document.body.appendChild(dialog);
    dialog.showModal();
    no.focus();
  });
  if (!url || !window.EventSource) { return; }
  var source = null, retry = null, announcer = document.getElementById("announce");
  function announce(text) { if (announcer && text) { announcer.textContent = text; } }

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
  // What a control is, to find it again in a part sent anew: its form's
  // decision (and entry, or not: "loose") and its name, else its id or its link.
  function focusKey(el, loose) {
    if (el.form) {
      return "form|" + (loose ? el.form.action : keyOf(el.form)) + "|" + (el.name || el.dataset.action || el.tagName);
    }
    if (el.id) { return "id|" + el.id; }
    if (el.tagName === "A") { return "a|" + el.getAttribute("href") + "|" + el.textContent; }
    if (el.tagName === "SUMMARY" || el.tagName === "BUTTON") { return el.tagName + "|" + el.textContent; }
    return null;
  }
  // box.innerHTML = html, then done(); the focus, if it was in box, goes back
  // to the same control (else the same control of the same decision, else
  // the part's heading: never lost to the page's top).
  function replacing(box, html, done) {
    var active = document.activeElement, had = active && active !== box && box.contains(active);
    var exact = had ? focusKey(active, false) : null, loose = had ? focusKey(active, true) : null;
    var range = had && active.tagName === "TEXTAREA" ? [active.selectionStart, active.selectionEnd] : null;
    box.innerHTML = html;
    if (done) { done(); }
    scrollable(box);
    if (!had) { return; }
    var controls = box.querySelectorAll("a, button, input, textarea, select, summary, [id], [tabindex]"), found = null;
    [[exact, false], [loose, true]].forEach(function (wanted) {
      for (var i = 0; !found && wanted[0] && i < controls.length; i++) {
        if (focusKey(controls[i], wanted[1]) === wanted[0]) { found = controls[i]; }
      }
    });
    if (!found) {
      found = box.querySelector("h1") || box;
      found.tabIndex = -1;
    }
    found.focus({preventScroll: true});
    if (range && found.tagName === "TEXTAREA") { found.setSelectionRange(range[0], range[1]); }
  }
  function replaceKeepingTyped(box, html) {
    var typed = typedIn(box), before = statusIn(box);
    replacing(box, html, function () {
      var placed = {}, moved = [];
      box.querySelectorAll("form").forEach(function (form) {
        var text = form.querySelector("textarea"), key = keyOf(form);
        if (text && typed[key] !== undefined) { text.value = typed[key].text; placed[key] = true; }
      });
      Object.keys(typed).forEach(function (key) {
        if (!placed[key]) { keep(typed[key], statusIn(box)); moved.push(typed[key].label); }
      });
      refill(box);
      var now = statusIn(box), said = [];
      if (before && now && now !== before) { said.push("The job is now " + now + " (it was " + before + ")."); }
      if (moved.length) { said.push("What you typed for " + moved.join(", ") + " was not sent; it is kept above the job's state."); }
      announce(said.join(" "));
    });
    // The state part now is what the stream last sent (a test waits for this before typing).
    box.dataset.streamed = "1";
  }
  function show(on) { if (live) { live.hidden = !on; } }
  function close() {
    if (source) { source.close(); source = null; }
    show(false);
  }
  var lost = false;  // the stream broke (the server stopped or restarted): say so when it is back
  function open() {
    if (source || document.hidden) { return; }
    clearTimeout(retry);
    var after = body.dataset.last;
    source = new EventSource(after === undefined ? url : url + (url.indexOf("?") < 0 ? "?" : "&") + "after=" + encodeURIComponent(after));
    source.addEventListener("open", function () {
      show(true);
      if (lost) { lost = false; announce("Reconnected to logist serve: the page is up to date again."); }
    });
    source.addEventListener("step", function (event) {
      var steps = document.getElementById("steps");
      if (steps) { steps.insertAdjacentHTML("beforeend", event.data); scrollable(steps.lastElementChild || steps); }
      body.dataset.last = event.lastEventId;
    });
    source.addEventListener("state", function (event) {
      var state = document.getElementById("state");
      if (state) { replaceKeepingTyped(state, event.data); }
    });
    source.addEventListener("counts", function (event) {
      var counts = JSON.parse(event.data), line = document.getElementById("pages"), steps = document.getElementById("steps");
      document.title = counts.title;
      if (line) {
        var made = document.createElement("template");
        made.innerHTML = counts.pages;
        var inner = made.content.firstElementChild ? made.content.firstElementChild.innerHTML : "";
        if (line.innerHTML !== inner) { replacing(line, inner); }
      }
      var small = steps && steps.closest("section") && steps.closest("section").querySelector("h2 small");
      if (small) { small.textContent = counts.count + " entries"; }
    });
    source.addEventListener("jobs", function (event) {
      var jobs = document.getElementById("jobs");
      if (!jobs) { return; }
      // What was typed into a row's form (its budgets) stays, as long as the form is still there.
      var typed = {};
      jobs.querySelectorAll("form input:not([type=hidden])").forEach(function (box) {
        if (box.value !== box.defaultValue) { typed[box.form.action + "|" + box.name] = box.value; }
      });
      var open = {};
      jobs.querySelectorAll("details[open]").forEach(function (d) { var f = d.querySelector("form"); if (f) { open[f.action] = true; } });
      replacing(jobs, event.data, function () {
        jobs.querySelectorAll("form input:not([type=hidden])").forEach(function (box) {
          var key = box.form.action + "|" + box.name;
          if (typed[key] !== undefined) { box.value = typed[key]; }
        });
        jobs.querySelectorAll("details").forEach(function (d) { var f = d.querySelector("form"); if (f && open[f.action]) { d.open = true; } });
      });
    });
    source.addEventListener("error", function () {
      show(false);
      lost = true;
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

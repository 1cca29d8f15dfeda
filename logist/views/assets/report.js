/* The optional script of report.html, inlined into the page: opens the step
   named in the URL (#step-N), expands or collapses all steps, and assembles a
   step's full prompt on demand. The page's Content-Security-Policy allows
   exactly this text (by its sha256, computed when the page is written). */
(function () {
  "use strict";
  function stepOf(seq) { return document.getElementById("step-" + seq); }
  function openFromHash() {
    var m = /^#step-(\d+)$/.exec(location.hash);
    var step = m && stepOf(m[1]);
    if (step) { step.open = true; step.scrollIntoView({block: "start"}); }
  }
  function setAll(open) {
    var steps = document.querySelectorAll("details.step");
    for (var i = 0; i < steps.length; i++) { steps[i].open = open; }
  }
  function messagesOf(step) {
    return step.querySelectorAll(":scope > .detail > .prompt > .msg[data-new]");
  }
  function fullPrompt(step) {
    var chain = [], at = step;
    while (at) { chain.unshift(at); at = at.dataset.continues ? stepOf(at.dataset.continues) : null; }
    // The first step of the chain sent its prompt in full, system prompt included.
    var out = [], systemText = chain[0].querySelector(":scope > .detail > .prompt [data-system-text] pre");
    if (systemText) { out.push(["system", systemText.textContent]); }
    chain.forEach(function (s, i) {
      messagesOf(s).forEach(function (m) { out.push([m.dataset.role, m.querySelector("pre").textContent]); });
      var raw = s.querySelector(".raw");
      if (i < chain.length - 1 && raw) { out.push(["assistant", raw.textContent]); }
    });
    return out;
  }
  document.addEventListener("click", function (event) {
    var button = event.target.closest && event.target.closest("button.full-prompt");
    if (!button) { return; }
    var box = button.nextElementSibling, step = button.closest("details.step");
    if (box.childElementCount) { box.textContent = ""; button.textContent = "Show the full prompt"; return; }
    fullPrompt(step).forEach(function (message) {
      var div = document.createElement("div"), who = document.createElement("div"), pre = document.createElement("pre");
      div.className = "msg"; who.className = "who"; who.textContent = message[0]; pre.textContent = message[1];
      div.appendChild(who); div.appendChild(pre); box.appendChild(div);
    });
    button.textContent = "Hide the full prompt";
  });
  var expand = document.getElementById("expand-all"), collapse = document.getElementById("collapse-all");
  if (expand) { expand.addEventListener("click", function () { setAll(true); }); }
  if (collapse) { collapse.addEventListener("click", function () { setAll(false); }); }
  window.addEventListener("hashchange", openFromHash);
  openFromHash();
})();

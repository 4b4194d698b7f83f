// kmirror dashboard behaviour on top of htmx. Everything here is an enhancement: every page
// reads and acts without JavaScript. No inline scripts (the CSP forbids them), no eval.
(function () {
  "use strict";

  // ---- "updated N s ago", ticking between refreshes, stale/offline colours ----
  var offline = false;
  function fmtAge(ms) {
    var s = Math.max(0, Math.floor(ms / 1000));
    if (s < 1) return "just now";
    if (s < 60) return s + " s ago";
    var m = Math.floor(s / 60);
    if (m < 60) return m + " min " + (s % 60) + " s ago";
    return Math.floor(m / 60) + " h " + (m % 60) + " min ago";
  }
  function tick() {
    var el = document.getElementById("freshness");
    if (!el) return;
    var taken = Number(el.dataset.takenAt), serverNow = Number(el.dataset.serverNow);
    var staleAfter = Number(el.dataset.staleAfter || 5000);
    if (!el.dataset.clientAt) el.dataset.clientAt = String(Date.now());
    if (!taken) return;
    // Age as the server saw it plus the time since this element arrived: no clock skew.
    var age = serverNow - taken + (Date.now() - Number(el.dataset.clientAt));
    var text = el.querySelector(".fresh-text");
    if (text) text.textContent = (offline ? "connection lost · data from " : "updated ") + fmtAge(age);
    el.classList.toggle("stale", age > staleAfter);
    el.classList.toggle("offline", offline);
  }
  setInterval(tick, 1000);

  // Whether someone is filling in a form inside a live region (a reason, a canary name): its
  // refresh would wipe what they typed, so it waits until they send it or leave it as it was.
  // Fields kept across refreshes (hx-preserve, e.g. the topic selection) do not count.
  function editing(region) {
    var a = document.activeElement;
    if (a && a !== document.body && region.contains(a) && /^(INPUT|TEXTAREA|SELECT)$/.test(a.tagName) &&
        !a.hasAttribute("hx-preserve") && a.type !== "hidden") return true;
    var fields = region.querySelectorAll("input:not([type=hidden]):not([hx-preserve]), textarea");
    for (var i = 0; i < fields.length; i++) {
      var f = fields[i];
      var changed = (f.type === "checkbox" || f.type === "radio") ? f.checked !== f.defaultChecked : f.value !== f.defaultValue;
      if (changed) return true;
    }
    return false;
  }
  document.addEventListener("htmx:beforeRequest", function (e) {
    // No polling in background tabs (refresh as soon as the tab is visible again), nor over a
    // form someone is filling in.
    var elt = e.detail && e.detail.elt;
    if (!elt || !elt.hasAttribute || !elt.hasAttribute("data-poll")) return;
    if (document.hidden || editing(elt)) e.preventDefault();
  });
  document.addEventListener("visibilitychange", function () {
    if (!document.hidden && window.htmx) htmx.trigger(document.body, "kmirror:refresh");
  });
  document.addEventListener("htmx:afterRequest", function (e) {
    var elt = e.detail && e.detail.elt;
    if (!elt || !elt.hasAttribute || !elt.hasAttribute("data-poll")) return;
    var failed = !e.detail.successful && (!e.detail.xhr || e.detail.xhr.status === 0 || e.detail.xhr.status >= 500);
    offline = !!failed;
    tick();
  });
  document.addEventListener("htmx:sendError", function () { offline = true; tick(); });
  document.addEventListener("htmx:afterRequest", function (e) {
    // A form that started something clears itself once the server accepted it.
    var elt = e.detail && e.detail.elt;
    if (e.detail.successful && elt instanceof HTMLFormElement && elt.hasAttribute("data-reset-on-success")) {
      elt.reset();
      var details = elt.closest("details");
      if (details) details.open = false;
    }
  });

  // ---- dialogs ----
  function clearModal() {
    var m = document.getElementById("modal");
    if (m) m.innerHTML = "";
  }
  document.addEventListener("htmx:afterSettle", function (e) {
    var d = document.querySelector("#modal dialog[data-autoshow]:not([open])");
    if (d && typeof d.showModal === "function") {
      d.showModal();
      d.addEventListener("close", clearModal);
      var input = d.querySelector("input[data-confirm-word]");
      if (input) input.focus();
    }
    syncConfirm(document);
    syncSelection();
    tick();
  });
  document.addEventListener("htmx:beforeSwap", function (e) {
    // An error answering a form inside a dialog: close the dialog so the toast is visible.
    if (e.detail.isError && e.detail.elt && e.detail.elt.closest && e.detail.elt.closest("dialog")) {
      var d = e.detail.elt.closest("dialog");
      if (d.open) d.close();
    }
  });

  document.addEventListener("click", function (e) {
    var t = e.target;
    if (!(t instanceof Element)) return;
    var close = t.closest("[data-close]");
    if (close) {
      var d = close.closest("dialog");
      if (d) d.close();
      clearModal();
      return;
    }
    var dismiss = t.closest("[data-dismiss]");
    if (dismiss) {
      var box = dismiss.closest(".toast, .results");
      if (box) box.remove();
    }
  });

  // ---- typed confirmation: the button is enabled only when the name matches exactly ----
  function syncConfirm(root) {
    root.querySelectorAll("input[data-confirm-word]").forEach(function (input) {
      var form = input.closest("form");
      var btn = form && form.querySelector("[data-confirm-submit]");
      if (btn) btn.disabled = input.value !== input.dataset.confirmWord;
    });
  }
  document.addEventListener("input", function (e) {
    if (e.target instanceof HTMLInputElement && e.target.hasAttribute("data-confirm-word")) syncConfirm(e.target.closest("form") || document);
  });

  // ---- topic selection ----
  function syncSelection() {
    var form = document.getElementById("sel");
    if (!form) return;
    var boxes = form.querySelectorAll('input[type="checkbox"][name="topic"]');
    var n = 0;
    boxes.forEach(function (b) { if (b.checked) n++; });
    var label = form.querySelector("[data-sel-count]");
    if (label) label.textContent = n ? n + " selected:" : "Select topics below, then";
    var bar = form.querySelector(".selbar");
    if (bar) bar.classList.toggle("has-selection", n > 0);
    var all = form.querySelector("[data-select-all]");
    if (all) { all.checked = n > 0 && n === boxes.length; all.indeterminate = n > 0 && n < boxes.length; }
  }
  document.addEventListener("change", function (e) {
    var t = e.target;
    if (!(t instanceof HTMLElement)) return;
    if (t.hasAttribute("data-select-all")) {
      var form = t.closest("form");
      if (form) form.querySelectorAll('input[type="checkbox"][name="topic"]').forEach(function (b) { b.checked = t.checked; });
    }
    if (t.hasAttribute("data-autosubmit") && t.form) t.form.requestSubmit ? t.form.requestSubmit() : t.form.submit();
    syncSelection();
  });

  document.addEventListener("DOMContentLoaded", function () { syncConfirm(document); syncSelection(); tick(); });
})();

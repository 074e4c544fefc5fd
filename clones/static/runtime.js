/* The clone page runtime: turns taps into events for the clone server, swaps in the screen it
   returns, and dumps the DOM as an Android-style UI hierarchy (the shape uiautomator2 produces).

   Conventions (see clones/base.py): [data-ev]/[data-arg] tap, [data-lp-ev]/[data-lp-arg] long press,
   named form fields travel with every event, id -> resource-id, aria-label -> content-desc,
   .scroll -> scrollable container, .modal -> a dialog window (only the front one is dumped). */
(function () {
  "use strict";

  var LONG_PRESS_MS = 500;
  var TOUCH_SLOP_PX = 10;
  var body = document.body;
  var sid = body.dataset.session;
  var version = Number(body.dataset.version || 0);
  var queue = Promise.resolve();
  var inflight = 0;
  var idleWaiters = [];
  var lastError = null;
  var lastHtml = null;
  var swapping = false;
  var countdownTimer = null;

  function app() { return document.getElementById("app"); }

  // --- events ------------------------------------------------------------------------------

  function formData() {
    var out = {};
    var fields = app().querySelectorAll("input[name], select[name], textarea[name]");
    for (var i = 0; i < fields.length; i++) {
      var el = fields[i];
      if (el.type === "checkbox") {
        out[el.name] = el.checked ? (el.value || "on") : "";
      } else if (el.type === "radio") {
        if (el.checked) out[el.name] = el.value;
        else if (!(el.name in out)) out[el.name] = "";
      } else {
        out[el.name] = el.value;
      }
    }
    return out;
  }

  function flushIdle() {
    var waiters = idleWaiters;
    idleWaiters = [];
    for (var i = 0; i < waiters.length; i++) waiters[i]();
  }

  // The event channel: a WebSocket to the clone server once it is open, an HTTP POST until then
  // or whenever it is down (a refused or dropped socket is reopened at the next event). Events go
  // one at a time (see `post`), so the one reply outstanding is the answer to the last message.
  var socket = null, socketOpening = false, socketReply = null;

  function openSocket() {
    if (socket || socketOpening || typeof WebSocket === "undefined") return;
    socketOpening = true;
    var scheme = location.protocol === "https:" ? "wss://" : "ws://";
    var ws = new WebSocket(scheme + location.host + "/api/sessions/" + sid + "/events");
    ws.onopen = function () { socketOpening = false; socket = ws; };
    ws.onmessage = function (e) {
      var waiting = socketReply;
      socketReply = null;
      if (waiting) waiting.resolve(e.data);
    };
    ws.onclose = function () {
      socketOpening = false;
      if (socket === ws) socket = null;
      var waiting = socketReply;
      socketReply = null;
      if (waiting) waiting.reject(new Error("the event socket closed before the answer came"));
    };
  }

  function sendOnSocket(payload) {
    return new Promise(function (resolve, reject) {
      socketReply = { resolve: resolve, reject: reject };
      socket.send(JSON.stringify(payload));
    }).then(function (text) {
      var data = JSON.parse(text);
      if (data.error) throw new Error("event " + payload.ev + " failed: HTTP " + data.status + ": " + data.error);
      return data;
    });
  }

  function sendOverHttp(payload) {
    return fetch("/api/sessions/" + sid + "/event", {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(payload),
    }).then(function (resp) {
      if (!resp.ok) throw new Error("event " + payload.ev + " failed: HTTP " + resp.status);
      return resp.json();
    });
  }

  function socketOpen() { return socket !== null && socket.readyState === WebSocket.OPEN; }

  function send(payload) {
    var answer = socketOpen() ? sendOnSocket(payload) : sendOverHttp(payload);
    openSocket();
    return answer.then(function (data) { apply(data, false); });
  }

  function transport() { return socketOpen() ? "socket" : "http"; }

  // Events are sent one at a time, in order; the form is read when the user acts.
  function post(ev, arg, longPress) {
    var payload = {
      ev: String(ev),
      arg: arg === undefined || arg === null ? null : String(arg),
      form: formData(),
      long_press: !!longPress,
    };
    inflight++;
    queue = queue.then(function () { return send(payload); })
      .catch(function (e) { lastError = String(e && e.message || e); })
      .then(function () { inflight--; if (!inflight) flushIdle(); });
    return queue;
  }

  // --- screen swaps ------------------------------------------------------------------------

  function scrollers() { return app().querySelectorAll(".scroll, .scroll-x"); }

  function saveScroll() {
    var els = scrollers(), out = [];
    for (var i = 0; i < els.length; i++) out.push({ id: els[i].id, top: els[i].scrollTop, left: els[i].scrollLeft });
    return out;
  }

  function restoreScroll(saved) {
    var els = scrollers();
    for (var i = 0; i < els.length; i++) {
      var s = null;
      if (els[i].id) { for (var j = 0; j < saved.length; j++) if (saved[j].id === els[i].id) s = saved[j]; }
      else if (i < saved.length && !saved[i].id) s = saved[i];
      if (s) { els[i].scrollTop = s.top; els[i].scrollLeft = s.left; }
    }
  }

  function fieldKey(el) { return el && (el.name || el.id) ? (el.name ? "n:" + el.name : "i:" + el.id) : null; }

  function findField(key) {
    if (!key) return null;
    var sel = key.charAt(0) === "n" ? "[name=\"" + CSS.escape(key.slice(2)) + "\"]" : "#" + CSS.escape(key.slice(2));
    return app().querySelector(sel);
  }

  // A re-render of the same screen patches the live DOM instead of replacing it: elements that keep
  // their place (same tag, id, type and name) are updated in place, so Chromium repaints only what
  // changed and the next screenshot does not re-rasterise the whole screen. The result is the DOM a
  // swap would build; form state follows the same rules as a swap (below).
  function sameNode(a, b) {
    if (a.nodeType !== b.nodeType) return false;
    if (a.nodeType !== 1) return true;
    if (a.tagName !== b.tagName || a.id !== b.id) return false;
    // a field that changes kind or name is a new field (its typed text must not carry over)
    return a.getAttribute("type") === b.getAttribute("type") && a.getAttribute("name") === b.getAttribute("name");
  }

  function syncAttributes(el, from) {
    var i, a;
    for (i = el.attributes.length - 1; i >= 0; i--) {
      a = el.attributes[i];
      if (!from.hasAttributeNS(a.namespaceURI, a.localName)) el.removeAttributeNS(a.namespaceURI, a.localName);
    }
    for (i = 0; i < from.attributes.length; i++) {
      a = from.attributes[i];
      if (el.getAttributeNS(a.namespaceURI, a.localName) !== a.value) el.setAttributeNS(a.namespaceURI, a.name, a.value);
    }
  }

  // What a freshly built field would show: its value attribute, or (on the same screen, for a named
  // text field rendered without one) what the user typed; checkboxes and selections from their
  // attributes; a textarea's text.
  function syncFieldState(el, from) {
    if (el.tagName === "INPUT") {
      if (el.type === "checkbox" || el.type === "radio") el.checked = from.hasAttribute("checked");
      else if (from.hasAttribute("value")) { if (el.value !== from.value) el.value = from.value; }
      else if (!el.name) el.value = "";
    } else if (el.tagName === "TEXTAREA") {
      if (el.value !== from.defaultValue) el.value = from.defaultValue;
    } else if (el.tagName === "SELECT") {
      if (el.multiple) {
        for (var i = 0; i < el.options.length; i++) el.options[i].selected = from.options[i].hasAttribute("selected");
      } else if (el.selectedIndex !== from.selectedIndex) {
        el.selectedIndex = from.selectedIndex;
      }
    }
  }

  function patchChildren(parent, from) {
    var news = Array.prototype.slice.call(from.childNodes);
    for (var i = 0; i < news.length; i++) {
      var n = news[i], o = parent.childNodes[i];
      if (!o) parent.appendChild(n);
      else if (!sameNode(o, n)) parent.replaceChild(n, o);
      else if (o.nodeType === 1) patchElement(o, n);
      else if (o.nodeValue !== n.nodeValue) o.nodeValue = n.nodeValue;
    }
    while (parent.childNodes.length > news.length) parent.removeChild(parent.lastChild);
  }

  function patchElement(el, from) {
    syncAttributes(el, from);
    patchChildren(el, from);
    if (el.tagName === "INPUT" || el.tagName === "TEXTAREA" || el.tagName === "SELECT") syncFieldState(el, from);
  }

  function patchScreen(html) {
    var parsed = document.createElement("template");
    parsed.innerHTML = html;
    // a swap (innerHTML) never runs scripts; nodes moved out of a template would
    var scripts = parsed.content.querySelectorAll("script");
    for (var i = 0; i < scripts.length; i++) scripts[i].remove();
    patchChildren(app(), parsed.content);
  }

  // A fresh screen (a reset, a restore) is patched in as well: rebuilt whole, every reset made the
  // renderer style, lay out, paint and rasterise the entire screen again, work that the pages
  // sharing its renderer then waited behind (docs/benchmarks.md). What a patched page may still
  // hold and a freshly built one never does is cleared: focus (and with it a field's selection),
  // scroll offsets, typed text, animations under way (the page's text cannot be selected at all).
  function freshScreen(html) {
    var active = document.activeElement;
    if (active && active !== body && active.blur) active.blur();
    patchScreen(html);
    // any box scrolls when told to (overflow: hidden ones too, e.g. to bring a focused field in)
    var all = app().querySelectorAll("*");
    for (var i = 0; i < all.length; i++) {
      var el = all[i];
      if (el.scrollTop || el.scrollLeft) { el.scrollTop = 0; el.scrollLeft = 0; }
      if (el.tagName === "INPUT" && !NOT_TEXT.test(el.type) && !el.hasAttribute("value") && el.value) el.value = "";
    }
    if (document.getAnimations) {
      var running = document.getAnimations();
      for (var k = 0; k < running.length; k++) running[k].currentTime = 0;
    }
  }

  function apply(data, fresh) {
    var sameRoute = !fresh && data.route === body.dataset.route;
    if (fresh || data.html !== lastHtml) {
      var saved = sameRoute ? saveScroll() : null;
      var active = document.activeElement;
      var focusKey = sameRoute && active && active !== body ? fieldKey(active) : null;
      var caret = focusKey && typeof active.selectionStart === "number" ? active.selectionStart : null;
      // A field the new screen renders without a value attribute keeps what the user typed.
      var drafts = {};
      if (sameRoute) {
        var olds = app().querySelectorAll("input[name], textarea[name]");
        for (var i = 0; i < olds.length; i++) drafts[olds[i].name] = olds[i].value;
      }
      swapping = true;
      try {
        if (sameRoute) patchScreen(data.html);
        else if (fresh) freshScreen(data.html);
        else app().innerHTML = data.html;
      } finally {
        swapping = false;
      }
      lastHtml = data.html;
      if (sameRoute) {
        var news = app().querySelectorAll("input[name], textarea[name]");
        for (var k = 0; k < news.length; k++) {
          var el = news[k];
          if (el.type === "checkbox" || el.type === "radio") continue;
          if (!el.hasAttribute("value") && el.tagName !== "TEXTAREA" && drafts[el.name]) el.value = drafts[el.name];
        }
        restoreScroll(saved);
        var again = findField(focusKey);
        if (again && again.focus) {
          again.focus({ preventScroll: true });
          if (caret !== null && typeof again.setSelectionRange === "function") {
            try { again.setSelectionRange(again.value.length, again.value.length); } catch (e) { /* not a text field */ }
          }
        }
      }
    }
    version = data.version;
    body.dataset.version = String(version);
    body.dataset.route = data.route || "";
    startCountdowns();
  }

  function refresh(fresh) {
    return fetch("/s/" + sid + "/screen").then(function (resp) {
      if (!resp.ok) throw new Error("screen failed: HTTP " + resp.status);
      return resp.json();
    }).then(function (data) { apply(data, fresh !== false); return version; });
  }

  // A [data-countdown] control (a launch ad's "跳过 3") counts down each second, then fires itself.
  function startCountdowns() {
    if (countdownTimer !== null) { clearInterval(countdownTimer); countdownTimer = null; }
    if (!app().querySelector("[data-countdown]")) return;
    countdownTimer = setInterval(function () {
      var els = app().querySelectorAll("[data-countdown]");
      if (!els.length) { clearInterval(countdownTimer); countdownTimer = null; return; }
      for (var i = 0; i < els.length; i++) {
        var el = els[i];
        var left = Number(el.dataset.countdown) - 1;
        el.dataset.countdown = String(left);
        el.textContent = el.textContent.replace(/\d+\s*$/, String(Math.max(left, 0)));
        if (left <= 0) {
          el.removeAttribute("data-countdown");
          post(el.dataset.ev, el.dataset.arg, false);
        }
      }
    }, 1000);
  }

  // --- input ----------------------------------------------------------------------------------

  var press = null;

  function tapTarget(el) { return el && el.closest ? el.closest("[data-ev]:not(form)") : null; }

  function enabled(el) {
    return !(el.disabled || el.getAttribute("aria-disabled") === "true" || el.classList.contains("disabled"));
  }

  function cancelPress() {
    if (press && press.timer) clearTimeout(press.timer);
    press = null;
  }

  document.addEventListener("pointerdown", function (e) {
    if (!e.isPrimary) return;
    var el = e.target.nodeType === 1 ? e.target : e.target.parentElement;
    var tap = tapTarget(el);
    var lp = el && el.closest ? el.closest("[data-lp-ev]") : null;
    cancelPress();
    if (!tap && !lp) return;
    press = { tap: tap, lp: lp, x: e.clientX, y: e.clientY, fired: false, timer: null };
    if (lp) {
      var current = press;
      press.timer = setTimeout(function () {
        if (press === current && !current.fired && enabled(lp)) {
          current.fired = true;
          post(lp.dataset.lpEv, lp.dataset.lpArg, true);
        }
      }, LONG_PRESS_MS);
    }
  }, true);

  document.addEventListener("pointermove", function (e) {
    if (press && Math.hypot(e.clientX - press.x, e.clientY - press.y) > TOUCH_SLOP_PX) cancelPress();
  }, true);

  document.addEventListener("pointercancel", cancelPress, true);

  document.addEventListener("pointerup", function (e) {
    if (!press) return;
    var p = press;
    cancelPress();
    if (p.fired || !p.tap || !enabled(p.tap)) return;
    var el = e.target.nodeType === 1 ? e.target : e.target.parentElement;
    if (tapTarget(el) !== p.tap) return;
    post(p.tap.dataset.ev, p.tap.dataset.arg, false);
  }, true);

  // Taps the harness sends through CDP, numbered by the harness per page load. A tap's own event is
  // posted on pointerup, a checkbox's or select's on the click that follows it, so a tap is done
  // (as far as the page can tell) once that click ran — or, for a touch that ends without a click,
  // once the harness says the browser acknowledged the touch's end.
  var touchesEnded = 0, clickedAfter = 0, acked = 0, tapWaiters = [];

  function releaseTaps() {
    var still = [];
    for (var i = 0; i < tapWaiters.length; i++) {
      var w = tapWaiters[i];
      if (clickedAfter >= w.n || acked >= w.n) w.resolve();
      else still.push(w);
    }
    tapWaiters = still;
  }

  function touchEnded(e) { if (e.pointerType === "touch") touchesEnded++; }
  window.addEventListener("pointerup", touchEnded, true);
  window.addEventListener("pointercancel", touchEnded, true);
  // Counted before any handler on the page, released after the click's default action (a
  // checkbox's change event) and whatever it posted.
  window.addEventListener("click", function () {
    clickedAfter = touchesEnded;
    afterTask().then(releaseTaps);
  }, true);

  function afterTask() {
    return new Promise(function (resolve) {
      var channel = new MessageChannel();
      channel.port1.onmessage = function () { resolve(); };
      channel.port2.postMessage(null);
    });
  }

  function tapAcknowledged(n) {
    acked = Math.max(acked, n);
    // The browser acknowledges a touch's end after its pointer events ran: a count behind the
    // harness's missed one (it would otherwise wait for the acknowledgement on every later tap).
    touchesEnded = Math.max(touchesEnded, n);
    return afterTask().then(releaseTaps);
  }

  // Resolves when tap `n` is done and every event it posted has been applied (see `settled`).
  function afterTap(n) {
    return new Promise(function (resolve) {
      tapWaiters.push({ n: n, resolve: resolve });
      releaseTaps();
    }).then(function () { return settledNow(false); });
  }

  // Non-passive touch listeners make the browser acknowledge a touch only after the handlers
  // above ran, so a driver that waits for its touch to be acknowledged sees the posted event.
  function noop() {}
  document.addEventListener("touchstart", noop, { passive: false });
  document.addEventListener("touchend", noop, { passive: false });

  // On Android a touch focuses text fields only (touch mode). The browser's compatibility mousedown
  // after a touch focuses whatever lies under the finger by then, and when the tap's own event had
  // already swapped the screen in, that is a button of the next screen: the hierarchy's focused
  // flag (and whether the screen counts as still) then depended on timing.
  var NOT_TEXT = /^(checkbox|radio|button|submit|reset|image|range|color|file)$/;
  document.addEventListener("mousedown", function (e) {
    var el = e.target.nodeType === 1 ? e.target : e.target.parentElement;
    var field = el && el.closest ? el.closest("input, textarea, select, [contenteditable]") : null;
    if (!field || (field.tagName === "INPUT" && NOT_TEXT.test(field.type))) e.preventDefault();
  }, true);

  document.addEventListener("contextmenu", function (e) { e.preventDefault(); });
  document.addEventListener("submit", function (e) { e.preventDefault(); }, true);
  document.addEventListener("click", function (e) {
    var a = e.target.closest && e.target.closest("a[href]");
    if (a) e.preventDefault();
    // A checkbox or radio without a name belongs to a control whose tap posts its event (on
    // pointerup): the server's screen says whether it is checked. Its own toggle would race that
    // screen: landing after it, the click unchecked what the server had just checked.
    var t = e.target;
    if (t.tagName === "INPUT" && (t.type === "checkbox" || t.type === "radio") && !t.name && tapTarget(t)) {
      e.preventDefault();
    }
  }, true);

  function enter() {
    var el = document.activeElement;
    if (!el || (el.tagName !== "INPUT" && el.tagName !== "TEXTAREA")) return null;
    var form = el.closest("form[data-ev]");
    return form ? post(form.dataset.ev, form.dataset.arg, false) : post("__sync__", null, false);
  }

  document.addEventListener("keydown", function (e) {
    if (e.key === "Enter" && e.target && e.target.tagName === "INPUT") {
      e.preventDefault();
      enter();
    }
  }, true);

  document.addEventListener("change", function (e) {
    if (swapping) return;
    var t = e.target;
    if (t && t.name && (t.tagName === "INPUT" || t.tagName === "SELECT" || t.tagName === "TEXTAREA")) post("__sync__", null, false);
  }, true);

  // --- readiness -------------------------------------------------------------------------------

  function nextFrame() {
    return new Promise(function (resolve) { requestAnimationFrame(function () { setTimeout(resolve, 0); }); });
  }

  var SCROLL_SETTLE_MAX_MS = 1500;

  function scrollSignature() {
    var els = scrollers(), sig = "";
    for (var i = 0; i < els.length; i++) sig += els[i].scrollTop + "," + els[i].scrollLeft + ";";
    return sig + document.scrollingElement.scrollTop;
  }

  // Resolves when no event is queued or in flight (and, with waitScroll, scrolling has stopped).
  function settled(waitScroll) {
    return new Promise(function (resolve) { setTimeout(resolve, 0); }).then(function () {
      return settledNow(waitScroll);
    });
  }

  // `settled`, then the hierarchy dump in the same task: an observation that captures after it
  // needs one evaluation in the page (see devices/rl/core.py). `dump === false`: no dump (the
  // caller has the screen's hierarchy already, devices/rl/screen_cache.py). `still`: whether the
  // pixels follow from the screen alone (`screenIsStill`).
  function settledDump(scale, dump) {
    return settled(false).then(function (result) {
      var skip = dump === false || (result && result.error);
      return { settled: result, hierarchy: skip ? null : dumpHierarchy(scale), still: screenIsStill() };
    });
  }

  // An action's own wait, then `settledDump` in the same evaluation: an RL step acts and observes
  // with one evaluation where it used to take one for each (devices/rl/core.py). A wait that failed
  // is returned as the settle's result, with no dump, as the two evaluations would have stopped.
  function thenDump(wait, scale) {
    return wait.then(function (result) {
      if (result && result.error) return { settled: result, hierarchy: null };
      return settledDump(scale, true);
    });
  }

  function afterTapDump(n, scale) { return thenDump(afterTap(n), scale); }

  function postDump(event, scale) {
    post(event);
    return thenDump(settled(false), scale);
  }

  // Whether the screen's pixels follow from its HTML alone: nothing counts down, animates, loads,
  // holds the focus (a caret blinks) or is scrolled (devices/rl/screen_cache.py).
  function screenIsStill() {
    if (app().querySelector("[data-countdown]")) return false;
    if (document.getAnimations && document.getAnimations().length) return false;
    var active = document.activeElement;
    if (active && active !== body && active !== document.documentElement) return false;
    for (var i = 0; i < document.images.length; i++) if (!document.images[i].complete) return false;
    if (document.fonts && document.fonts.status !== "loaded") return false;
    return scrollSignature().replace(/[0,;]/g, "") === "";
  }

  function settledNow(waitScroll) {
    return Promise.resolve().then(function () {
      if (!inflight) return null;
      return new Promise(function (resolve) { idleWaiters.push(resolve); });
    }).then(function () {
      if (!waitScroll) return null;
      // Bounded in time, not in frames: on a loaded machine a page may get a frame a second, and
      // a 180-frame bound then held a swipe for 19 s; a fling is over well within the bound.
      var last = scrollSignature(), still = 0, started = performance.now();
      function loop() {
        return nextFrame().then(function () {
          var sig = scrollSignature();
          still = sig === last ? still + 1 : 0;
          last = sig;
          if (still >= 3 || performance.now() - started > SCROLL_SETTLE_MAX_MS) return null;
          return loop();
        });
      }
      return loop();
    }).then(function () {
      var err = lastError;
      lastError = null;
      return { version: version, busy: inflight, error: err };
    });
  }

  // --- hierarchy dump -------------------------------------------------------------------------

  var PHRASING = { SPAN: 1, B: 1, I: 1, EM: 1, STRONG: 1, SMALL: 1, BR: 1, SUB: 1, SUP: 1, MARK: 1, S: 1, U: 1,
    DEL: 1, INS: 1, CODE: 1, FONT: 1, ABBR: 1, TIME: 1, LABEL: 1, Q: 1, WBR: 1 };
  var ATOMIC = { INPUT: 1, SELECT: 1, TEXTAREA: 1, IMG: 1, svg: 1, CANVAS: 1 };
  var SKIP = { SCRIPT: 1, STYLE: 1, TEMPLATE: 1, NOSCRIPT: 1, HEAD: 1, META: 1, LINK: 1 };

  function isInteractive(el) {
    if (el.tagName === "FORM") return false;
    return el.hasAttribute("data-ev") || el.hasAttribute("data-lp-ev") || el.tagName === "BUTTON" ||
      el.tagName === "INPUT" || el.tagName === "SELECT" || el.tagName === "TEXTAREA";
  }

  // Text-only content (text and plain inline elements) becomes one TextView, as on Android.
  function isLeaf(el) {
    for (var c = el.firstElementChild; c; c = c.nextElementSibling) {
      if (!PHRASING[c.tagName] || c.id || isInteractive(c) || c.hasAttribute("aria-label") || !isLeaf(c)) return false;
    }
    return true;
  }

  function squash(s) { return (s || "").replace(/\s+/g, " ").trim(); }

  function ownText(el) {
    var out = "";
    for (var n = el.firstChild; n; n = n.nextSibling) if (n.nodeType === 3) out += n.nodeValue + " ";
    return squash(out);
  }

  function intersect(a, b) {
    return { l: Math.max(a.l, b.l), t: Math.max(a.t, b.t), r: Math.min(a.r, b.r), b: Math.min(a.b, b.b) };
  }

  function isEmpty(r) { return r.r - r.l < 1 || r.b - r.t < 1; }

  function scrollable(el, cs) {
    if (el.classList.contains("scroll") || el.classList.contains("scroll-x")) return true;
    var oy = cs.overflowY, ox = cs.overflowX;
    return ((oy === "auto" || oy === "scroll") && el.scrollHeight > el.clientHeight + 1) ||
      ((ox === "auto" || ox === "scroll") && el.scrollWidth > el.clientWidth + 1);
  }

  function describe(el, cs, leaf, scroll) {
    var tag = el.tagName, type = (el.getAttribute("type") || "text").toLowerCase();
    var role = el.getAttribute("role");
    var clickable = el.hasAttribute("data-ev") && tag !== "FORM";
    var info = {
      cls: "", text: "", clickable: clickable, longClickable: el.hasAttribute("data-lp-ev"),
      checkable: false, checked: false, password: false, focusable: false,
      desc: el.getAttribute("aria-label") || "",
    };
    if (tag === "INPUT" && (type === "checkbox" || type === "radio")) {
      info.cls = type === "checkbox" ? "android.widget.CheckBox" : "android.widget.RadioButton";
      info.checkable = true; info.checked = el.checked; info.clickable = true;
      info.text = squash(el.labels && el.labels.length ? el.labels[0].innerText : "");
    } else if (tag === "INPUT" || tag === "TEXTAREA") {
      info.cls = "android.widget.EditText";
      info.password = type === "password";
      var value = el.value || "";
      info.text = value ? (info.password ? value.replace(/./g, "•") : value) : (el.getAttribute("placeholder") || "");
      info.clickable = true; info.longClickable = true; info.focusable = true;
    } else if (tag === "SELECT") {
      info.cls = "android.widget.Spinner";
      info.text = el.selectedIndex >= 0 ? squash(el.options[el.selectedIndex].text) : "";
      info.clickable = true;
    } else if (tag === "IMG" || tag === "SVG" || tag === "svg" || tag === "CANVAS") {
      info.cls = "android.widget.ImageView";
      info.desc = info.desc || el.getAttribute("alt") || "";
    } else if (role === "switch" || role === "checkbox") {
      info.cls = role === "switch" ? "android.widget.Switch" : "android.widget.CheckBox";
      info.checkable = true; info.checked = el.getAttribute("aria-checked") === "true";
      info.text = leaf ? squash(el.innerText) : ownText(el);
    } else if (scroll) {
      info.cls = cs.overflowX !== "hidden" && (el.classList.contains("scroll-x") || cs.overflowY === "hidden")
        ? "android.widget.HorizontalScrollView" : "android.widget.ScrollView";
    } else if (leaf) {
      info.text = squash(el.innerText);
      // A tappable element without text is an icon: Android apps use an ImageButton there.
      info.cls = tag === "BUTTON" && info.text ? "android.widget.Button"
        : info.text || !clickable && tag !== "BUTTON" ? "android.widget.TextView" : "android.widget.ImageButton";
    } else {
      info.text = ownText(el);
      var d = cs.display;
      info.cls = tag === "BUTTON" ? "android.widget.Button"
        : (d.indexOf("flex") >= 0 || d.indexOf("grid") >= 0) ? "android.widget.LinearLayout" : "android.widget.FrameLayout";
      if (el.classList.contains("modal")) info.cls = "android.widget.FrameLayout";
    }
    if (tag === "BUTTON") info.clickable = true;
    info.focusable = info.focusable || info.clickable;
    info.enabled = !(el.disabled || el.getAttribute("aria-disabled") === "true" || el.classList.contains("disabled"));
    info.selected = el.getAttribute("aria-selected") === "true" || el.classList.contains("selected") || el.classList.contains("active");
    if (role === "checkbox" || role === "switch") info.checked = el.getAttribute("aria-checked") === "true";
    info.scrollable = !!scroll;
    return info;
  }

  // Walks `el`, appending the nodes it produces to `out` (flattening plain wrappers).
  function walk(el, clip, viewport, out) {
    if (SKIP[el.tagName] || el.hasAttribute("data-rb-skip") || el.getAttribute("aria-hidden") === "true") return;
    var cs = getComputedStyle(el);
    if (cs.display === "none" || cs.visibility === "hidden" || cs.opacity === "0") return;
    var rect = el.getBoundingClientRect();
    var box = { l: rect.left, t: rect.top, r: rect.right, b: rect.bottom };
    var ownClip = cs.position === "fixed" ? viewport : clip;
    var visible = intersect(box, ownClip);
    var clips = cs.overflowX !== "visible" || cs.overflowY !== "visible";
    if (isEmpty(visible) && clips) return;
    var childClip = clips ? visible : ownClip;
    var leaf = ATOMIC[el.tagName] ? true : isLeaf(el);
    var children = [];
    if (!leaf) {
      for (var c = el.firstElementChild; c; c = c.nextElementSibling) walk(c, childClip, viewport, children);
    }
    if (isEmpty(visible)) {
      // Out of sight (a list's rows below the fold): never in the dump itself, so not described
      // (innerText lays its text out), though a child that overflows it may be.
      for (var j = 0; j < children.length; j++) out.push(children[j]);
      return;
    }
    var scroll = !leaf && scrollable(el, cs);
    var info = describe(el, cs, leaf, scroll);
    var marked = info.clickable || info.longClickable || info.scrollable || info.checkable || !!el.id || !!info.desc ||
      el.classList.contains("modal") || info.cls === "android.widget.ImageView" || info.cls === "android.widget.EditText";
    var emit;
    if (leaf) emit = !isEmpty(visible) && (marked || !!info.text);
    else emit = !isEmpty(visible) && (marked || !!info.text || children.length >= 2);
    if (!emit) {
      for (var i = 0; i < children.length; i++) out.push(children[i]);
      return;
    }
    out.push({ el: el, info: info, box: visible, children: children });
  }

  function xmlEscape(s) {
    return String(s).replace(/[\u0000-\u0008\u000b\u000c\u000e-\u001f]/g, "")
      .replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;")
      .replace(/\n/g, "&#10;").replace(/\r/g, "&#13;").replace(/\t/g, "&#9;");
  }

  function serialize(node, index, pkg, scale, parts, focusedEl) {
    var i = node.info, b = node.box;
    var rid = node.el && node.el.id ? pkg + ":id/" + node.el.id : "";
    var bounds = "[" + Math.round(b.l * scale) + "," + Math.round(b.t * scale) + "][" +
      Math.round(b.r * scale) + "," + Math.round(b.b * scale) + "]";
    parts.push('<node index="' + index + '" text="' + xmlEscape(i.text) + '" resource-id="' + xmlEscape(rid) +
      '" class="' + i.cls + '" package="' + xmlEscape(pkg) + '" content-desc="' + xmlEscape(i.desc) +
      '" checkable="' + !!i.checkable + '" checked="' + !!i.checked + '" clickable="' + !!i.clickable +
      '" enabled="' + (i.enabled !== false) + '" focusable="' + !!i.focusable + '" focused="' + (node.el !== null && node.el === focusedEl) +
      '" scrollable="' + !!i.scrollable + '" long-clickable="' + !!i.longClickable + '" password="' + !!i.password +
      '" selected="' + !!i.selected + '" bounds="' + bounds + '"');
    if (!node.children.length) { parts.push(" />"); return; }
    parts.push(">");
    for (var k = 0; k < node.children.length; k++) serialize(node.children[k], k, pkg, scale, parts, focusedEl);
    parts.push("</node>");
  }

  // The front dialog mask: the last .modal, or fixed element covering (almost) the whole screen.
  function frontWindow(w, h) {
    var els = app().querySelectorAll("*"), front = null;
    for (var i = 0; i < els.length; i++) {
      var el = els[i];
      var isModal = el.classList.contains("modal");
      var cs = getComputedStyle(el);
      if (!isModal && cs.position !== "fixed") continue;
      if (cs.display === "none" || cs.visibility === "hidden") continue;
      var r = el.getBoundingClientRect();
      if (r.width >= 0.9 * w && r.height >= 0.8 * h) front = el;
    }
    return front;
  }

  // A capture leaves the display compositor holding its intermediate bitmaps (two frames' worth of
  // pixels per page) until it next draws the page, and in an RL page's 16 px window
  // (devices/rl/host.py) only a change in that corner makes it draw. One pixel behind the status
  // bar, recoloured after each capture: a frame drawn without the copy, the same pixels on screen.
  var behind = null;
  function redrawBehind() {
    if (!behind) {
      behind = document.createElement("div");
      behind.setAttribute("aria-hidden", "true");
      behind.setAttribute("data-rb-behind", "");
      behind.style.cssText = "position:fixed;left:0;top:0;width:1px;height:1px;z-index:-1;pointer-events:none;";
      body.appendChild(behind);
    }
    behind.style.backgroundColor = behind.style.backgroundColor === "rgb(0, 0, 0)" ? "rgb(255, 255, 255)" : "rgb(0, 0, 0)";
  }

  function dumpHierarchy(scale) {
    scale = Number(scale) || window.devicePixelRatio || 1;
    var w = window.innerWidth, h = window.innerHeight;
    var viewport = { l: 0, t: 0, r: w, b: h };
    var pkg = body.dataset.package || "";
    // A dialog is its own window on Android: only the front one is in the dump.
    var front = frontWindow(w, h);
    var tops = front ? [front] : Array.prototype.slice.call(app().children);
    var children = [];
    for (var i = 0; i < tops.length; i++) walk(tops[i], viewport, viewport, children);
    var root = {
      el: null, box: viewport, children: children,
      info: { cls: "android.widget.FrameLayout", text: "", desc: "", enabled: true },
    };
    // The activity in front: the innermost data-activity around the front window, else the page's.
    var actEl = (front && front.closest("[data-activity]")) || document.querySelector("[data-activity]");
    var activity = actEl ? ' activity="' + xmlEscape(actEl.getAttribute("data-activity")) + '"' : "";
    var parts = ["<?xml version='1.0' encoding='UTF-8' standalone='yes' ?>\r\n<hierarchy rotation=\"0\"" + activity + ">"];
    var focusedEl = document.activeElement && document.activeElement !== body ? document.activeElement : null;
    serialize(root, 0, pkg, scale, parts, focusedEl);
    parts.push("</hierarchy>");
    return parts.join("");
  }

  window.__rb = {
    get version() { return version; },
    get busy() { return inflight; },
    post: post,
    apply: apply,
    refresh: refresh,
    enter: enter,
    settled: settled,
    afterTap: afterTap,
    settledDump: settledDump,
    afterTapDump: afterTapDump,
    postDump: postDump,
    screenIsStill: screenIsStill,
    tapAcknowledged: tapAcknowledged,
    dumpHierarchy: dumpHierarchy,
    redrawBehind: redrawBehind,
    transport: transport,
  };
  openSocket();
  startCountdowns();
})();

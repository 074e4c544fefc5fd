// The console's pages: a little JavaScript over the JSON API (no build step).
"use strict";

async function api(method, url, body) {
  const opts = { method, headers: {} };
  if (body !== undefined) { opts.headers["Content-Type"] = "application/json"; opts.body = JSON.stringify(body); }
  const r = await fetch(url, opts);
  const text = await r.text();
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch (e) { data = { error: text }; }
  return { status: r.status, data };
}

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") e.className = v; else e.setAttribute(k, v);
  }
  for (const c of children) e.append(c === null || c === undefined ? "" : c);
  return e;
}

// --- fleet ------------------------------------------------------------------------------------

function startFleet() {
  const body = document.querySelector("#fleet tbody");
  async function refresh() {
    const { status, data } = await api("GET", "/api/phones");
    if (status !== 200) { body.replaceChildren(el("tr", {}, el("td", { colspan: 9 }, data.error || "error"))); return; }
    body.replaceChildren(...data.map((p) => {
      const apps = Object.entries(p.apps).map(([pkg, a]) =>
        el("div", { class: a.ok ? "ok" : "bad" }, `${pkg.split(".").pop()} ${a.version || "missing"}` + (a.pin ? ` (pin ${a.pin})` : "")));
      const link = el("a", { href: "/phone/" + encodeURIComponent(p.serial) }, p.serial);
      return el("tr", { "data-serial": p.serial }, el("td", {}, link), el("td", {}, p.label), el("td", {}, p.model),
        el("td", {}, p.kind), el("td", {}, p.health), el("td", {}, ...apps), el("td", {}, p.leased_by || "free"),
        el("td", {}, p.quarantined ? "yes: " + p.quarantine_reason : "no"),
        el("td", {}, p.episodes ? `${(100 * p.flake_rate).toFixed(1)} % of ${p.episodes}` : "–"));
    }));
  }
  refresh();
  setInterval(refresh, 3000);
}

// --- phone ------------------------------------------------------------------------------------

function startPhone() {
  const root = document.querySelector(".phone");
  const serial = root.dataset.serial, width = root.dataset.width;
  const base = "/api/phones/" + encodeURIComponent(serial);
  const img = document.getElementById("screen");  // the view: the decoded video or the JPEG stream
  const jpeg = document.getElementById("screen-jpeg"), canvas = document.getElementById("screen-video");
  const msg = document.getElementById("message");
  window.rbFrames = 0;
  let frameTimes = [];

  function say(text, error) { msg.textContent = text; msg.className = "message" + (error ? " error" : ""); }
  const pause = (ms) => new Promise((res) => setTimeout(res, ms));
  function counted() {
    window.rbFrames++;
    const now = performance.now();
    frameTimes.push(now);
    frameTimes = frameTimes.filter((t) => now - t < 2000);
    document.getElementById("fps").textContent = (frameTimes.length / 2).toFixed(1) + " frames/s";
  }
  function source(note, kind, decoder) {
    const src = document.getElementById("source");
    src.textContent = note; src.dataset.source = kind; src.dataset.decoder = decoder;
  }
  function show(decoded) { canvas.hidden = !decoded; jpeg.hidden = decoded; }

  // The JPEG stream: one frame request after another (scrcpy's frames re-encoded by the console,
  // or screenshots), until `until` (ms, performance.now()).
  async function jpegStream(until, why) {
    show(false);
    while (performance.now() < until) {
      try {
        const r = await fetch(`${base}/screen?width=${width}&t=${Date.now()}`);
        if (r.ok) {
          // scrcpy video, or the screenshot stream and why scrcpy is not in use
          const note = r.headers.get("x-frame-note") || "";
          const kind = r.headers.get("x-frame-source") || "";
          source(kind === "scrcpy" && why ? `${note} · JPEG frames: ${why}` : note, kind, "jpeg");
          const url = URL.createObjectURL(await r.blob());
          await new Promise((res) => { jpeg.onload = res; jpeg.onerror = res; const old = jpeg.src; jpeg.src = url; if (old) URL.revokeObjectURL(old); });
          counted();
        } else { await pause(500); }
      } catch (e) { await pause(500); }
    }
  }

  // The H.264 of scrcpy as the phone sends it, decoded here by WebCodecs: a 16-byte header (codec
  // id, width, height, frame packets of catch-up), then packets behind scrcpy's 12-byte header
  // (PTS with the config and key-frame flags in its top bits, payload size): first the config
  // and the frames since the last key frame (decoded, not shown: they are the past), then live
  // ones. Resolves with why it stopped.
  async function videoStream() {
    if (!("VideoDecoder" in window)) return "this browser has no WebCodecs decoder" + (window.isSecureContext ? "" : " (the page is not a secure context: use https or localhost)");
    let r;
    try { r = await fetch(`${base}/video`, { cache: "no-store" }); } catch (e) { return "the video request failed"; }
    if (!r.ok) { let why = "error " + r.status; try { why = (await r.json()).error || why; } catch (e) { /* not JSON */ } return why; }
    const reader = r.body.getReader();
    let buf = new Uint8Array(0), config = null, decoder = null, failed = "", shown = false, catchUp = 0, outputs = 0, keySeen = false;
    const ctx = canvas.getContext("2d");
    async function need(n) {
      while (buf.length < n) {
        const { value, done } = await reader.read();
        if (done) return false;
        const joined = new Uint8Array(buf.length + value.length); joined.set(buf); joined.set(value, buf.length); buf = joined;
      }
      return true;
    }
    function take(n) { const out = buf.slice(0, n); buf = buf.subarray(n); return out; }
    function codecOf(annexB) {  // avc1.PPCCLL from the SPS (NAL type 7) of the config packet
      for (let i = 0; i + 4 < annexB.length; i++) {
        if (annexB[i] === 0 && annexB[i + 1] === 0 && annexB[i + 2] === 1 && (annexB[i + 3] & 0x1f) === 7) {
          return "avc1." + [annexB[i + 4], annexB[i + 5], annexB[i + 6]].map((b) => b.toString(16).padStart(2, "0")).join("");
        }
      }
      return null;
    }
    try {
      if (!(await need(16))) return "the video stream ended";
      const meta = new DataView(take(16).buffer);
      canvas.width = meta.getUint32(4); canvas.height = meta.getUint32(8); catchUp = meta.getUint32(12);
      while (!failed && (await need(12))) {
        const head = new DataView(take(12).buffer);
        const hi = head.getUint32(0), size = head.getUint32(8);
        const isConfig = (hi & 0x80000000) !== 0, isKey = (hi & 0x40000000) !== 0;
        const pts = (hi & 0x3fffffff) * 4294967296 + head.getUint32(4);
        if (!(await need(size))) break;
        const payload = take(size);
        if (isConfig) {
          config = payload;
          if (decoder) continue;
          const codec = codecOf(payload);
          const cfg = { codec: codec || "avc1.42e01f", optimizeForLatency: true };
          const support = await VideoDecoder.isConfigSupported(cfg).catch(() => ({ supported: false }));
          if (!codec || !support.supported) { reader.cancel(); return `this browser cannot decode ${cfg.codec} (WebCodecs)`; }
          decoder = new VideoDecoder({
            output: (frame) => {
              if (++outputs < catchUp) { frame.close(); return; }  // the past: only the last is drawn
              ctx.drawImage(frame, 0, 0, canvas.width, canvas.height); frame.close();
              if (!shown) { shown = played = true; show(true); source("live video (scrcpy)", "scrcpy", "webcodecs"); }
              counted();
            },
            error: (e) => { failed = "the decoder failed: " + e.message; },
          });
          decoder.configure(cfg);
          continue;
        }
        if (!decoder) continue;  // nothing can be decoded before the config
        if (!keySeen && !isKey) continue;  // nor before a key frame (a catch-up too long to keep)
        keySeen = true;
        if (decoder.state === "closed") break;
        // scrcpy's own client joins the config packet to the key frame that follows it
        const data = isKey && config ? (() => { const d = new Uint8Array(config.length + payload.length); d.set(config); d.set(payload, config.length); return d; })() : payload;
        decoder.decode(new EncodedVideoChunk({ type: isKey ? "key" : "delta", timestamp: pts, data }));
      }
    } catch (e) {
      failed = failed || "the video stream failed: " + e.message;
    } finally {
      if (decoder && decoder.state !== "closed") decoder.close();
      reader.cancel().catch(() => {});
    }
    return failed || "the video stream ended";
  }

  let played = false;
  async function stream() {
    for (;;) {
      played = false;
      const why = await videoStream();
      // Decoded video where it can be had; else the JPEG stream, and video is tried again later
      // (soon when it had played: a viewer that fell behind is ended and starts again).
      await jpegStream(performance.now() + (played ? 1000 : window.rbVideoRetryMs || 30000), why);
    }
  }

  function norm(ev) {
    const r = (canvas.hidden ? jpeg : canvas).getBoundingClientRect();
    const x = Math.round(Math.min(1, Math.max(0, (ev.clientX - r.left) / r.width)) * 1000);
    const y = Math.round(Math.min(1, Math.max(0, (ev.clientY - r.top) / r.height)) * 1000);
    return { x, y };
  }

  const dialog = document.getElementById("confirm-dialog");
  const who = document.getElementById("operator");
  const dialogWho = document.getElementById("confirm-operator");
  const sendButton = document.getElementById("confirm-send");
  who.value = localStorage.getItem("rb-operator") || "";
  who.onchange = () => localStorage.setItem("rb-operator", who.value.trim());
  // An override needs a name (there is no default operator), and only a click sends it: the dialog
  // opens on Cancel, and Enter anywhere in it cancels instead of pressing the focused button.
  dialogWho.oninput = () => { sendButton.disabled = !dialogWho.value.trim(); };
  dialog.addEventListener("keydown", (ev) => {
    if (ev.key === "Enter") { ev.preventDefault(); ev.stopPropagation(); dialog.close("cancel"); }
  }, true);
  async function act(action, confirm, operator) {
    const body = { action, operator: operator || who.value.trim() };
    if (confirm) body.confirm = confirm;
    const { status, data } = await api("POST", base + "/act", body);
    if (status === 200) { say("sent " + action.type); document.getElementById("lease").textContent = "leased by the console"; if (window.rbRecorder) window.rbRecorder.refresh(); return; }
    if (status === 409) {
      if (window.rbRecorder) window.rbRecorder.refresh();
      document.getElementById("confirm-boundary").textContent = data.boundary;
      document.getElementById("confirm-reason").textContent = data.error;
      dialogWho.value = who.value.trim();
      sendButton.disabled = !dialogWho.value.trim();
      dialog.returnValue = "";
      dialog.showModal();
      document.getElementById("confirm-cancel").focus();
      dialog.onclose = () => {
        const name = dialogWho.value.trim();
        if (dialog.returnValue === "send" && name) {
          who.value = name; localStorage.setItem("rb-operator", name);
          act(action, data.boundary, name);
        } else say("not sent: " + data.boundary, true);
      };
      return;
    }
    say(data.error || ("error " + status), true);
  }
  sendButton.onclick = () => { if (dialogWho.value.trim()) dialog.close("send"); };
  document.getElementById("confirm-cancel").onclick = () => dialog.close("cancel");

  let down = null;
  img.addEventListener("pointerdown", (ev) => { ev.preventDefault(); down = { p: norm(ev), t: performance.now(), cx: ev.clientX, cy: ev.clientY }; });
  img.addEventListener("pointerup", (ev) => {
    if (!down) return;
    const p = norm(ev), held = performance.now() - down.t, moved = Math.hypot(ev.clientX - down.cx, ev.clientY - down.cy);
    const start = down.p; down = null;
    if (window.rbPointMode && window.rbRecorder) { window.rbRecorder.point(start); return; }
    if (moved > 12) act({ type: "swipe", x: start.x, y: start.y, x2: p.x, y2: p.y, duration_ms: Math.max(100, Math.min(2000, Math.round(held))) });
    else if (held > 600) act({ type: "long_press", x: start.x, y: start.y, duration_ms: 800 });
    else act({ type: "click", x: start.x, y: start.y });
  });

  let inspectBusy = false, pending = null;
  async function inspect(p) {
    if (inspectBusy) { pending = p; return; }
    inspectBusy = true;
    const { status, data } = await api("GET", `${base}/inspect?x=${p.x}&y=${p.y}`);
    const box = document.getElementById("inspector");
    if (status === 200 && data.node) {
      const n = data.node;
      box.textContent = `selector: ${data.text}\n${data.unique ? "unique" : "NOT unique: " + data.matches + " matches"} (${data.kind})\n` +
        `class ${n.class}\nresource-id ${n.resource_id || "–"}\ntext ${n.text || "–"}\ncontent-desc ${n.content_desc || "–"}\nbounds ${n.bounds.join(",")}` +
        (n.clickable ? "\nclickable" : "");
      box.dataset.selector = data.text;
      box.dataset.unique = data.unique;
    } else if (status === 200) { box.textContent = "no node here"; } else { box.textContent = data.error || "error"; }
    inspectBusy = false;
    if (pending) { const q = pending; pending = null; inspect(q); }
  }
  img.addEventListener("mousemove", (ev) => inspect(norm(ev)));

  for (const b of document.querySelectorAll("button[data-key]")) b.onclick = () => act({ type: "key", key: b.dataset.key });
  for (const b of document.querySelectorAll("button[data-app]")) b.onclick = async () => {
    const { status, data } = await api("POST", base + "/start", { package: b.dataset.app });
    say(status === 200 ? "opened " + b.dataset.app : data.error, status !== 200);
    if (status === 200 && window.rbRecorder) window.rbRecorder.opened(b.dataset.app);
  };
  document.getElementById("type-form").onsubmit = (ev) => {
    ev.preventDefault();
    const t = document.getElementById("type-text");
    if (t.value) act({ type: "type", text: t.value });
    t.value = "";
  };
  document.getElementById("release").onclick = async () => {
    await api("POST", base + "/release", {});
    document.getElementById("lease").textContent = "not leased";
  };
  document.getElementById("capture-form").onsubmit = async (ev) => {
    ev.preventDefault();
    const { status, data } = await api("POST", base + "/capture", { label: document.getElementById("capture-label").value });
    document.getElementById("capture-result").textContent = status === 200 ? "saved " + data.path : data.error;
  };
  stream();
}

// --- labelling ----------------------------------------------------------------------------------

function startLabel() {
  let current = null, saved = false;
  const $ = (id) => document.getElementById(id);
  const store = () => $("label-store").value, who = () => $("labeller").value.trim();

  async function agreement() {
    const { status, data } = await api("GET", "/api/label/agreement?store=" + encodeURIComponent(store()));
    if (status !== 200) return;
    const rows = data.pairs.map((p) => el("tr", {}, el("td", {}, p.a), el("td", {}, p.b), el("td", {}, String(p.n)),
      el("td", {}, p.kappa === null ? p.note : p.kappa.toFixed(2))));
    const counts = Object.entries(data.labellers).map(([k, v]) => `${k}: ${v}`).join(" · ");
    $("agreement").replaceChildren(el("p", {}, counts || "no labels yet"),
      rows.length ? el("table", { class: "data", id: "kappa" }, el("tr", {}, el("th", {}, "labeller"), el("th", {}, "labeller"), el("th", {}, "both labelled"), el("th", {}, "Cohen's κ")), ...rows) : "");
  }

  async function next() {
    if (!who()) { $("labeller").focus(); return; }
    const { status, data } = await api("GET", `/api/label/next?store=${encodeURIComponent(store())}&labeller=${encodeURIComponent(who())}`);
    agreement();
    if (status !== 200) { $("label-done").textContent = data.error; $("label-done").hidden = false; return; }
    if (data.done) { $("label-item").hidden = true; $("label-done").hidden = false; current = null; return; }
    current = data; saved = false;
    $("label-done").hidden = true; $("label-item").hidden = false; $("label-reveal").hidden = true;
    $("label-meta").textContent = `${data.task} · ${data.model} · ${data.target} · ${data.device}` + (data.planned ? " · from the labelling plan" : "") + ` · ${data.remaining} left`;
    $("label-instruction").textContent = data.instruction;
    $("label-rubric").textContent = data.rubric || "(no rubric recorded)";
    $("label-steps").replaceChildren(...data.steps.map((s) => el("li", {}, s.image ? el("img", { class: "shot", src: s.image, alt: "step " + s.index }) : "", el("code", {}, s.action))));
    $("label-answer").textContent = (data.answer ? `answer: “${data.answer}”` : "no answer") + (data.typed.length ? ` · typed: ${data.typed.map((t) => "“" + t + "”").join(", ")}` : "");
    $("label-final").replaceChildren(data.final ? el("img", { class: "shot", src: data.final, alt: "final screen" }) : el("span", { class: "empty" }, "no final screen"));
    $("label-note").value = "";
    for (const b of document.querySelectorAll(".label-buttons button")) b.disabled = false;
  }

  async function give(value) {
    if (!current || saved) return;
    const { status, data } = await api("POST", "/api/label", { store: store(), episode: current.episode, labeller: who(), success: value, note: $("label-note").value });
    if (status !== 200) { $("label-reveal").hidden = false; $("label-reveal").textContent = data.error; return; }
    saved = true;
    for (const b of document.querySelectorAll(".label-buttons button")) b.disabled = true;
    const judges = data.judge.map((j) => `${j.name}: ${j.success === null ? "abstained" : j.success ? "success" : "failure"} — ${j.reason}`);
    $("label-reveal").hidden = false;
    $("label-reveal").textContent = "Saved. Judge said: " + (judges.join("; ") || "(no judge verdict)") + ". Press n for the next episode.";
    agreement();
  }

  $("label-setup").onsubmit = (ev) => { ev.preventDefault(); next(); };
  for (const b of document.querySelectorAll(".label-buttons button")) b.onclick = () => give(JSON.parse(b.dataset.value));
  document.addEventListener("keydown", (ev) => {
    if (ev.target.tagName === "TEXTAREA" || ev.target.tagName === "INPUT") return;
    if (ev.key === "s") give(true); else if (ev.key === "f") give(false); else if (ev.key === "u") give(null);
    else if (ev.key === "n" && saved) next();
  });
  if (who()) next(); else agreement();
}

const page = document.body.dataset.page;
if (page === "fleet") startFleet();
if (page === "phone") startPhone();
if (page === "label") startLabel();

// --- recorder (on the phone page) ---------------------------------------------------------------

function startRecorder() {
  const root = document.getElementById("recorder");
  if (!root) return;
  const serial = document.querySelector(".phone").dataset.serial;
  const base = "/api/phones/" + encodeURIComponent(serial) + "/recorder";
  const packs = JSON.parse(root.dataset.packs);
  const $ = (id) => document.getElementById(id);
  const phases = ["setup", "golden", "boundary", "check", "answer"];

  function fillTasks() {
    const p = packs.find((x) => x.path === $("rec-pack").value);
    $("rec-task").replaceChildren(...(p ? p.tasks : []).map((t) => el("option", { value: t }, t)));
  }
  $("rec-pack").onchange = fillTasks;
  fillTasks();

  function show(data) {
    const on = !!data.recording;
    $("rec-body").hidden = !on; $("rec-stop").disabled = !on;
    if (!on) return;
    $("rec-steps").tBodies[0].replaceChildren(...data.steps.map((s) => {
      const sel = el("select", { "data-index": s.index });
      for (const p of phases) { const o = el("option", { value: p }, p); if (p === s.phase) o.selected = true; sel.append(o); }
      sel.onchange = () => edit({ op: "mark", index: s.index, phase: sel.value });
      const del = el("button", { type: "button" }, "delete");
      del.onclick = () => edit({ op: "delete", index: s.index });
      const what = s.kind + (s.text ? ` “${s.text}”` : "") + (s.direction ? " " + s.direction : "");
      return el("tr", {}, el("td", {}, String(s.index)), el("td", {}, what),
        el("td", { class: s.unique ? "" : "bad" }, s.selector ? JSON.stringify(s.selector) + (s.unique ? "" : " (not unique)") : "–"),
        el("td", {}, sel), el("td", {}, del));
    }));
    $("rec-problems").replaceChildren(...[...data.problems, ...data.notes].map((p) => el("li", {}, p)));
    $("rec-yaml").textContent = data.yaml;
  }
  async function refresh() { const { status, data } = await api("GET", base); if (status === 200) show(data); }
  async function edit(body) {
    const { status, data } = await api("POST", base + "/edit", body);
    if (status === 200) show(data); else $("rec-result").textContent = data.error;
  }
  $("rec-start").onsubmit = async (ev) => {
    ev.preventDefault();
    const { status, data } = await api("POST", base + "/start", { pack: $("rec-pack").value, task: $("rec-task").value });
    if (status === 200) show(data); else $("rec-result").textContent = data.error;
  };
  // Stop never drops unwritten steps silently: the server keeps them and says so; ask first.
  $("rec-stop").onclick = async () => {
    let { status, data } = await api("POST", base + "/stop", {});
    if (status === 409 && data.unwritten) {
      if (!window.confirm(data.error + ". Discard them?")) { $("rec-result").textContent = "kept: " + data.error; show(data); return; }
      ({ status, data } = await api("POST", base + "/stop", { discard: true }));
    }
    if (status === 200) show({ recording: false }); else $("rec-result").textContent = data.error;
  };
  for (const r of document.querySelectorAll("input[name=rec-default]")) r.onchange = () => edit({ op: "default", phase: r.value });
  window.rbPointMode = null;
  $("rec-check").onclick = () => { window.rbPointMode = "check"; $("rec-result").textContent = "click the control that must be on screen"; };
  $("rec-answer").onclick = () => { window.rbPointMode = "answer"; $("rec-result").textContent = "click the text the answer is read from"; };
  $("rec-write").onsubmit = async (ev) => {
    ev.preventDefault();
    const dest = document.querySelector("input[name=rec-dest]:checked").value;
    const body = dest === "new" ? { new_file: $("rec-file").value } : {};
    const { status, data } = await api("POST", base + "/write", body);
    $("rec-result").textContent = status === 200 ? "written to " + data.path + (data.backup ? " (backup " + data.backup + ")" : "") : data.error;
  };
  window.rbRecorder = {
    refresh,
    opened: refresh,
    point: async (p) => { const phase = window.rbPointMode; window.rbPointMode = null; $("rec-result").textContent = ""; await edit({ op: "point", phase, x: p.x, y: p.y, regex: $("rec-regex").value }); },
  };
  refresh();
}
if (page === "phone") startRecorder();

// presence dashboard: plain JavaScript against the service's /v1 API.
// It polls the admin overview, follows the event stream, and runs
// simulated devices that log in, heartbeat and touch a scope.
"use strict";

const $ = (sel, root = document) => root.querySelector(sel);
const state = { info: null, token: "", source: null, devices: new Set() };

// ---- token and requests -------------------------------------------------

function loadToken() {
  const m = location.hash.match(/token=([^&]+)/);
  if (m) {
    sessionStorage.setItem("presence-token", decodeURIComponent(m[1]));
    history.replaceState(null, "", location.pathname);
  }
  state.token = sessionStorage.getItem("presence-token") || "";
}

async function api(method, path, body) {
  const headers = { "Accept": "application/json" };
  if (state.token) headers["Authorization"] = "Bearer " + state.token;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const res = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  const data = await res.json().catch(() => ({}));
  if (!res.ok) {
    const err = new Error((data.error && data.error.message) || res.statusText);
    err.code = data.error && data.error.code;
    err.status = res.status;
    throw err;
  }
  return data;
}

const enc = encodeURIComponent;
const time = (ms) => ms ? new Date(ms).toLocaleTimeString() : "–";

function banner(text) {
  const b = $("#banner");
  b.textContent = text || "";
  b.classList.toggle("hidden", !text);
}

// ---- overview -------------------------------------------------------------

async function refresh() {
  try {
    const ov = await api("GET", "/v1/admin/overview");
    banner("");
    for (const [st, n] of Object.entries(ov.users.by_status)) {
      const el = $("#n-" + st);
      if (el) el.textContent = n;
    }
    const users = $("#users");
    users.replaceChildren(...ov.users.recent.map((u) => row([u.user, badge(u.status), time(u.at)], { "data-user": u.user })));
    $("#users-note").textContent = `${ov.users.tracked} known online, ${ov.users.pending} to check; counted from the change log and this instance's traffic, re-read ${ov.users.reconciled_at ? "at " + time(ov.users.reconciled_at) : "soon"}. The keyspace is never scanned.`;
    const scopes = $("#scopes");
    scopes.replaceChildren(...ov.scopes.map((s) => {
      const count = document.createElement("span");
      count.className = "scope-count";
      count.textContent = s.error ? "error: " + s.error : String(s.count) + (s.stale ? " (stale)" : "");
      return row([s.scope, count, time(s.as_of)], { "data-scope": s.scope });
    }));
    showSweeps(ov.sweeper);
  } catch (e) {
    if (e.status === 401 || e.status === 403) banner("The overview needs an admin token: paste one above (or open the page with #token=…).");
    else banner("Cannot reach the service: " + e.message);
  }
}

function row(cells, attrs = {}) {
  const tr = document.createElement("tr");
  for (const [k, v] of Object.entries(attrs)) tr.setAttribute(k, v);
  for (const c of cells) {
    const td = document.createElement("td");
    if (c instanceof Node) td.append(c); else td.textContent = c;
    tr.append(td);
  }
  return tr;
}

function badge(status) {
  const b = document.createElement("span");
  b.className = "badge st-" + status;
  b.textContent = status;
  return b;
}

function sweepText(r) {
  if (!r) return "–";
  const base = `${r.kind} at ${time(r.at)}: visited ${r.visited}, removed ${r.removed}, released ${r.released}, changes ${r.changes}, held ${r.held}, ${r.steps} steps, ${r.duration_ms} ms`;
  return r.error ? base + " — error: " + r.error : base;
}

function showSweeps(sw) {
  $("#sweep-last").replaceChildren(
    Object.assign(document.createElement("div"), { textContent: "last users pass: " + sweepText(sw.users) }),
    Object.assign(document.createElement("div"), { textContent: "last scopes pass: " + sweepText(sw.scopes) }));
  $("#sweeps").replaceChildren(...sw.recent.slice(0, 30).map((r) => Object.assign(document.createElement("li"), { textContent: sweepText(r) })));
}

// ---- event stream -----------------------------------------------------------

function logEvent(text) {
  const list = $("#events");
  const li = document.createElement("li");
  li.textContent = new Date().toLocaleTimeString() + "  " + text;
  list.prepend(li);
  while (list.children.length > 200) list.lastChild.remove();
}

function openStream() {
  if (state.source) state.source.close();
  let url = "/v1/events?all=1&sweeps=1";
  if (state.token) url += "&access_token=" + enc(state.token);
  const src = new EventSource(url);
  state.source = src;
  const st = $("#stream-state");
  src.onopen = () => { st.textContent = "events: live"; st.className = "badge ok"; };
  src.onerror = () => { st.textContent = "events: reconnecting"; st.className = "badge warn"; };
  src.addEventListener("change", (e) => {
    const c = JSON.parse(e.data);
    logEvent(`change ${c.user}: ${c.from} → ${c.to}`);
    for (const d of state.devices) d.published(c);
  });
  src.addEventListener("kick", (e) => {
    const k = JSON.parse(e.data);
    logEvent(`kick ${k.user}/${k.device} on ${k.gateway}`);
  });
  src.addEventListener("sweep", (e) => {
    const r = JSON.parse(e.data);
    if (r.changes || r.removed || r.released || r.error) logEvent("sweep " + sweepText(r));
  });
  src.addEventListener("reset", () => logEvent("reset: some changes were trimmed from the log before they reached this page"));
  src.addEventListener("bye", (e) => logEvent("server closed the stream (" + JSON.parse(e.data).reason + "); reconnecting"));
}

// ---- simulated devices ------------------------------------------------------

class SimDevice {
  constructor(user, kind, scope) {
    this.user = user;
    this.kind = kind;
    this.id = "browser-" + Math.random().toString(36).slice(2, 7);
    const [cls, ...rest] = scope.split(":");
    this.scope = { cls, id: rest.join(":") };
    this.token = "";
    this.active = true;
    this.beating = false;
    this.lastStatus = "";
    this.el = $("#device-tpl").content.firstElementChild.cloneNode(true);
    this.el.dataset.user = user;
    $(".dev-name", this.el).textContent = `${user} / ${this.id} (${kind})`;
    $(".dev-scope", this.el).textContent = scope;
    $(".act", this.el).onclick = () => { this.active = true; this.beat(); };
    $(".net", this.el).onclick = () => this.toggleNetwork();
    $(".disc", this.el).onclick = () => this.end("disconnect");
    $(".out", this.el).onclick = () => this.end("logout");
    $(".close", this.el).onclick = () => this.close();
    this.el.addEventListener("pointermove", () => { this.active = true; });
    this.el.addEventListener("keydown", () => { this.active = true; });
    $("#devices").prepend(this.el);
  }

  note(text) {
    const li = document.createElement("li");
    li.textContent = new Date().toLocaleTimeString() + "  " + text;
    $(".timeline", this.el).prepend(li);
  }

  async start() {
    try {
      const res = await api("POST", "/v1/login", { user: this.user, device: this.id, kind: this.kind, gateway: "dashboard" });
      this.token = res.token;
      this.note("logged in");
      this.beating = true;
      const every = Math.max(1000, state.info.intervals_ms[this.kind] || 30000);
      this.beatTimer = setInterval(() => this.beat(), every);
      this.pollTimer = setInterval(() => this.poll(), 1000);
      this.active = false; // the login counted as activity
      await this.touch();
      await this.poll();
    } catch (e) {
      this.note("login failed: " + e.message);
    }
  }

  async beat() {
    if (!this.beating) return;
    const active = this.active;
    this.active = false;
    try {
      await api("POST", "/v1/heartbeat", { user: this.user, device: this.id, kind: this.kind, gateway: "dashboard", token: this.token, active });
      $(".hb", this.el).textContent = "heartbeat " + new Date().toLocaleTimeString() + (active ? " (active)" : "");
      await this.touch();
      await this.poll();
    } catch (e) {
      this.note("heartbeat refused: " + (e.code || e.message));
      if (e.code === "session_replaced" || e.code === "no_session") this.stopBeats();
    }
  }

  async touch() {
    if (!this.scope.id) return;
    const path = `/v1/scopes/${enc(this.scope.cls)}/${enc(this.scope.id)}`;
    try {
      await api("POST", path + "/touch", { member: this.user });
      await this.count();
    } catch (e) {
      $(".scope-count", this.el).textContent = "error: " + (e.code || e.message);
    }
  }

  async count() {
    const c = await api("GET", `/v1/scopes/${enc(this.scope.cls)}/${enc(this.scope.id)}/count`);
    $(".scope-count", this.el).textContent = String(c.count);
  }

  async poll() {
    try {
      const st = await api("GET", "/v1/users/" + enc(this.user) + "/status");
      const mine = (st.devices || []).find((d) => d.id === this.id);
      const b = $(".device-status", this.el);
      b.textContent = st.status;
      b.className = "badge device-status st-" + st.status;
      $(".device-state", this.el).textContent = "this device: " + (mine ? mine.state : "OFFLINE");
      if (st.status !== this.lastStatus) {
        this.note("status " + st.status);
        this.lastStatus = st.status;
      }
      if (this.scope.id) await this.count();
    } catch (e) {
      $(".device-state", this.el).textContent = "status unavailable: " + e.message;
    }
  }

  published(c) {
    if (c.user === this.user) this.note(`published ${c.from} → ${c.to}`);
  }

  stopBeats() {
    this.beating = false;
    clearInterval(this.beatTimer);
  }

  toggleNetwork() {
    const btn = $(".net", this.el);
    if (this.beating) {
      this.stopBeats();
      this.el.classList.add("lost");
      btn.textContent = "Restore network";
      this.note("network lost: heartbeats stopped");
    } else {
      this.beating = true;
      this.el.classList.remove("lost");
      btn.textContent = "Lose network";
      const every = Math.max(1000, state.info.intervals_ms[this.kind] || 30000);
      this.beatTimer = setInterval(() => this.beat(), every);
      this.active = true;
      this.beat();
      this.note("network restored");
    }
  }

  async end(how) {
    this.stopBeats();
    try {
      const res = await api("POST", "/v1/" + how, { user: this.user, device: this.id, token: this.token });
      this.note(how + (res.removed ? "" : " (no live session)"));
      if (this.scope.id) await api("POST", `/v1/scopes/${enc(this.scope.cls)}/${enc(this.scope.id)}/leave`, { member: this.user }).catch(() => {});
    } catch (e) {
      this.note(how + " failed: " + e.message);
    }
    this.poll();
  }

  close() {
    if (this.beating) this.end("logout");
    clearInterval(this.pollTimer);
    state.devices.delete(this);
    this.el.remove();
  }
}

function newDevice(ev) {
  ev.preventDefault();
  const user = $("#dev-user").value.trim() || "guest-" + Math.random().toString(36).slice(2, 6);
  const d = new SimDevice(user, $("#dev-kind").value, $("#dev-scope").value.trim());
  state.devices.add(d);
  d.start();
  $("#dev-user").value = user;
}

// ---- online history -------------------------------------------------------

const HISTORY_STATUSES = [["ONLINE", "#16a34a"], ["AWAY", "#d97706"], ["DND", "#dc2626"], ["PUSH_ONLINE", "#2563eb"]];
const SVG = "http://www.w3.org/2000/svg";

function svgEl(name, attrs, text) {
  const el = document.createElementNS(SVG, name);
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, v);
  if (text !== undefined) el.textContent = text;
  return el;
}

// drawHistory draws online users by status over the range of h (the
// answer of GET /v1/history), one line per status, and marks the peak.
function drawHistory(h) {
  const svg = $("#history-chart");
  const W = 960, H = 240, L = 44, R = 12, T = 14, B = 24;
  const pts = h.points || [];
  const top = Math.max(1, ...pts.map((p) => Math.max(...HISTORY_STATUSES.map(([st]) => p.by_status[st] || 0))), h.peak ? h.peak.by_status.ONLINE || 0 : 0);
  const x = (at) => L + (W - L - R) * (at - h.from) / Math.max(1, h.to - h.from);
  const y = (n) => H - B - (H - T - B) * n / top;
  const kids = [];
  for (const f of [0, 0.5, 1]) {
    const n = Math.round(top * f);
    kids.push(svgEl("line", { x1: L, x2: W - R, y1: y(n), y2: y(n), stroke: "#e3e6eb" }));
    kids.push(svgEl("text", { x: L - 6, y: y(n) + 4, "text-anchor": "end", fill: "#6b7280" }, String(n)));
  }
  for (let i = 0; i <= 4; i++) {
    const at = h.from + (h.to - h.from) * i / 4;
    kids.push(svgEl("text", { x: x(at), y: H - 6, "text-anchor": i === 0 ? "start" : i === 4 ? "end" : "middle", fill: "#6b7280" },
      new Date(at).toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" })));
  }
  for (const [st, color] of HISTORY_STATUSES) {
    if (pts.length === 0) break;
    const d = pts.map((p) => `${x(p.at).toFixed(1)},${y(p.by_status[st] || 0).toFixed(1)}`).join(" ");
    kids.push(svgEl("polyline", { points: d, fill: "none", stroke: color, "stroke-width": 2, "data-status": st }));
  }
  if (h.peak) {
    const px = x(h.peak.at), n = h.peak.by_status.ONLINE || 0, py = y(n);
    const g = svgEl("g", { id: "history-peak", "data-total": h.peak.total, "data-at": h.peak.at });
    g.append(svgEl("line", { x1: px, x2: px, y1: T, y2: H - B, stroke: "#1d2330", "stroke-dasharray": "3 3" }));
    g.append(svgEl("circle", { cx: px, cy: py, r: 4, fill: "#1d2330" }));
    const right = px > W / 2;
    g.append(svgEl("text", { x: px + (right ? -6 : 6), y: T + 10, "text-anchor": right ? "end" : "start", fill: "#1d2330", "font-weight": "600" },
      `peak ${h.peak.total} online at ${new Date(h.peak.at).toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" })}`));
    kids.push(g);
  }
  svg.replaceChildren(...kids);
  svg.setAttribute("data-points", String(pts.length));
  $("#history-legend").replaceChildren(...HISTORY_STATUSES.map(([st, color]) => {
    const span = document.createElement("span");
    const sw = document.createElement("span");
    sw.className = "swatch st-" + st;
    span.append(sw, st);
    return span;
  }));
}

async function refreshHistory() {
  const note = $("#history-note");
  const to = Date.now();
  try {
    const h = await api("GET", `/v1/history?from=${to - 24 * 3600 * 1000}&to=${to}`);
    drawHistory(h);
    note.textContent = h.points.length === 0
      ? "No snapshots in the last 24 hours yet: the service records one a minute."
      : `${h.points.length} steps of ${Math.round(h.step_ms / 60000)} min; each the largest count of its snapshots (presence history prints the same).`;
  } catch (e) {
    if (e.status === 404) note.textContent = "The online history is off (presence serve --history-db).";
    else if (e.status === 503) note.textContent = "The history database has not been reached yet: " + e.message;
    else if (e.status === 401 || e.status === 403) note.textContent = "The history needs an admin token.";
    else note.textContent = "Cannot read the history: " + e.message;
  }
}

// ---- start ------------------------------------------------------------------

async function main() {
  loadToken();
  state.info = await api("GET", "/v1/info");
  const info = state.info;
  const mode = $("#mode");
  mode.textContent = info.auth === "insecure-dev" ? "INSECURE DEV MODE: no authentication" : "JWT auth";
  mode.className = "badge " + (info.auth === "insecure-dev" ? "warn" : "ok");
  $("#backend").textContent = info.backend;
  if (info.auth !== "insecure-dev") {
    const form = $("#token-form");
    form.classList.remove("hidden");
    $("#token").value = state.token;
    form.onsubmit = (e) => {
      e.preventDefault();
      state.token = $("#token").value.trim();
      sessionStorage.setItem("presence-token", state.token);
      openStream();
      refresh();
      refreshHistory();
    };
  }
  const s = (ms) => (ms / 1000) + " s";
  $("#timings").textContent = `Heartbeat every ${s(info.intervals_ms.web)} (web) / ${s(info.intervals_ms.ios)} (mobile); ` +
    `AWAY after ${s(info.idle_after_ms)} without activity (move the pointer over a card or press Activity); ` +
    `OFFLINE ${s(2 * info.intervals_ms.web)} after the heartbeats stop (Lose network), published ${s(info.leave_delay_ms)} later.`;
  $("#dev-user").value = "guest-" + Math.random().toString(36).slice(2, 6);
  $("#device-form").onsubmit = newDevice;
  openStream();
  refresh();
  setInterval(refresh, 1500);
  refreshHistory();
  setInterval(refreshHistory, 30000);
}

main().catch((e) => banner("Start-up failed: " + e.message));

// presence dashboard: plain JavaScript against the service's /v1 API.
// It polls the admin overview, follows the event stream, and runs
// simulated devices that log in, heartbeat and touch a scope. An ES
// module: enums.js, generated from core's table, names the statuses.
import { statuses } from "./enums.js";

const $ = (sel, root = document) => root.querySelector(sel);

// One tile for each status but OFFLINE (statuses[0]), the most present
// first, as core orders them.
$("#tiles").replaceChildren(...statuses.slice(1).reverse().map((st) => {
  const tile = document.createElement("div"), n = document.createElement("span"), name = document.createElement("span");
  tile.className = "tile st-" + st;
  n.className = "n";
  n.id = "n-" + st;
  n.textContent = "0";
  name.textContent = st;
  tile.append(n, name);
  return tile;
}));
const state = {
  info: null, token: "", source: null, devices: new Set(),
  stream: "connecting", // the event stream: connecting, live, reconnecting
  redis: null, redisAt: 0, // the overview's Redis health, and when it came (this clock)
  serviceLost: 0, // when the overview first failed to answer; 0 while it answers
  history: null, // the last history answer, redrawn on resize
};

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

// dur says a duration in words: "45 s", "3 min 05 s", "2 h 03 min".
function dur(ms) {
  const s = Math.max(0, Math.floor(ms / 1000)), pad = (n) => String(n).padStart(2, "0");
  if (s < 60) return s + " s";
  if (s < 3600) return Math.floor(s / 60) + " min " + pad(s % 60) + " s";
  return Math.floor(s / 3600) + " h " + pad(Math.floor(s / 60) % 60) + " min";
}

function banner(text) {
  const b = $("#banner");
  b.textContent = text || "";
  b.classList.toggle("hidden", !text);
}

// ---- overview -------------------------------------------------------------

async function refresh() {
  let ov;
  try {
    ov = await api("GET", "/v1/admin/overview");
  } catch (e) {
    if (e.status === 401 || e.status === 403) banner("The overview needs an admin token: paste one above (or open the page with #token=…).");
    else {
      state.serviceLost ||= Date.now();
      state.lastError = e.message;
    }
    showOutage();
    return;
  }
  state.serviceLost = 0;
  state.redis = ov.redis;
  state.redisAt = Date.now();
  showOutage();
  try {
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
    banner("Cannot show the overview: " + e.message);
  }
}

// showOutage shows the outage banner (Redis, or the service itself, not
// answering, and for how long), marks the figures it leaves stale, and
// says so in the header. It runs every second, so the time keeps counting.
function showOutage() {
  const r = state.redis;
  let text = "";
  if (state.serviceLost) {
    text = `The service has not answered for ${dur(Date.now() - state.serviceLost)} (since ${time(state.serviceLost)}): the figures below are from before. ${state.lastError || ""}`;
  } else if (r && !r.up) {
    text = `Redis unreachable for ${dur(r.down_ms + Date.now() - state.redisAt)} (since ${time(r.down_since)}): the figures below are as they were before the outage. Last error: ${r.error}`;
  }
  const o = $("#outage");
  o.textContent = text;
  o.classList.toggle("hidden", !text);
  for (const p of ["#users-panel", "#scopes-panel"]) $(p).classList.toggle("stale", !!text);
  showStreamState();
}

// showStreamState says in the header whether events flow: the stream may
// be open while Redis, where they come from, is not answering.
function showStreamState() {
  const [text, cls] = state.redis && !state.redis.up ? ["events: stalled (Redis down)", "bad"]
    : state.serviceLost ? ["events: service unreachable", "bad"]
    : state.stream === "live" ? ["events: live", "ok"]
    : ["events: " + state.stream, "warn"];
  const st = $("#stream-state");
  st.textContent = text;
  st.className = "badge " + cls;
}

function row(cells, attrs = {}) {
  const tr = document.createElement("tr");
  for (const [k, v] of Object.entries(attrs)) tr.setAttribute(k, v);
  for (const c of cells) {
    const td = document.createElement("td");
    if (c instanceof Node) td.append(c);
    else td.textContent = td.title = c; // cut to one line: the whole text on hover
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
  src.onopen = () => { state.stream = "live"; showStreamState(); };
  src.onerror = () => { state.stream = "reconnecting"; showStreamState(); };
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
  src.addEventListener("loss", (e) => {
    const l = JSON.parse(e.data);
    logEvent(`Redis lost its data; devices and manual statuses come back by ${new Date(l.until).toLocaleTimeString()}, without change events`);
  });
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

// niceStep is the round step (1, 2 or 5 times a power of ten) at least raw.
function niceStep(raw) {
  const p = 10 ** Math.floor(Math.log10(Math.max(raw, 1)));
  return [1, 2, 5, 10].map((m) => m * p).find((v) => v >= raw);
}

const MINUTE = 60000, HOUR = 60 * MINUTE;
const hhmm = (ms) => new Date(ms).toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" });

// hourTicks returns the instants in [from, to] at whole local hours that
// are multiples of every hours: 00:00, 03:00, 06:00…, whatever "now" is.
function hourTicks(from, to, every) {
  const d = new Date(from);
  d.setMinutes(0, 0, 0);
  const out = [];
  for (; d.getTime() <= to; d.setHours(d.getHours() + 1)) {
    if (d.getTime() >= from && d.getHours() % every === 0) out.push(d.getTime());
  }
  return out;
}

// drawHistory draws online users by status over the range of h (the
// answer of GET /v1/history), one line per status, and marks the peak (the
// step with the most users in all) on the ONLINE line, labelled with that
// line's count and the total. The chart is drawn at the size it is shown,
// so its text is never stretched.
function drawHistory(h) {
  const svg = $("#history-chart");
  const W = Math.max(320, Math.round(svg.getBoundingClientRect().width) || 960), H = 240, L = 44, R = 12, T = 14, B = 24;
  svg.setAttribute("viewBox", `0 0 ${W} ${H}`);
  const pts = h.points || [];
  const most = Math.max(1, ...pts.map((p) => Math.max(...HISTORY_STATUSES.map(([st]) => p.by_status[st] || 0))));
  const ystep = niceStep(most / 4), top = ystep * Math.ceil(most / ystep);
  const x = (at) => L + (W - L - R) * (at - h.from) / Math.max(1, h.to - h.from);
  const y = (n) => H - B - (H - T - B) * n / top;
  const kids = [];
  for (let n = 0; n <= top; n += ystep) {
    kids.push(svgEl("line", { x1: L, x2: W - R, y1: y(n), y2: y(n), stroke: "#e3e6eb" }));
    kids.push(svgEl("text", { x: L - 6, y: y(n) + 4, "text-anchor": "end", fill: "#6b7280" }, String(n)));
  }
  // Ticks at whole hours, as many as fit one label per 90 px.
  const span = (h.to - h.from) / HOUR, fit = Math.max(2, Math.floor((W - L - R) / 90));
  const every = [1, 2, 3, 4, 6, 12, 24].find((e) => span / e <= fit) || 24;
  for (const at of hourTicks(h.from, h.to, every)) {
    kids.push(svgEl("line", { x1: x(at), x2: x(at), y1: H - B, y2: H - B + 4, stroke: "#9ca3af", class: "tick", "data-at": at }));
    kids.push(svgEl("text", { x: x(at), y: H - 6, "text-anchor": "middle", fill: "#6b7280", class: "tick" }, hhmm(at)));
  }
  for (const [st, color] of HISTORY_STATUSES) {
    if (pts.length === 0) break;
    const d = pts.map((p) => `${x(p.at + h.step_ms / 2).toFixed(1)},${y(p.by_status[st] || 0).toFixed(1)}`).join(" ");
    kids.push(svgEl("polyline", { points: d, fill: "none", stroke: color, "stroke-width": 2, "data-status": st }));
  }
  if (h.peak) {
    const px = x(h.peak.at + h.step_ms / 2), n = h.peak.by_status.ONLINE || 0, py = y(n);
    const g = svgEl("g", { id: "history-peak", "data-total": h.peak.total, "data-online": n, "data-at": h.peak.at });
    g.append(svgEl("line", { x1: px, x2: px, y1: T, y2: H - B, stroke: "#1d2330", "stroke-dasharray": "3 3" }));
    g.append(svgEl("circle", { cx: px, cy: py, r: 4, fill: "#16a34a", stroke: "#1d2330" }));
    const right = px > W / 2;
    g.append(svgEl("text", { x: px + (right ? -6 : 6), y: T + 10, "text-anchor": right ? "end" : "start", fill: "#1d2330", "font-weight": "600" },
      `peak ${n} ONLINE at ${hhmm(h.peak.at)} (${h.peak.total} in all)`));
    kids.push(g);
  }
  svg.replaceChildren(...kids);
  svg.setAttribute("data-points", String(pts.length));
  svg.setAttribute("data-from", String(h.from));
  svg.setAttribute("data-step", String(h.step_ms));
  $("#history-legend").replaceChildren(...HISTORY_STATUSES.map(([st, color]) => {
    const span = document.createElement("span");
    const sw = document.createElement("span");
    sw.className = "swatch st-" + st;
    span.append(sw, st);
    return span;
  }));
}

// HISTORY_STEP is the chart's step: 24 hours in 288 steps. The range is
// cut on multiples of it (since the epoch), so a step holds the same
// snapshots on every refresh and the peak does not move.
const HISTORY_STEP = 5 * MINUTE;

async function refreshHistory() {
  const note = $("#history-note");
  const to = Math.floor(Date.now() / HISTORY_STEP) * HISTORY_STEP + HISTORY_STEP, from = to - 24 * HOUR;
  try {
    const h = await api("GET", `/v1/history?from=${from}&to=${to}&step=${HISTORY_STEP}`);
    state.history = h;
    drawHistory(h);
    const n = h.points.length;
    note.textContent = n === 0
      ? "No snapshots in the last 24 hours yet: the service records one a minute."
      : `${n} ${n === 1 ? "step" : "steps"} of ${Math.round(h.step_ms / 60000)} min, on fixed boundaries; each the largest count of its snapshots (presence history prints the same).`;
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
  setInterval(showOutage, 1000); // the outage's duration keeps counting
  let resize;
  addEventListener("resize", () => {
    clearTimeout(resize);
    resize = setTimeout(() => state.history && drawHistory(state.history), 100);
  });
}

main().catch((e) => banner("Start-up failed: " + e.message));

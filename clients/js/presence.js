// presence.js: the browser client of `presence serve`. A dependency-free
// ES module: heartbeats with backoff, activity, one device per browser
// (one beating tab elected with the Web Locks API), kicks, token refresh,
// following users over SSE with Last-Event-ID resume, scopes, and a manual
// status re-asserted after the server lost its state.
// See README.md beside this file.

const store = globalThis.localStorage;
const load = (k) => { try { return JSON.parse(store.getItem(k)) || {}; } catch { return {}; } };
const save = (k, v) => { try { store.setItem(k, JSON.stringify(v)); } catch {} };
const rid = () => globalThis.crypto?.randomUUID?.() || Math.random().toString(36).slice(2) + Date.now().toString(36);
const wait = (ms) => new Promise((r) => setTimeout(r, ms));

// idLess orders the change log's event IDs ("ms-seq").
export const idLess = (a, b) => {
  const [am, as] = a.split("-").map(Number), [bm, bs] = b.split("-").map(Number);
  return am < bm || (am === bm && as < bs);
};

/** An error of the API: code is its stable code ("session_replaced", …). */
export class PresenceError extends Error {
  constructor(message, status, code, retryAfter) {
    super(message);
    Object.assign(this, { name: "PresenceError", status, code, retryAfter });
  }
}

// transient tells a failure worth retrying: the network, 408, 429, 5xx.
const transient = (e) => !e.status || e.status === 408 || e.status === 429 || e.status >= 500;

/** A presence client for one user in this browser. */
export class Presence {
  constructor(o = {}) {
    if (!o.user) throw new Error("presence: options.user is required");
    this.o = { url: "", kind: "web", background: "hidden", activity: ["pointerdown", "keydown", "wheel", "touchstart"], backoff: {}, streamTimeout: 45000, ...o };
    this.user = o.user;
    this.key = "presence:" + this.user;
    const s = load(this.key);
    this.device = o.device || s.device || rid();
    if (!s.device) save(this.key, { ...s, device: this.device });
    this.tab = rid();
    this.leader = false;
    this.running = false;
    this.stats = { beats: 0, failures: 0, streams: 0 };
    this._h = {};
    this._tabs = new Map(); // other tabs' visibility, known to the leader
    this._follows = new Set();
    this._watches = new Set();
    this._active = true;
    this._fails = 0;
  }

  /** on subscribes fn to an event; it returns the unsubscribe function. */
  on(name, fn) {
    (this._h[name] ||= new Set()).add(fn);
    return () => this._h[name].delete(fn);
  }

  _emit(name, ...a) {
    for (const fn of this._h[name] || []) {
      try { fn(...a); } catch (e) { setTimeout(() => { throw e; }); }
    }
  }

  /** info returns the server's timings (GET /v1/info), once. */
  info() {
    return (this._info ||= this.request("GET", "/v1/info").catch((e) => { this._info = null; throw e; }));
  }

  async _jwt(refresh) {
    const t = this.o.token;
    if (typeof t !== "function") return t || "";
    if (refresh || this._tok === undefined) this._tok = await t(!!refresh);
    return this._tok || "";
  }

  /** request calls the API; it throws a PresenceError. A 401 asks the token hook for a new token once. */
  async request(method, path, body, init = {}) {
    for (let again = 0; ; again++) {
      const headers = { Accept: "application/json", ...init.headers };
      const jwt = await this._jwt(again);
      if (jwt) headers.Authorization = "Bearer " + jwt;
      if (body !== undefined) headers["Content-Type"] = "application/json";
      let res;
      try {
        res = await fetch(this.o.url + path, { ...init, method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
      } catch (e) {
        if (e.name === "AbortError") throw e;
        throw new PresenceError(e.message, 0, "network", 0);
      }
      if (init.raw && res.ok) return res;
      const data = await res.json().catch(() => ({}));
      if (res.ok) return data;
      const er = data.error || {};
      const err = new PresenceError(er.message || res.statusText, res.status, er.code, +res.headers.get("Retry-After") || er.retry_after || 0);
      if (res.status !== 401 || again || typeof this.o.token !== "function") {
        if (res.status === 401) this._emit("unauthenticated", err);
        throw err;
      }
    }
  }

  // backoff is the wait before retry n (1, 2, …): exponential from
  // backoff.base, capped at backoff.max, half of it random, never below
  // the server's Retry-After.
  _backoff(n, retryAfter = 0) {
    const b = this.o.backoff, base = b.base || Math.min(1000, this._iv / 2), max = b.max || Math.max(30000, this._iv);
    const d = Math.min(max, base * 2 ** (n - 1));
    return Math.max(retryAfter * 1000, d / 2 + (Math.random() * d) / 2);
  }

  /** start begins the session: it elects the beating tab and listens to activity. */
  async start() {
    if (this.running) return;
    this.running = true;
    this._began = Date.now();
    let info;
    try {
      info = await this.info();
    } catch (e) {
      this.running = false; // start may be called again
      throw e;
    }
    if (!this.running) return; // stopped meanwhile
    this._iv = this.o.interval || info.intervals_ms?.[this.o.kind] || 30000;
    this._classes = Object.fromEntries((info.classes || []).map((c) => [c.name, c.window_ms]));
    this._bc = globalThis.BroadcastChannel ? new BroadcastChannel(this.key) : null;
    if (this._bc) this._bc.onmessage = (m) => this._message(m.data);
    if (this._endedHere()) return;
    this._onAct = () => this.active();
    this._onVis = () => this._vis();
    this._onHide = () => this._hide();
    this._onLine = () => this._fails && this.leader && this._schedule(Math.random() * 1000);
    for (const ev of this.o.activity) addEventListener(ev, this._onAct, { passive: true, capture: true });
    document.addEventListener("visibilitychange", this._onVis);
    addEventListener("pagehide", this._onHide);
    addEventListener("online", this._onLine);
    this._vis();
    if (!navigator.locks) return this._lead(); // no election: every tab beats
    this._lock = new AbortController();
    navigator.locks.request(this.key, { signal: this._lock.signal }, () => new Promise((release) => {
      this._release = release;
      this._lead();
    })).catch(() => {});
  }

  _post(m) { this._bc?.postMessage({ ...m, tab: this.tab }); }

  _message(m) {
    switch (m.t) {
      case "active": this._active = true; break;
      case "vis": this._tabs.set(m.tab, m.hidden); break;
      case "bye": this._tabs.delete(m.tab); break;
      case "who": this._vis(); break;
      case "end": this._end(m.why, m.detail, true); break;
    }
  }

  _vis() { this._post({ t: "vis", hidden: document.hidden }); }

  _hide() {
    this._post({ t: "bye" });
    // The last tab of the browser going away: the device disconnects now
    // rather than when its beats stop counting.
    if (this.leader && !this._tabs.size && this.running) {
      const s = load(this.key);
      save(this.key, { device: this.device }); // the next page starts a session
      if (s.token) this.request("POST", "/v1/disconnect", { user: this.user, device: this.device, token: s.token }, { keepalive: true }).catch(() => {});
    }
  }

  /** active marks the next heartbeat active: call it for anything the user does that the page sees itself. */
  active() {
    if (this.leader) { this._active = true; return; }
    const now = Date.now();
    if (!(now - (this._told || 0) < this._iv / 2)) { this._told = now; this._post({ t: "active" }); }
  }

  // _endedHere ends this tab's session if another tab ended it since this
  // tab started: a message on the channel can arrive after this tab was
  // granted the lock, or before its channel was open, and a tab that then
  // beat would log in again a session just kicked or logged out. A beat
  // refused because another tab logged out ends with that tab's reason.
  _endedHere() {
    const e = load(this.key).ended;
    if (!e || !(e.at >= this._began)) return false;
    this._end(e.why, e.detail, true);
    return true;
  }

  _lead() {
    if (!this.running || this._endedHere()) return this._release?.();
    this.leader = true;
    this._post({ t: "who" });
    this._emit("leader", true);
    // The previous leader's last beat sets the rhythm: the device is
    // beaten for within one interval of it.
    const last = load(this.key).beat || 0;
    this._schedule(Math.max(0, Math.min(this._iv, last + this._iv - Date.now())));
  }

  _schedule(ms) {
    clearTimeout(this._timer);
    this._timer = setTimeout(() => this._beat(), ms);
  }

  async _beat() {
    if (!this.leader || !this.running) return;
    let delay = this._iv;
    const s = load(this.key);
    try {
      const hidden = document.hidden && [...this._tabs.values()].every(Boolean);
      const body = { user: this.user, device: this.device, kind: this.o.kind, token: s.token || undefined, active: this._active,
        background: this.o.background === "hidden" ? hidden : !!this.o.background, meta: this.o.meta };
      this._active = false;
      let ack;
      try {
        if (!s.token && this.o.policy) throw new PresenceError("", 409, "no_session");
        ack = await this.request("POST", "/v1/heartbeat", body);
      } catch (e) {
        if (e.code !== "no_session") throw e;
        if (!this.leader || !this.running) return; // ended meanwhile: no new session
        const login = await this.request("POST", "/v1/login", { user: this.user, device: this.device, kind: this.o.kind, policy: this.o.policy, background: body.background, meta: this.o.meta });
        this._emit("login", login);
        if (s.token) this._reassert(); // the session this browser had is gone
        ack = await this.request("POST", "/v1/heartbeat", { ...body, token: login.token });
      }
      if (!this.leader || !this.running) return;
      this.stats.beats++;
      this._fails = 0;
      save(this.key, { ...load(this.key), device: this.device, token: ack.token, beat: Date.now() });
      this._emit("beat", ack);
      // Redis lost its data, and this beat found nothing of the user: the
      // manual status set here goes back (design §11).
      if (ack.reassert) this._reassert();
    } catch (e) {
      this.stats.failures++;
      if (e.code === "session_replaced") return this._endedHere() || this._end("kicked", e);
      this._emit("error", e);
      if (transient(e)) delay = this._backoff(++this._fails, e.retryAfter);
      this._active = true;
    }
    if (this.leader && this.running) this._schedule(delay);
  }

  // _end ends the session in this tab (and, unless told by another, in all
  // tabs of the browser): why is "kicked" or "logout".
  _end(why, detail, told) {
    if (!this.running) return;
    if (!told) this._post({ t: "end", why, detail: this._mark(why, detail) });
    this.stop();
    this._emit(why, detail);
  }

  // _mark records in storage that the session ended, and why, for the
  // other tabs; it returns the detail as recorded.
  _mark(why, detail) {
    const d = detail && { message: detail.message, code: detail.code };
    save(this.key, { device: load(this.key).device, ended: { why, detail: d, at: Date.now() } });
    return d;
  }

  /** logout ends the session on the server and in every tab of this browser. */
  async logout() {
    const s = load(this.key);
    // recorded first: a tab whose beat the server refuses once the session
    // is gone then knows it was a logout, not a kick
    this._mark("logout");
    try {
      if (s.token) await this.request("POST", "/v1/logout", { user: this.user, device: this.device, token: s.token });
    } finally {
      this._end("logout");
    }
  }

  /** stop stops this tab's client: beats (the lock passes to another tab), follows, watches and listeners. */
  stop() {
    if (!this.running) return;
    this.running = false;
    clearTimeout(this._timer);
    this._lock?.abort();
    this._release?.();
    this._release = null;
    if (this.leader) this._emit("leader", (this.leader = false));
    for (const ev of this.o.activity) removeEventListener(ev, this._onAct, { capture: true });
    document.removeEventListener("visibilitychange", this._onVis);
    removeEventListener("pagehide", this._onHide);
    removeEventListener("online", this._onLine);
    this._post({ t: "bye" });
    this._bc?.close();
    for (const f of [...this._follows]) f.close();
    for (const w of [...this._watches]) w.stop(true);
  }

  /** manual is the manual status this browser set and has not cleared: { status, until } (until 0: no expiry), or null. */
  get manual() {
    const m = load(this.key + ":manual");
    return m.status && !(m.until && m.until <= Date.now()) ? m : null;
  }

  /** setManual sets the user's manual status ("DND", "INVISIBLE"; "NONE" clears), for ttl ms (0: until cleared); the client re-asserts it after a loss. */
  async setManual(status, ttl = 0) {
    const none = status === "NONE";
    await this._putManual(status, ttl);
    save(this.key + ":manual", none ? {} : { status, until: ttl ? Date.now() + ttl : 0 });
  }

  /** clearManual clears the manual status. */
  clearManual() { return this.setManual("NONE"); }

  _putManual(status, ttl) {
    return this.request("PUT", `/v1/users/${encodeURIComponent(this.user)}/manual`, { status, ttl_ms: Math.max(0, Math.round(ttl)) || undefined });
  }

  // _reassert sets the manual status again, with what is left of its
  // expiry, once the server may have lost it (design §11: the caller that
  // set it re-asserts it). Setting a status the server still has changes
  // nothing and publishes nothing.
  async _reassert() {
    const m = this.manual;
    if (!m || !this.running) return;
    try {
      await this._putManual(m.status, m.until ? m.until - Date.now() : 0);
      this._emit("reasserted", m);
    } catch (e) {
      this._emit("error", e);
    }
  }

  /** follow streams the statuses of users: onStatus(user, status, event) for each user's status first, then on each change. */
  follow(users, onStatus) {
    return new Follow(this, users, onStatus);
  }

  /** watch touches a scope while the page shows it and reads its count: onCount(n) after the first touch, then every o.every ms (default 30 s). */
  watch(cls, id, onCount, o = {}) {
    const p = this, path = `/v1/scopes/${encodeURIComponent(cls)}/${encodeURIComponent(id)}/`;
    let timer, counter, done = false;
    const w = {
      count: async () => (await p.request("GET", path + "count")).count,
      stop(keep) {
        if (done) return;
        done = true;
        clearTimeout(timer);
        clearTimeout(counter);
        p._watches.delete(w);
        if (!keep) return p.request("POST", path + "leave", { member: p.user }).catch(() => {});
      },
    };
    // The count is read on its own rhythm, not the touches': a video's
    // window is minutes long, and a counter read only after each touch
    // would lag that much behind the viewers coming and going.
    const count = async () => {
      try {
        if (!done) onCount(await w.count());
      } catch (e) {
        p._emit("error", e);
      }
      if (!done) counter = setTimeout(count, o.every || 30000);
    };
    const tick = async (first) => {
      let next;
      try {
        await p.info();
        next = (p._classes?.[cls] || 2 * (p._iv || 30000)) / 2;
        await p.request("POST", path + "touch", { member: p.user });
      } catch (e) {
        p._emit("error", e);
      }
      if (first && onCount) count(); // the new viewer sees herself counted
      if (!done) timer = setTimeout(tick, next || 5000);
    };
    p._watches.add(w);
    tick(true);
    return w;
  }
}

/** Follow is a stream of followed users' statuses; see Presence.follow. */
export class Follow {
  constructor(p, users, fn) {
    Object.assign(this, { p, fn, users: new Set(users), statuses: new Map(), lastId: "", ready: false });
    this._fails = 0;
    this._want = new Set(this.users);
    p._follows.add(this);
    this._connect();
  }

  _connect() {
    if (!this._loop && this.users.size && !this.closed) this._loop = this._run().finally(() => (this._loop = null));
  }

  /** set replaces the followed users; calls within one task make one reconnection, and only when users were added. */
  set(users) {
    this._want = new Set(users);
    clearTimeout(this._t);
    this._t = setTimeout(() => this._apply());
  }

  add(...users) { this.set([...this._want, ...users]); }

  remove(...users) { this.set([...this._want].filter((u) => !users.includes(u))); }

  async _apply() {
    const added = [...this._want].filter((u) => !this.users.has(u));
    for (const u of this.users) if (!this._want.has(u)) { this.users.delete(u); this.statuses.delete(u); }
    if (!added.length || this.closed) return;
    this._switch = !!this._loop;
    for (const u of added) this.users.add(u);
    if (this.lastId) {
      // Resuming after lastId sends the new users' changes but not their
      // statuses: read them once.
      try {
        const { statuses } = await this.p.request("POST", "/v1/statuses", { users: added });
        for (const s of statuses) this._status(s.user, s.status, s);
      } catch (e) { this.p._emit("error", e); }
    }
    this._ctl?.abort();
    this._connect();
  }

  // _healed takes a "loss" event: Redis lost its data, and no change comes
  // until d.until, while the state comes back as it was; the statuses are
  // read again then, which shows what really changed meanwhile.
  _healed(d) {
    this.p._emit("loss", d);
    clearTimeout(this._heal);
    this._heal = setTimeout(async () => {
      if (this.closed || !this.users.size) return;
      try {
        const { statuses } = await this.p.request("POST", "/v1/statuses", { users: [...this.users] });
        for (const s of statuses) this._status(s.user, s.status, s);
      } catch (e) { this.p._emit("error", e); }
    }, Math.max(0, d.until - Date.now()));
  }

  _status(user, status, ev) {
    if (!this.users.has(user) || this.statuses.get(user) === status) return;
    this.statuses.set(user, status);
    this.fn?.(user, status, ev);
  }

  _event(kind, id, data) {
    if (id && this.lastId && !idLess(this.lastId, id)) return; // seen
    const d = JSON.parse(data || "{}");
    if (kind === "status") this._status(d.user, d.status, d);
    else if (kind === "change") this._status(d.user, d.to, d);
    else if (kind === "reset") this.statuses.clear();
    else if (kind === "loss") this._healed(d);
    else if (kind === "kick" && d.user === this.p.user && d.device === this.p.device) this.p._end("kicked", d);
    else if (kind === "ready") { this.ready = true; this._fails = 0; this.p._emit("ready", this); }
    if (id) this.lastId = id;
  }

  async _run() {
    while (!this.closed && this.users.size) {
      const ctl = (this._ctl = new AbortController());
      let retryAfter = 0, dog;
      const bark = () => { clearTimeout(dog); dog = setTimeout(() => ctl.abort(), this.p.o.streamTimeout); };
      try {
        const q = new URLSearchParams([...this.users].map((u) => ["user", u]));
        const res = await this.p.request("GET", "/v1/events?" + q, undefined,
          { raw: true, signal: ctl.signal, headers: this.lastId ? { "Last-Event-ID": this.lastId } : {} });
        this.p.stats.streams++;
        bark();
        const rd = res.body.pipeThrough(new TextDecoderStream()).getReader();
        let buf = "", ev = {};
        for (;;) {
          const { value, done } = await rd.read();
          if (done) break;
          bark();
          buf += value;
          let i;
          while ((i = buf.indexOf("\n")) >= 0) {
            const line = buf.slice(0, i).replace(/\r$/, "");
            buf = buf.slice(i + 1);
            if (!line) {
              if (ev.data !== undefined) this._event(ev.event || "message", ev.id, ev.data);
              ev = {};
            } else if (line[0] !== ":") {
              const c = line.indexOf(":"), k = c < 0 ? line : line.slice(0, c), v = c < 0 ? "" : line.slice(c + 1).replace(/^ /, "");
              if (k === "data") ev.data = ev.data === undefined ? v : ev.data + "\n" + v;
              else if (k === "event" || k === "id") ev[k] = v;
            }
          }
        }
      } catch (e) {
        if (e.name !== "AbortError") this.p._emit("error", e);
        if (e.status && !transient(e)) {
          this.closed = true;
          this.error = e;
          this.p._emit("refused", e, this);
          break;
        }
        retryAfter = e.retryAfter || 0;
      } finally {
        clearTimeout(dog);
      }
      if (this.closed) break;
      this.ready = false;
      // A set change aborts to reconnect at once; anything else backs off.
      if (this._switch) { this._switch = false; continue; }
      await wait(this.p._backoff(++this._fails, retryAfter));
    }
  }

  /** close ends the stream. */
  close() {
    this.closed = true;
    this._ctl?.abort();
    this.p._follows.delete(this);
  }
}

// TypeScript declarations of presence.js.

/** A status as the service spells it. */
export type Status = "ONLINE" | "AWAY" | "DND" | "PUSH_ONLINE" | "OFFLINE";
/** A manual status: DND, INVISIBLE, or NONE to clear. */
export type Manual = "DND" | "INVISIBLE" | "NONE";
/** A device kind. */
export type Kind = "web" | "desktop" | "ios" | "android" | "other";

export interface PresenceOptions {
  /** The user this browser is signed in as (the token's subject). */
  user: string;
  /** The service's base URL; default "" (this page's origin). */
  url?: string;
  /**
   * A JWT, or a function returning one. The function is called with
   * expired=true after a 401: the token-refresh hook.
   */
  token?: string | ((expired: boolean) => string | Promise<string>);
  /** The device ID; default one random ID per browser, kept in localStorage. */
  device?: string;
  /** The device kind; default "web". */
  kind?: Kind;
  /** A login policy to log in with before the first beat; default none (the first heartbeat logs in). */
  policy?: "multi" | "exclusive" | "exclusive-per-kind";
  /** Beat as a background device: "hidden" (default: when every tab is hidden), true or false. */
  background?: "hidden" | boolean;
  /** The heartbeat interval in ms; default the server's for the kind (GET /v1/info). */
  interval?: number;
  /** The DOM events that mark the user active; default pointerdown, keydown, wheel, touchstart. */
  activity?: string[];
  /** Retry waits in ms: the first (default min(1 s, interval/2)) and the cap (default max(30 s, interval)). */
  backoff?: { base?: number; max?: number };
  /** An event stream with no byte for this long (ms) is reopened; default 45000. */
  streamTimeout?: number;
  /** The device's metadata, sent with each beat. */
  meta?: Record<string, string>;
}

/** An error of the API. */
export class PresenceError extends Error {
  /** The HTTP status; 0 for a network failure. */
  status: number;
  /** The stable code ("session_replaced", "rate_limited", …; "network"). */
  code: string;
  /** The server's Retry-After, in seconds; 0 if none. */
  retryAfter: number;
}

/** A status change or snapshot as the service sends it. */
export interface StatusEvent {
  user: string;
  status?: Status;
  from?: Status;
  to?: Status;
  at: number;
  [k: string]: unknown;
}

export interface PresenceEvents {
  /** This tab started or stopped beating for the browser. */
  leader: (leading: boolean) => void;
  /** The session was replaced (a login elsewhere, a kick): it ended in every tab. */
  kicked: (detail: unknown) => void;
  /** The session was logged out, in this tab or another. */
  logout: () => void;
  /** A heartbeat was answered. */
  beat: (ack: { token: string; changes: unknown[] }) => void;
  /** A login happened (the policy option, or the server's exclusive policy). */
  login: (answer: { token: string; kicked: unknown[]; changes: unknown[] }) => void;
  /** A follow stream caught up. */
  ready: (follow: Follow) => void;
  /** A follow stream was refused (403: the token may not read one of its users; 400: a bad user ID); it is closed, with the error as follow.error. */
  refused: (err: PresenceError, follow: Follow) => void;
  /** The manual status was set again after the server may have lost it (a new session, a stream reset). */
  reasserted: (manual: { status: Manual; until: number }) => void;
  /** A request failed with 401 even after the token hook. */
  unauthenticated: (err: PresenceError) => void;
  /** A request failed (it is retried where that makes sense). */
  error: (err: PresenceError) => void;
}

/** The client of one user in this browser. */
export class Presence {
  constructor(options: PresenceOptions);
  readonly user: string;
  readonly device: string;
  /** Whether this tab beats for the browser. */
  readonly leader: boolean;
  readonly running: boolean;
  /** This tab's counts: beats sent, failed requests of the beat loop, streams opened. */
  readonly stats: { beats: number; failures: number; streams: number };
  on<K extends keyof PresenceEvents>(name: K, fn: PresenceEvents[K]): () => void;
  /** The server's timings, from GET /v1/info. */
  info(): Promise<Record<string, any>>;
  /** Calls the API with the token; throws PresenceError. */
  request(method: string, path: string, body?: unknown, init?: RequestInit): Promise<any>;
  /** Starts the session: elects the beating tab, listens to activity. Rejects (and may be called again) when GET /v1/info fails. */
  start(): Promise<void>;
  /** Marks the next beat active. */
  active(): void;
  /** Logs out on the server and in every tab. */
  logout(): Promise<void>;
  /** Stops this tab's client; another tab takes over the beats. */
  stop(): void;
  /** Follows users' statuses over the event stream. */
  follow(users: Iterable<string>, onStatus?: (user: string, status: Status, event: StatusEvent) => void): Follow;
  /**
   * The manual status this browser set and has not cleared (kept in
   * localStorage, shared by its tabs): until is its expiry in ms since the
   * epoch, 0 for none. null when none is set or it expired.
   */
  readonly manual: { status: Exclude<Manual, "NONE">; until: number } | null;
  /**
   * Sets the user's manual status for ttl ms (0, the default: until
   * cleared); "NONE" clears it. Rejects with PresenceError. The client sets
   * it again, with what is left of ttl, when the server may have lost it: a
   * beat that had to start a new session or published this user ONLINE,
   * AWAY or PUSH_ONLINE, or a follow stream's reset.
   */
  setManual(status: Manual, ttl?: number): Promise<void>;
  /** Clears the manual status: setManual("NONE"). */
  clearManual(): Promise<void>;
  /**
   * Touches a scope while the page shows it; onCount gets its count after
   * the first touch (the viewer counted), then every options.every ms
   * (default 30000), apart from the touches.
   */
  watch(cls: string, id: string, onCount?: (count: number) => void, options?: { every?: number }): Watch;
}

/** A stream of followed users' statuses. */
export class Follow {
  /** The users followed. */
  readonly users: Set<string>;
  /** Their last known statuses. */
  readonly statuses: Map<string, Status>;
  /** The last change log ID received (sent as Last-Event-ID on reconnect). */
  readonly lastId: string;
  /** Whether the stream has caught up. */
  readonly ready: boolean;
  /** Why the server refused the stream (then closed), if it did. */
  readonly error?: PresenceError;
  /** Replaces the followed set (one reconnection per task, only when users are added). */
  set(users: Iterable<string>): void;
  add(...users: string[]): void;
  remove(...users: string[]): void;
  close(): void;
}

/** A scope watched by this page. */
export interface Watch {
  /** Reads the scope's count. */
  count(): Promise<number>;
  /** Stops touching and leaves the scope. */
  stop(): Promise<void> | void;
}

/** Orders the change log's event IDs. */
export function idLess(a: string, b: string): boolean;

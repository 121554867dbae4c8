// shared.mjs: what every runtime's run of the benchmark shares with
// main.go: the engine's configuration, the beats, and the replay of
// Redis's replies. Standard JavaScript only.

// T0 is the benchmark's first instant (ms).
export const T0 = 1767225600000;

// config is the configure request's args; main.go records the replies
// with the same settings.
export const config = { prefix: "bench", user_buckets: 1 };

// beat is the heartbeat of user i.
export const beat = (i) => ({ user: `user-${i}`, device: "web", kind: "web", token: "0123456789abcdef" });

// replayOf returns a pipeline that answers each command from replies,
// keyed "script/arguments" (its SHA-1, or source, and the number of its
// keys and arguments), as main.go recorded them. A command it has no reply
// for is a broken benchmark: it throws.
export function replayOf(replies) {
  return async (commands) =>
    commands.map((c) => {
      const r = replies[`${c[1]}/${c.length - 3}`];
      if (r === undefined) throw new Error(`bench: no recorded reply for ${c[0]} ${c[1]} with ${c.length - 3} keys and arguments`);
      return r;
    });
}

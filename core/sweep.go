package core

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"
)

// sweepStepMicros is the server time after which a user sweep step stops
// early (sweep_users.lua reads the server's clock every few users): a
// quarter of the 2 ms a single call may hold Redis, so that a slow or busy
// host still stays under it.
const sweepStepMicros = 500

// SweepUsers runs one sweep pass over every user bucket (design section 10):
// each bucket takes one cheap call when nothing is due; otherwise bounded
// steps settle due users (expired devices deleted after a re-check inside
// the script, pending changes published, idle devices turned AWAY) until
// none is due. A bucket whose lock another sweeper holds is skipped;
// correctness never depends on the lock.
func (e *Engine) SweepUsers(ctx context.Context) (SweepReport, error) {
	n := int(e.settings.keys.userBuckets)
	return e.sweep(ctx, "users", n, func(b uint32, token string) scriptCall {
		args := append(e.userArgs(b, 4), token, itoa(e.settings.lease), strconv.Itoa(e.settings.batch), itoa(sweepStepMicros))
		return scriptCall{e.scripts.sweepUsers, e.settings.users[b].sweep, args}
	}, func(v Value, r *SweepReport) (bool, string, error) {
		now, rest, err := splitReply(v, 4)
		if err != nil {
			return false, "", err
		}
		visited, err1 := rest[0].AsCount()
		more, err2 := rest[1].AsInt()
		lock, err3 := rest[2].AsString()
		if err1 != nil || err2 != nil || err3 != nil {
			return false, "", replyErr("sweep: %s", v)
		}
		changes, err := decodeChanges(rest[3], now)
		if err != nil {
			return false, "", err
		}
		r.Visited += int(visited)
		r.Changes = append(r.Changes, changes...)
		r.observe(now)
		return more == 1, lock, nil
	})
}

// SweepScopes runs one sweep pass over every scope bucket: due scopes lose
// their expired members (deleted after a re-check inside the script), get
// their count keys rewritten, and are released once empty for
// Config.ReleaseAfter sweeps in a row.
func (e *Engine) SweepScopes(ctx context.Context) (SweepReport, error) {
	n := int(e.settings.keys.scopeBuckets)
	classes := make([]string, 0, 1+7*len(e.settings.classNames))
	classes = append(classes, strconv.Itoa(len(e.settings.classNames)))
	for _, name := range e.settings.classNames {
		c := e.settings.classes[name]
		classes = append(classes, name, strconv.Itoa(int(c.layout)), itoa(c.window), strconv.Itoa(c.shards),
			itoa(c.interval), itoa(c.bucket), flag(c.spread))
	}
	r, err := e.sweep(ctx, "scopes", n, func(b uint32, token string) scriptCall {
		args := append(make([]string, 0, 12+len(classes)), e.nowArg(), token, itoa(e.settings.lease),
			strconv.Itoa(e.settings.batch), strconv.Itoa(e.settings.budget), strconv.Itoa(e.settings.release), itoa(e.settings.countTTL),
			e.settings.keys.scopeBase(b), sufExact, sufShard, sufHLL, sufCount)
		return scriptCall{e.scripts.sweepScopes, e.scopeBucketKeys(b), append(args, classes...)}
	}, func(v Value, r *SweepReport) (bool, string, error) {
		now, rest, err := splitReply(v, 6)
		if err != nil {
			return false, "", err
		}
		var n [4]int64
		for i := range n {
			if n[i], err = rest[i].AsCount(); err != nil {
				return false, "", err
			}
		}
		lock, err := rest[4].AsString()
		if err != nil {
			return false, "", err
		}
		r.Visited += int(n[0])
		r.Removed += int(n[1])
		r.Released += int(n[2])
		r.observe(now)
		if err := e.sweepSpread(ctx, rest[5], r); err != nil {
			return false, "", err
		}
		return n[3] == 1, lock, nil
	})
	if err != nil || r.Visited+r.Released == 0 || e.cache == nil {
		return r, err
	}
	return r, e.fenceCache(ctx, n)
}

// fenceCache waits until the client-side cache holds none of the count
// keys that a sweep of the n scope buckets replaced.
func (e *Engine) fenceCache(ctx context.Context, n int) error {
	keys := make([]string, n)
	for b := range keys {
		keys[b] = e.scopeBucketKeys(uint32(b))[0]
	}
	if err := e.cache.FenceCache(ctx, keys); err != nil {
		return &StoreError{Op: "sweep scopes", Unavailable: errors.Is(err, ErrUnavailable), Err: err}
	}
	return nil
}

// sweepSpread sweeps the spread compact scopes a bucket step handed over
// (ref, empty sweeps, …): its shards in bounded steps (sweepShards), then
// scope_finish.lua in the bucket's slot with the sum of the shard sizes,
// then, for a released scope, the shards that are still empty.
func (e *Engine) sweepSpread(ctx context.Context, v Value, r *SweepReport) error {
	items, err := v.AsArray(-1)
	if err != nil || len(items)%2 != 0 {
		return replyErr("spread scopes: %s", v)
	}
	for i := 0; i < len(items); i += 2 {
		ref, err1 := items[i].AsString()
		empties, err2 := items[i+1].AsCount()
		class, id, ok := strings.Cut(ref, ":")
		if err1 != nil || err2 != nil || !ok {
			return replyErr("spread scope %s", v)
		}
		k, err := e.scopeKeys("scope", Scope{Class: class, ID: id})
		if err != nil || !k.cls.spread {
			return replyErr("spread scope %q is not a spread class", ref)
		}
		remaining, steps, err := e.sweepShards(ctx, k, r)
		if err != nil {
			return err
		}
		bk := e.scopeBucketKeys(k.bucket)
		vals, err := e.eval(ctx, "sweep scopes", []scriptCall{{e.scripts.scopeFinish, []string{bk[0], bk[1], k.count},
			[]string{e.nowArg(), ref, itoa(remaining), itoa(empties), strconv.Itoa(e.settings.release), itoa(e.settings.countTTL), itoa(k.cls.interval)}}})
		if err != nil {
			return err
		}
		if released, err := vals[0].AsInt(); err != nil || released == 0 {
			r.Steps += steps + 1
			continue
		}
		r.Released++
		calls := make([]scriptCall, k.cls.shards)
		for n := range calls {
			calls[n] = scriptCall{e.scripts.shardDrop, []string{k.shardKeyN(n)}, nil}
		}
		if _, err := e.eval(ctx, "sweep scopes", calls); err != nil {
			return err
		}
		r.Steps += steps + len(calls) + 1
	}
	return nil
}

// shardScan is the most entries one HSCAN step of a compact shard sweep
// asks for (COUNT), as scopelib.lua's SHARD_SCAN: a large (hashtable) shard
// is walked in steps of about this many, a listpack shard in one step.
const shardScan = 256

// sweepShards sweeps every shard of a spread compact scope in bounded
// steps (shard_sweep.lua, one HSCAN step each): all shards in one pipelined
// round (one per node on a cluster), then further rounds for the shards not
// yet walked to their end. It returns the sum of the shard sizes (taken as
// each walk ended when one round walked them all, else counted again once
// all are walked) and the number of steps.
func (e *Engine) sweepShards(ctx context.Context, k scopeKeys, r *SweepReport) (remaining int64, steps int, err error) {
	count, win := strconv.Itoa(min(e.settings.budget, shardScan)), itoa(k.cls.window)
	pending := make([]int, k.cls.shards)
	cursors := make([]string, k.cls.shards)
	for n := range pending {
		pending[n], cursors[n] = n, "0"
	}
	rounds := 0
	for len(pending) > 0 {
		calls := make([]scriptCall, len(pending))
		for i, n := range pending {
			calls[i] = scriptCall{e.scripts.shardSweep, []string{k.shardKeyN(n)}, []string{e.nowArg(), win, cursors[n], count}}
		}
		vals, err := e.eval(ctx, "sweep scopes", calls)
		if err != nil {
			return 0, steps, err
		}
		steps += len(calls)
		next := pending[:0]
		for i, v := range vals {
			now, rest, err := splitReply(v, 3)
			if err != nil {
				return 0, steps, err
			}
			removed, err1 := rest[0].AsCount()
			left, err2 := rest[1].AsCount()
			cursor, err3 := rest[2].AsString()
			if err1 != nil || err2 != nil || err3 != nil {
				return 0, steps, replyErr("shard sweep: %s", v)
			}
			r.Removed += int(removed)
			r.observe(now)
			if cursor == "0" {
				remaining += left
				continue
			}
			cursors[pending[i]] = cursor
			next = append(next, pending[i])
		}
		pending = next
		rounds++
	}
	if rounds > 1 {
		// a walk took several rounds: a member touched meanwhile into a
		// shard walked earlier is in no shard's remainder, so count again
		remaining, err = e.shardSizes(ctx, "sweep scopes", k)
		steps += k.cls.shards
	}
	return remaining, steps, err
}

// sweep drives the steps of a pass: one pipelined round over all buckets,
// then further rounds for the buckets that have more to do. On failure it
// releases the locks it may hold.
func (e *Engine) sweep(ctx context.Context, kind string, buckets int,
	step func(b uint32, token string) scriptCall,
	read func(v Value, r *SweepReport) (more bool, lock string, err error)) (SweepReport, error) {
	token, err := e.newToken()
	if err != nil {
		return SweepReport{}, err
	}
	r := SweepReport{Buckets: buckets}
	pending := make([]uint32, buckets)
	for i := range pending {
		pending[i] = uint32(i)
	}
	for len(pending) > 0 {
		calls := make([]scriptCall, len(pending))
		for i, b := range pending {
			calls[i] = step(b, token)
		}
		vals, err := e.eval(ctx, "sweep "+kind, calls)
		if err != nil {
			e.unlock(ctx, calls, token)
			return r, err
		}
		r.Steps += len(calls)
		next := pending[:0]
		for i, v := range vals {
			more, lock, err := read(v, &r)
			if err != nil {
				e.unlock(ctx, calls, token)
				return r, err
			}
			switch {
			case lock == "held":
				r.Held++
			case more:
				next = append(next, pending[i])
			}
		}
		pending = next
		if err := ctx.Err(); err != nil && len(pending) > 0 {
			e.unlock(context.WithoutCancel(ctx), calls, token)
			return r, err
		}
	}
	e.metrics.Swept(kind, r)
	e.publish(ctx, r.Changes, nil)
	return r, nil
}

// unlock releases this pass's locks (the last key of each step call).
func (e *Engine) unlock(ctx context.Context, steps []scriptCall, token string) {
	calls := make([]scriptCall, len(steps))
	for i, s := range steps {
		calls[i] = scriptCall{e.scripts.unlock, s.keys[len(s.keys)-1:], []string{token}}
	}
	_, _ = e.eval(ctx, "unlock", calls)
}

// observe widens the report's server-time span to include now.
func (r *SweepReport) observe(now int64) {
	t := time.UnixMilli(now)
	if r.first.IsZero() || t.Before(r.first) {
		r.first = t
	}
	if t.After(r.last) {
		r.last = t
	}
	r.Duration = r.last.Sub(r.first)
}

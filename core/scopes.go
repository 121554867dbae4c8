package core

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"
)

// scopeKeys are the keys and arguments that locate one scope's data.
type scopeKeys struct {
	cls    classSettings
	bucket uint32
	data   string // exact: the sorted set; compact, approx: up to the shard or bucket start
	tail   string // compact, approx: what follows the shard or bucket start
	count  string
}

func (e *Engine) scopeKeys(field string, sc Scope) (scopeKeys, error) {
	cls, err := e.s.checkScope(field, sc)
	if err != nil {
		return scopeKeys{}, err
	}
	l := e.s.keys
	b := l.scopeBucket(sc)
	base := l.scopeBase(b)
	k := scopeKeys{cls: cls, bucket: b, count: base + sufCount + sc.ref()}
	switch cls.layout {
	case LayoutExact:
		k.data = base + sufExact + sc.ref()
	case LayoutCompact:
		k.data, k.tail = base+sufShard+sc.Class+":", ":"+sc.ID
	case LayoutApprox:
		k.data, k.tail = base+sufHLL+sc.Class+":", ":"+sc.ID
	}
	return k, nil
}

// shardKey is the compact shard holding member: stable hash mod shards.
func (k scopeKeys) shardKey(member string) string {
	return k.data + strconv.FormatUint(fnv64(member)%uint64(k.cls.shards), 10) + k.tail
}

// Touch records member's activity in the scope now (design section 9).
func (e *Engine) Touch(ctx context.Context, sc Scope, member string) error {
	return e.TouchBatch(ctx, []ScopeTouch{{Scope: sc, Member: member}})
}

// TouchBatch records up to MaxBatch touches in one round trip (one script
// call per scope bucket). Nothing is sent if any touch is invalid.
func (e *Engine) TouchBatch(ctx context.Context, touches []ScopeTouch) error {
	if err := checkBatch("touches", len(touches)); err != nil {
		return err
	}
	groups := map[uint32][]string{}
	var order []uint32
	for i, t := range touches {
		field := "touches[" + strconv.Itoa(i) + "]"
		k, err := e.scopeKeys(field+".Scope", t.Scope)
		if err != nil {
			return err
		}
		if err := checkID(field+".Member", t.Member); err != nil {
			return err
		}
		data := k.data
		if k.cls.layout == LayoutCompact {
			data = k.shardKey(t.Member)
		}
		if _, ok := groups[k.bucket]; !ok {
			order = append(order, k.bucket)
		}
		groups[k.bucket] = append(groups[k.bucket], strconv.Itoa(int(k.cls.layout)), data, k.tail,
			t.Scope.ref(), t.Member, itoa(k.cls.window), itoa(k.cls.interval), itoa(k.cls.bucket))
	}
	calls := make([]scriptCall, len(order))
	for g, b := range order {
		items := groups[b]
		args := append(make([]string, 0, 3+len(items)), e.nowArg(), itoa(e.s.grace), strconv.Itoa(len(items)/8))
		calls[g] = scriptCall{e.scripts.touch, e.scopeBucketKeys(b)[:2], append(args, items...)}
	}
	_, err := e.eval(ctx, "touch", calls)
	return err
}

// scopeBucketKeys are the registry, release counters and lock of bucket b.
func (e *Engine) scopeBucketKeys(b uint32) []string {
	base := e.s.keys.scopeBase(b)
	return []string{base + sufRegistry, base + sufRelease, base + sufLock}
}

// Leave removes member from the scope at once. It reports whether the
// member was there. Approx scopes cannot forget a member: ErrUnsupported.
func (e *Engine) Leave(ctx context.Context, sc Scope, member string) (bool, error) {
	k, err := e.scopeKeys("scope", sc)
	if err != nil {
		return false, err
	}
	if err := checkID("member", member); err != nil {
		return false, err
	}
	data := k.data
	switch k.cls.layout {
	case LayoutApprox:
		return false, ErrUnsupported
	case LayoutCompact:
		data = k.shardKey(member)
	}
	vals, err := e.eval(ctx, "leave", []scriptCall{{e.scripts.leave, []string{data}, []string{strconv.Itoa(int(k.cls.layout)), member}}})
	if err != nil {
		return false, err
	}
	n, err := vals[0].AsInt()
	return n == 1, err
}

// Count returns the scope's member count: live for exact and approx scopes;
// for compact scopes, the count the last sweep wrote, read through the
// store's client-side cache when it has one. When Redis cannot be reached
// it returns the last good count marked Stale, or the error if it has none.
func (e *Engine) Count(ctx context.Context, sc Scope) (Count, error) {
	k, err := e.scopeKeys("scope", sc)
	if err != nil {
		return Count{}, err
	}
	c, err := e.count(ctx, k)
	if err != nil {
		if errors.Is(err, ErrUnavailable) {
			if last, ok := e.lastGoodCount(sc); ok {
				last.Stale = true
				return last, nil
			}
		}
		return Count{}, err
	}
	e.rememberCount(sc, c)
	return c, nil
}

func (e *Engine) count(ctx context.Context, k scopeKeys) (Count, error) {
	if k.cls.layout == LayoutCompact && e.cache != nil {
		v, err := e.cache.CachedGet(ctx, k.count)
		if err != nil {
			return Count{}, &StoreError{Op: "count", Unavailable: errors.Is(err, ErrUnavailable), Err: err}
		}
		if v.Kind != ValueNil {
			s, err := v.AsString()
			if err != nil {
				return Count{}, err
			}
			return parseCount(s)
		}
	}
	args := []string{e.nowArg(), strconv.Itoa(int(k.cls.layout)), k.data, k.tail, itoa(k.cls.window),
		strconv.Itoa(k.cls.shards), itoa(k.cls.bucket), itoa(e.s.countTTL)}
	vals, err := e.eval(ctx, "count", []scriptCall{{e.scripts.count, []string{k.count}, args}})
	if err != nil {
		return Count{}, err
	}
	_, rest, err := splitReply(vals[0], 2)
	if err != nil {
		return Count{}, err
	}
	n, err1 := rest[0].AsInt()
	asOf, err2 := rest[1].AsInt()
	if err1 != nil || err2 != nil {
		return Count{}, replyErr("count: %s", vals[0])
	}
	return Count{N: n, AsOf: msTime(asOf)}, nil
}

// parseCount reads a count key's "count:asOf".
func parseCount(s string) (Count, error) {
	n, asOf, ok := strings.Cut(s, ":")
	c, err1 := strconv.ParseInt(n, 10, 64)
	t, err2 := strconv.ParseInt(asOf, 10, 64)
	if !ok || err1 != nil || err2 != nil || c < 0 {
		return Count{}, replyErr("count key %q", s)
	}
	return Count{N: c, AsOf: msTime(t)}, nil
}

func (e *Engine) rememberCount(sc Scope, c Count) {
	if e.lastGood == nil {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if _, ok := e.lastGood[sc]; !ok && len(e.lastGood) >= e.s.lastGood {
		for k := range e.lastGood { // evict an arbitrary entry to stay bounded
			delete(e.lastGood, k)
			break
		}
	}
	e.lastGood[sc] = c
}

func (e *Engine) lastGoodCount(sc Scope) (Count, bool) {
	if e.lastGood == nil {
		return Count{}, false
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	c, ok := e.lastGood[sc]
	return c, ok
}

// Members returns one page of the scope's live members: by recency for
// exact scopes, shard by shard for compact ones. cursor is "" for the first
// page, then the page's Next. Approx scopes cannot list: ErrUnsupported.
func (e *Engine) Members(ctx context.Context, sc Scope, cursor string, limit int) (MemberPage, error) {
	k, err := e.scopeKeys("scope", sc)
	if err != nil {
		return MemberPage{}, err
	}
	if limit < 1 || limit > MaxPage {
		return MemberPage{}, invalid("limit", "must be 1 to %d, got %d", MaxPage, limit)
	}
	shard, offset, err := parseCursor(cursor)
	if err != nil {
		return MemberPage{}, err
	}
	if k.cls.layout == LayoutApprox {
		return MemberPage{}, ErrUnsupported
	}
	args := []string{e.nowArg(), strconv.Itoa(int(k.cls.layout)), k.data, k.tail, itoa(k.cls.window),
		strconv.Itoa(k.cls.shards), strconv.Itoa(shard), strconv.Itoa(offset), strconv.Itoa(limit)}
	vals, err := e.eval(ctx, "members", []scriptCall{{e.scripts.members, []string{k.count}, args}})
	if err != nil {
		return MemberPage{}, err
	}
	_, rest, err := splitReply(vals[0], 3)
	if err != nil {
		return MemberPage{}, err
	}
	nextShard, err1 := rest[0].AsInt()
	nextOffset, err2 := rest[1].AsInt()
	flat, err3 := rest[2].AsArray(-1)
	if err1 != nil || err2 != nil || err3 != nil || len(flat)%2 != 0 {
		return MemberPage{}, replyErr("members: %s", vals[0])
	}
	page := MemberPage{Members: make([]Member, 0, len(flat)/2)}
	for i := 0; i < len(flat); i += 2 {
		id, err1 := flat[i].AsString()
		seen, err2 := flat[i+1].AsInt()
		if err1 != nil || err2 != nil {
			return MemberPage{}, replyErr("members: %s", vals[0])
		}
		page.Members = append(page.Members, Member{ID: id, LastSeen: msTime(seen)})
	}
	if nextShard >= 0 {
		page.Next = formatCursor(int(nextShard), int(nextOffset))
	}
	return page, nil
}

func formatCursor(shard, offset int) string {
	return strconv.Itoa(shard) + "." + strconv.Itoa(offset)
}

func parseCursor(c string) (shard, offset int, err error) {
	if c == "" {
		return 0, 0, nil
	}
	a, b, ok := strings.Cut(c, ".")
	shard, err1 := strconv.Atoi(a)
	offset, err2 := strconv.Atoi(b)
	if !ok || err1 != nil || err2 != nil || shard < 0 || offset < 0 || shard > 65536 || offset > 1<<30 {
		return 0, 0, invalid("cursor", "%q is not a cursor this engine returned", c)
	}
	return shard, offset, nil
}

// ActiveWithin counts the scope's members touched within the last d, which
// must be positive and at most the class's window. Approx scopes count whole
// buckets, so they may include members up to one bucket older.
func (e *Engine) ActiveWithin(ctx context.Context, sc Scope, d time.Duration) (int64, error) {
	k, err := e.scopeKeys("scope", sc)
	if err != nil {
		return 0, err
	}
	if d < time.Millisecond || ms(d) > k.cls.window {
		return 0, invalid("d", "must be 1ms to the class window %v, got %v", time.Duration(k.cls.window)*time.Millisecond, d)
	}
	args := []string{e.nowArg(), strconv.Itoa(int(k.cls.layout)), k.data, k.tail, itoa(ms(d)),
		strconv.Itoa(k.cls.shards), itoa(k.cls.bucket)}
	vals, err := e.eval(ctx, "active", []scriptCall{{e.scripts.active, []string{k.count}, args}})
	if err != nil {
		return 0, err
	}
	_, rest, err := splitReply(vals[0], 1)
	if err != nil {
		return 0, err
	}
	return rest[0].AsInt()
}

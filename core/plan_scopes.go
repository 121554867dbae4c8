package core

import (
	"strconv"
	"time"
)

// The plans of the scope operations (docs/design.md §9). Engine's methods
// of the same names drive them; Count's client-side cache and last good
// count stay with the driver.

// touchPlan is the plan of a Touch or a TouchBatch: one round, one call
// per scope bucket and one per spread shard, each split into calls of at
// most touchChunk touches, sent a few at a time; nothing comes of its
// values.
type touchPlan struct {
	plan plan[struct{}]
}

func (p *planner) touch(now string, sc Scope, member string) *plan[struct{}] {
	if err := p.settings.checkTouch(sc, member); err != nil {
		tp := &touchPlan{plan: plan[struct{}]{m: machine{scripts: &p.scripts, now: now}}}
		tp.plan.m.start(tp, nil, err)
		return &tp.plan
	}
	return p.touchBatch(now, []ScopeTouch{{Scope: sc, Member: member}})
}

func (p *planner) touchBatch(now string, touches []ScopeTouch) *plan[struct{}] {
	tp := &touchPlan{plan: plan[struct{}]{m: machine{scripts: &p.scripts, now: now}}}
	tp.plan.m.body = tp
	tp.plan.m.settle(p.touchRound(now, touches))
	return &tp.plan
}

func (*touchPlan) next([]Value) (*round, error) { return nil, nil }

// touchFields is touch.lua's TOUCH_FIELDS.
const touchFields = 9

func (p *planner) touchRound(now string, touches []ScopeTouch) (*round, error) {
	if err := checkBatch("touches", len(touches)); err != nil {
		return nil, err
	}
	groups := map[uint32][]string{}
	var order []uint32
	// A spread scope's shards live in other slots: their members are
	// written one call per shard, and the scope registered once per batch.
	shardMembers := map[string][]string{}
	var shardOrder []string
	shardTTL := map[string]string{}
	registered := map[Scope]bool{}
	for i, t := range touches {
		k, err := p.scopeKeys(".Scope", t.Scope)
		if err == nil {
			err = checkID(".Member", t.Member)
		}
		if err != nil {
			return nil, within("touches["+strconv.Itoa(i)+"]", err)
		}
		layout, data := strconv.Itoa(int(k.cls.layout)), k.data
		switch {
		case k.cls.spread:
			shard := k.shardKey(t.Member)
			if _, ok := shardMembers[shard]; !ok {
				shardOrder = append(shardOrder, shard)
				shardTTL[shard] = itoa(k.cls.window + p.settings.grace)
			}
			shardMembers[shard] = append(shardMembers[shard], t.Member)
			if registered[t.Scope] {
				continue
			}
			registered[t.Scope] = true
			layout, data = "3", ""
		}
		if _, ok := groups[k.bucket]; !ok {
			order = append(order, k.bucket)
		}
		bucket := itoa(k.cls.bucket)
		if layout == "1" {
			bucket = strconv.FormatUint(uint64(memberHash(t.Member)), 10)
		}
		groups[k.bucket] = append(groups[k.bucket], layout, data, k.tail,
			t.Scope.ref(), t.Member, itoa(k.cls.window), itoa(k.cls.interval), bucket, strconv.Itoa(k.cls.shardSize))
	}
	// calls of at most touchChunk touches, sent a few at a time
	var calls []Call
	var costs []int
	for _, b := range order {
		for _, sp := range spans(len(groups[b])/touchFields, touchChunk) {
			items := groups[b][touchFields*sp[0] : touchFields*sp[1]]
			args := append(make([]string, 0, 4+len(items)), now, itoa(p.settings.grace), itoa(millis(compactLife)),
				strconv.Itoa(len(items)/touchFields))
			calls = append(calls, Call{SHA: p.scripts.touch.sha, Keys: p.scopeBucketKeys(b)[:2], Args: append(args, items...)})
			costs = append(costs, len(items)/touchFields*touchMicros)
		}
	}
	for _, shard := range shardOrder {
		all := shardMembers[shard]
		for _, sp := range spans(len(all), touchChunk) {
			members := all[sp[0]:sp[1]]
			args := append([]string{now, shardTTL[shard]}, members...)
			calls = append(calls, Call{SHA: p.scripts.shardTouch.sha, Keys: []string{shard}, Args: args})
			costs = append(costs, len(members)*touchMicros)
		}
	}
	return &round{op: "touch", calls: calls, costs: costs}, nil
}

// leavePlan is a Leave's plan: lua/leave.lua, which reads no clock.
type leavePlan struct {
	plan plan[bool]
}

func (p *planner) leave(now string, sc Scope, member string) *plan[bool] {
	lp := &leavePlan{plan: plan[bool]{m: machine{scripts: &p.scripts, now: now}}}
	m := &lp.plan.m
	m.body = lp
	k, err := p.scopeKeys("scope", sc)
	if err == nil {
		err = checkID("member", member)
	}
	if err != nil {
		m.fail(err)
		return &lp.plan
	}
	keys := []string{k.data}
	args := []string{strconv.Itoa(int(k.cls.layout)), member, "", "", ""}
	switch k.cls.layout {
	case LayoutApprox:
		m.fail(ErrUnsupported)
		return &lp.plan
	case LayoutCompact:
		if k.cls.spread {
			keys[0] = k.shardKey(member)
		} else {
			// the script finds the member's shard from the scope's meta
			keys[0] = k.compactMetaKey()
			args[2], args[3], args[4] = k.data, k.tail, strconv.FormatUint(uint64(memberHash(member)), 10)
		}
	}
	m.settle(m.one("leave", Call{SHA: p.scripts.leave.sha, Keys: keys, Args: args}), nil)
	return &lp.plan
}

func (lp *leavePlan) next(vals []Value) (*round, error) {
	n, err := vals[0].asInt()
	lp.plan.out = n == 1
	return nil, err
}

// countPlan reads a scope's count as Engine.Count reads it when the count
// is not in the client-side cache: lua/count.lua, then, for a spread scope
// without a count key, a round summing its shards (the count as of the
// script's now). It writes nothing: the count key is the sweep's. The last
// good count is the driver's.
type countPlan struct {
	plan   plan[Count]
	p      *planner
	k      scopeKeys
	peek   bool      // the count script only peeks (a spread scope)
	sizing bool      // the round sent sums the shards
	asOf   time.Time // sizing: the instant of the sum
}

func (p *planner) count(now string, sc Scope) *plan[Count] {
	k, err := p.scopeKeys("scope", sc)
	if err != nil {
		cp := &countPlan{plan: plan[Count]{m: machine{scripts: &p.scripts, now: now}}}
		cp.plan.m.start(cp, nil, err)
		return &cp.plan
	}
	return p.countOf(now, k)
}

// countOf is count for the scope of k.
func (p *planner) countOf(now string, k scopeKeys) *plan[Count] {
	cp := &countPlan{plan: plan[Count]{m: machine{scripts: &p.scripts, now: now}}, p: p, k: k, peek: k.cls.spread}
	mode := ""
	if cp.peek {
		mode = "peek"
	}
	args := []string{now, strconv.Itoa(int(k.cls.layout)), k.data, k.tail, itoa(k.cls.window), itoa(k.cls.bucket), mode}
	cp.plan.m.start(cp, cp.plan.m.one("count", Call{SHA: p.scripts.count.sha, Keys: []string{k.count}, Args: args}), nil)
	return &cp.plan
}

func (cp *countPlan) next(vals []Value) (*round, error) {
	if cp.sizing {
		sum, err := sumSizes(vals)
		if err != nil {
			return nil, err
		}
		cp.plan.out = Count{N: sum, AsOf: cp.asOf}
		return nil, nil
	}
	c, err := decodeCount(vals[0], 1, cp.peek)
	if err != nil {
		return nil, err
	}
	if c.N >= 0 {
		cp.plan.out = c
		return nil, nil
	}
	now, _, err := splitReply(vals[0], 2)
	if err != nil {
		return nil, err
	}
	// one round (one round trip per node on a cluster)
	cp.sizing, cp.asOf = true, msTime(now)
	return cp.p.shardSizes("count", cp.k), nil
}

// shardSizes is the round reading the sizes of a spread scope's shards,
// which sumSizes adds up.
func (p *planner) shardSizes(op string, k scopeKeys) *round {
	calls := make([]Call, k.cls.shards)
	for n := range calls {
		calls[n] = Call{SHA: p.scripts.shardLen.sha, Keys: []string{k.shardKeyN(n)}}
	}
	return &round{op: op, calls: calls, costs: fill(len(calls), shardCallMicros)}
}

// sumSizes adds up the values of a shardSizes round.
func sumSizes(vals []Value) (int64, error) {
	var sum int64
	for _, v := range vals {
		n, err := v.asCount()
		if err != nil {
			return 0, err
		}
		sum += n
	}
	return sum, nil
}

// membersPlan is a ReadMembers' plan: one round, or one per shard of a
// spread scope until the page is full.
type membersPlan struct {
	plan  plan[MemberPage]
	p     *planner
	k     scopeKeys
	limit int
	shard int // the shard the round sent reads from
	page  MemberPage
}

func (p *planner) members(now string, sc Scope, cursor string, limit int) *plan[MemberPage] {
	mp := &membersPlan{plan: plan[MemberPage]{m: machine{scripts: &p.scripts, now: now}}, p: p, limit: limit}
	m := &mp.plan.m
	m.body = mp
	k, err := p.scopeKeys("scope", sc)
	if err != nil {
		m.fail(err)
		return &mp.plan
	}
	shard, offset, err := checkPage(cursor, limit)
	if err != nil {
		m.fail(err)
		return &mp.plan
	}
	if k.cls.layout == LayoutApprox {
		m.fail(ErrUnsupported)
		return &mp.plan
	}
	mp.k, mp.page = k, MemberPage{Members: make([]Member, 0, limit)}
	m.settle(mp.read(shard, offset), nil)
	return &mp.plan
}

// read is the round reading from offset of shard on. One call reads every
// shard of a scope whose shards share a slot; a spread scope is read one
// shard (one slot) per call.
func (mp *membersPlan) read(shard, offset int) *round {
	k, m := mp.k, &mp.plan.m
	data, last, key := k.data, -1, k.count
	if k.cls.spread {
		data, last, key = k.shardPrefix(shard), shard+1, k.shardKeyN(shard)
	}
	mp.shard = shard
	args := []string{m.now, strconv.Itoa(int(k.cls.layout)), data, k.tail, itoa(k.cls.window),
		strconv.Itoa(last), strconv.Itoa(shard), strconv.Itoa(offset), strconv.Itoa(mp.limit - len(mp.page.Members))}
	return m.one("members", Call{SHA: mp.p.scripts.members.sha, Keys: []string{key}, Args: args})
}

func (mp *membersPlan) next(vals []Value) (*round, error) {
	nextShard, nextOffset, err := decodeMembers(vals[0], &mp.page)
	if err != nil {
		return nil, err
	}
	if nextShard >= 0 {
		mp.page.Next = formatCursor(nextShard, nextOffset)
		mp.plan.out = mp.page
		return nil, nil
	}
	if !mp.k.cls.spread || mp.shard+1 >= mp.k.cls.shards {
		mp.plan.out = mp.page
		return nil, nil
	}
	return mp.read(mp.shard+1, 0), nil
}

// activePlan is a ReadActive's plan: one round, a call per shard of a
// spread scope.
type activePlan struct {
	plan plan[int64]
}

func (p *planner) activeWithin(now string, sc Scope, d time.Duration) *plan[int64] {
	ap := &activePlan{plan: plan[int64]{m: machine{scripts: &p.scripts, now: now}}}
	m := &ap.plan.m
	m.body = ap
	k, err := p.scopeKeys("scope", sc)
	if err != nil {
		m.fail(err)
		return &ap.plan
	}
	if d < time.Millisecond || millis(d) > k.cls.window {
		m.fail(invalid("d", "must be 1ms to the class window %v, got %v", time.Duration(k.cls.window)*time.Millisecond, d))
		return &ap.plan
	}
	var calls []Call
	for n := 0; n < k.cls.shards; n++ {
		if !k.cls.spread {
			calls = append(calls, Call{SHA: p.scripts.active.sha, Keys: []string{k.count}, Args: []string{now,
				strconv.Itoa(int(k.cls.layout)), k.data, k.tail, itoa(millis(d)), "-1", itoa(k.cls.bucket), "0"}})
			break
		}
		calls = append(calls, Call{SHA: p.scripts.active.sha, Keys: []string{k.shardKeyN(n)}, Args: []string{now,
			strconv.Itoa(int(k.cls.layout)), k.shardPrefix(n), k.tail, itoa(millis(d)), strconv.Itoa(n + 1), itoa(k.cls.bucket), strconv.Itoa(n)}})
	}
	m.settle(&round{op: "active", calls: calls}, nil)
	return &ap.plan
}

func (ap *activePlan) next(vals []Value) (*round, error) {
	var sum int64
	for _, v := range vals {
		_, rest, err := splitReply(v, 1)
		if err != nil {
			return nil, err
		}
		n, err := rest[0].asCount()
		if err != nil {
			return nil, err
		}
		sum += n
	}
	ap.plan.out = sum
	return nil, nil
}

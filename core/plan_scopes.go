package core

import (
	"strconv"
	"time"
)

// The plans of the scope operations (docs/design.md §9). Engine's methods
// of the same names drive them; Count's client-side cache and last good
// count stay with the driver.

// Touch plans Engine.Touch at now.
func (pl *Planner) touch(now string, sc Scope, member string) *plan[struct{}] {
	if err := pl.p.settings.checkTouch(sc, member); err != nil {
		plan := newPlan[struct{}](pl.p, now)
		plan.m.fail(err)
		return plan
	}
	return pl.touchBatch(now, []ScopeTouch{{Scope: sc, Member: member}})
}

// TouchBatch plans Engine.TouchBatch at now: one round, one call per scope
// bucket and one per spread shard, each split into calls of at most
// touchChunk touches, sent a few at a time.
func (pl *Planner) touchBatch(now string, touches []ScopeTouch) *plan[struct{}] {
	p := pl.p
	plan := newPlan[struct{}](p, now)
	plan.m.settle(p.touchBatch(now, touches))
	return plan
}

// touchFields is touch.lua's TOUCH_FIELDS.
const touchFields = 9

func (p *planner) touchBatch(now string, touches []ScopeTouch) (*round, error) {
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
		field := "touches[" + strconv.Itoa(i) + "]"
		k, err := p.scopeKeys(field+".Scope", t.Scope)
		if err != nil {
			return nil, err
		}
		if err := checkID(field+".Member", t.Member); err != nil {
			return nil, err
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
	return &round{op: "touch", calls: calls, costs: costs, next: func([]Value) (*round, error) { return nil, nil }}, nil
}

// Leave plans Engine.Leave at now (leave.lua reads no clock).
func (pl *Planner) leave(now string, sc Scope, member string) *plan[bool] {
	p := pl.p
	plan := newPlan[bool](p, now)
	m := &plan.m
	k, err := p.scopeKeys("scope", sc)
	if err == nil {
		err = checkID("member", member)
	}
	if err != nil {
		m.fail(err)
		return plan
	}
	keys := []string{k.data}
	args := []string{strconv.Itoa(int(k.cls.layout)), member, "", "", ""}
	switch k.cls.layout {
	case LayoutApprox:
		m.fail(ErrUnsupported)
		return plan
	case LayoutCompact:
		if k.cls.spread {
			keys[0] = k.shardKey(member)
		} else {
			// the script finds the member's shard from the scope's meta
			keys[0] = k.compactMetaKey()
			args[2], args[3], args[4] = k.data, k.tail, strconv.FormatUint(uint64(memberHash(member)), 10)
		}
	}
	m.settle(&round{op: "leave", calls: []Call{{SHA: p.scripts.leave.sha, Keys: keys, Args: args}},
		next: func(vals []Value) (*round, error) {
			n, err := vals[0].asInt()
			plan.out = n == 1
			return nil, err
		}}, nil)
	return plan
}

// Count plans reading the scope's count at now as Engine.Count reads it
// when the count is not in the client-side cache: the count script, then,
// for a spread scope without a count key, a round summing its shards. It
// writes nothing: the count key is the sweep's. The last good count is the
// driver's.
func (pl *Planner) count(now string, sc Scope) *plan[Count] {
	p := pl.p
	plan := newPlan[Count](p, now)
	k, err := p.scopeKeys("scope", sc)
	if err != nil {
		plan.m.fail(err)
		return plan
	}
	plan.m.settle(p.count(&plan.m, k, func(c Count) { plan.out = c }))
	return plan
}

// count is the round of lua/count.lua for k; the count goes to set. A
// spread scope is peeked at first, and without a count key its shards are
// summed in one round.
func (p *planner) count(m *machine, k scopeKeys, set func(Count)) (*round, error) {
	mode := ""
	if k.cls.spread {
		mode = "peek"
	}
	args := []string{m.now, strconv.Itoa(int(k.cls.layout)), k.data, k.tail, itoa(k.cls.window), itoa(k.cls.bucket), mode}
	return &round{op: "count", calls: []Call{{SHA: p.scripts.count.sha, Keys: []string{k.count}, Args: args}},
		next: func(vals []Value) (*round, error) {
			c, err := decodeCount(vals[0], 1, mode == "peek")
			if err != nil {
				return nil, err
			}
			if c.N >= 0 {
				set(c)
				return nil, nil
			}
			now, _, err := splitReply(vals[0], 2)
			if err != nil {
				return nil, err
			}
			return p.countSpread(m, k, msTime(now), set)
		}}, nil
}

// countSpread sums the shards of a spread scope, in one round (one round
// trip per node on a cluster): the count as of now. Like the count script,
// it writes no count key.
func (p *planner) countSpread(m *machine, k scopeKeys, now time.Time, set func(Count)) (*round, error) {
	fail := func(err error) (*round, error) { return nil, err }
	return p.shardSizes("count", k, fail, func(sum int64) (*round, error) {
		set(Count{N: sum, AsOf: now})
		return nil, nil
	})
}

// shardSizes is the round summing the sizes of a spread scope's shards;
// the sum goes to then, a failure to fail.
func (p *planner) shardSizes(op string, k scopeKeys, fail func(error) (*round, error),
	then func(sum int64) (*round, error)) (*round, error) {
	calls := make([]Call, k.cls.shards)
	for n := range calls {
		calls[n] = Call{SHA: p.scripts.shardLen.sha, Keys: []string{k.shardKeyN(n)}}
	}
	return &round{op: op, calls: calls, costs: fill(len(calls), shardCallMicros), onErr: fail, next: func(vals []Value) (*round, error) {
		var sum int64
		for _, v := range vals {
			n, err := v.asCount()
			if err != nil {
				return fail(err)
			}
			sum += n
		}
		return then(sum)
	}}, nil
}

// Members plans Engine.Members at now: one round, or one per shard of a
// spread scope until the page is full.
func (pl *Planner) members(now string, sc Scope, cursor string, limit int) *plan[MemberPage] {
	p := pl.p
	plan := newPlan[MemberPage](p, now)
	m := &plan.m
	k, err := p.scopeKeys("scope", sc)
	if err != nil {
		m.fail(err)
		return plan
	}
	shard, offset, err := checkPage(cursor, limit)
	if err != nil {
		m.fail(err)
		return plan
	}
	if k.cls.layout == LayoutApprox {
		m.fail(ErrUnsupported)
		return plan
	}
	page := MemberPage{Members: make([]Member, 0, limit)}
	var read func(shard, offset int) (*round, error)
	read = func(shard, offset int) (*round, error) {
		// One call reads every shard of a scope whose shards share a slot;
		// a spread scope is read one shard (one slot) per call.
		data, last, key := k.data, -1, k.count
		if k.cls.spread {
			data, last, key = k.shardPrefix(shard), shard+1, k.shardKeyN(shard)
		}
		args := []string{m.now, strconv.Itoa(int(k.cls.layout)), data, k.tail, itoa(k.cls.window),
			strconv.Itoa(last), strconv.Itoa(shard), strconv.Itoa(offset), strconv.Itoa(limit - len(page.Members))}
		return &round{op: "members", calls: []Call{{SHA: p.scripts.members.sha, Keys: []string{key}, Args: args}},
			next: func(vals []Value) (*round, error) {
				nextShard, nextOffset, err := decodeMembers(vals[0], &page)
				if err != nil {
					return nil, err
				}
				if nextShard >= 0 {
					page.Next = formatCursor(nextShard, nextOffset)
					plan.out = page
					return nil, nil
				}
				if !k.cls.spread || shard+1 >= k.cls.shards {
					plan.out = page
					return nil, nil
				}
				return read(shard+1, 0)
			}}, nil
	}
	m.settle(read(shard, offset))
	return plan
}

// ActiveWithin plans Engine.ActiveWithin at now: one round.
func (pl *Planner) activeWithin(now string, sc Scope, d time.Duration) *plan[int64] {
	p := pl.p
	plan := newPlan[int64](p, now)
	m := &plan.m
	k, err := p.scopeKeys("scope", sc)
	if err != nil {
		m.fail(err)
		return plan
	}
	if d < time.Millisecond || millis(d) > k.cls.window {
		m.fail(invalid("d", "must be 1ms to the class window %v, got %v", time.Duration(k.cls.window)*time.Millisecond, d))
		return plan
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
	m.settle(&round{op: "active", calls: calls, next: func(vals []Value) (*round, error) {
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
		plan.out = sum
		return nil, nil
	}}, nil)
	return plan
}

package core

import (
	"context"
	"sort"
	"strconv"
	"time"
)

// scope returns the scope's data as a script sees it at now: expired keys gone.
func (m *Model) scope(sc Scope, cls classSettings, now int64) *modelScope {
	s := m.scopes[sc]
	n := 1 // a self-sized scope starts with one shard
	if cls.spread {
		n = cls.shards
	}
	if s == nil {
		s = &modelScope{exact: map[string]int64{}, hll: map[int64]map[string]bool{}, hllExpire: map[int64]int64{}}
		s.resetShards(n)
		m.scopes[sc] = s
	}
	expired := func(at int64) bool { return at != 0 && now > at }
	if expired(s.exactExpire) {
		s.exact, s.exactExpire = map[string]int64{}, 0
	}
	if expired(s.metaExpire) {
		// the meta went last: every shard went before it
		s.resetShards(n)
	}
	for i, at := range s.shardsExpire {
		if expired(at) {
			s.shards[i], s.shardsExpire[i] = map[string]int64{}, 0
		}
	}
	for b, at := range s.hllExpire {
		if expired(at) {
			delete(s.hll, b)
			delete(s.hllExpire, b)
		}
	}
	if expired(s.countExpire) {
		s.count, s.countExpire = Count{}, 0
	}
	return s
}

func (s *modelScope) resetShards(n int) {
	s.shards, s.shardsExpire = make([]map[string]int64, n), make([]int64, n)
	for i := range s.shards {
		s.shards[i] = map[string]int64{}
	}
	s.level, s.split, s.metaExpire = 0, 0, 0
}

func (m *Model) shardOf(s *modelScope, cls classSettings, member string) int {
	if cls.spread {
		return int(fnv64(member) % uint64(cls.shards))
	}
	return linearShard(memberHash(member), s.level, s.split)
}

// stored is the members a compact scope stores: its meta's t.
func (s *modelScope) stored() int {
	n := 0
	for _, sh := range s.shards {
		n += len(sh)
	}
	return n
}

// move moves shard from's members into shard to, as scopelib.lua's
// moveMembers: the later expiry of two shards that hold members.
func (s *modelScope) move(from, to int, which func(member string) bool) {
	moved := false
	for id, t := range s.shards[from] {
		if which(id) {
			s.shards[to][id] = t
			delete(s.shards[from], id)
			moved = true
		}
	}
	if !moved {
		return
	}
	exp := s.shardsExpire[from]
	if len(s.shards[to]) > 0 {
		exp = max(exp, s.shardsExpire[to])
	}
	s.shardsExpire[to] = exp
}

// splitShard mirrors scopelib.lua's splitShard.
func (s *modelScope) splitShard() {
	p := 1 << s.level
	from, to := s.split, s.split+p
	s.shards, s.shardsExpire = append(s.shards, map[string]int64{}), append(s.shardsExpire, 0)
	s.move(from, to, func(id string) bool { return int(uint64(memberHash(id))%uint64(2*p)) == to })
	if s.split++; s.split == p {
		s.level, s.split = s.level+1, 0
	}
}

// mergeShard mirrors scopelib.lua's mergeShard.
func (s *modelScope) mergeShard() {
	if s.split == 0 {
		s.level--
		s.split = 1 << s.level
	}
	s.split--
	from, to := s.split+1<<s.level, s.split
	s.move(from, to, func(string) bool { return true })
	s.shards, s.shardsExpire = s.shards[:from], s.shardsExpire[:from]
}

// touch is Engine.Touch on the model.
func (m *Model) touch(ctx context.Context, sc Scope, member string) error {
	if err := m.settings.checkTouch(sc, member); err != nil {
		return err
	}
	return m.touchBatch(ctx, []ScopeTouch{{Scope: sc, Member: member}})
}

// touchBatch is Engine.TouchBatch on the model.
func (m *Model) touchBatch(ctx context.Context, touches []ScopeTouch) error {
	if err := checkBatch("touches", len(touches)); err != nil {
		return err
	}
	for i, t := range touches {
		field := "touches[" + strconv.Itoa(i) + "]"
		if _, err := m.settings.checkScope(field+".Scope", t.Scope); err != nil {
			return err
		}
		if err := checkID(field+".Member", t.Member); err != nil {
			return err
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	for _, t := range touches {
		cls := m.settings.classes[t.Scope.Class]
		s := m.scope(t.Scope, cls, now)
		expire := now + cls.window + m.settings.grace
		switch cls.layout {
		case LayoutExact:
			s.exact[t.Member], s.exactExpire = now, expire
		case LayoutCompact:
			i := m.shardOf(s, cls, t.Member)
			if cls.spread {
				s.shards[i][t.Member], s.shardsExpire[i] = now, expire
				break
			}
			_, had := s.shards[i][t.Member]
			life := expire + millis(compactLife)
			s.shards[i][t.Member], s.shardsExpire[i], s.metaExpire = now, life, life
			for !had && s.stored() > cls.shardSize*len(s.shards) && len(s.shards) < maxCompactShards {
				s.splitShard()
			}
		case LayoutApprox:
			b := now / cls.bucket * cls.bucket
			if s.hll[b] == nil {
				s.hll[b] = map[string]bool{}
			}
			s.hll[b][t.Member], s.hllExpire[b] = true, expire+cls.bucket
		}
		if _, ok := m.registry[t.Scope]; !ok {
			m.registry[t.Scope] = now + cls.interval
		}
	}
	return nil
}

// leave is Engine.Leave on the model.
func (m *Model) leave(ctx context.Context, sc Scope, member string) (bool, error) {
	cls, err := m.settings.checkScope("scope", sc)
	if err != nil {
		return false, err
	}
	if err := checkID("member", member); err != nil {
		return false, err
	}
	if cls.layout == LayoutApprox {
		return false, ErrUnsupported
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.scope(sc, cls, m.now())
	set := s.exact
	if cls.layout == LayoutCompact {
		set = s.shards[m.shardOf(s, cls, member)]
	}
	_, ok := set[member]
	delete(set, member)
	return ok, nil
}

// size mirrors scopelib.lua's size: live members (exact, approx) or all
// stored ones (compact).
func (m *Model) size(s *modelScope, cls classSettings, win, now int64) int64 {
	var n int64
	switch cls.layout {
	case LayoutExact:
		for _, t := range s.exact {
			if t >= now-win {
				n++
			}
		}
	case LayoutCompact:
		for _, sh := range s.shards {
			n += int64(len(sh))
		}
	case LayoutApprox:
		seen := map[string]bool{}
		for b := (now - win) / cls.bucket * cls.bucket; b <= now; b += cls.bucket {
			for member := range s.hll[b] {
				seen[member] = true
			}
		}
		n = int64(len(seen))
	}
	return n
}

// count is Engine.Count on the model (approx counts are exact here).
func (m *Model) count(ctx context.Context, sc Scope) (Count, error) {
	cls, err := m.settings.checkScope("scope", sc)
	if err != nil {
		return Count{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	s := m.scope(sc, cls, now)
	if cls.layout == LayoutCompact && s.countExpire != 0 {
		return s.count, nil
	}
	// Without a count key, the count as of now; reads never write, so the
	// count key stays the sweep's.
	return Count{N: m.size(s, cls, cls.window, now), AsOf: msTime(now)}, nil
}

// members is Engine.Members on the model.
func (m *Model) members(ctx context.Context, sc Scope, cursor string, limit int) (MemberPage, error) {
	cls, err := m.settings.checkScope("scope", sc)
	if err != nil {
		return MemberPage{}, err
	}
	shard, offset, err := checkPage(cursor, limit)
	if err != nil {
		return MemberPage{}, err
	}
	if cls.layout == LayoutApprox {
		return MemberPage{}, ErrUnsupported
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	s := m.scope(sc, cls, now)
	from := now - cls.window
	live := func(set map[string]int64) []Member {
		var out []Member
		for id, t := range set {
			if t >= from {
				out = append(out, Member{ID: id, LastSeen: msTime(t)})
			}
		}
		return out
	}
	page := MemberPage{Members: []Member{}}
	if cls.layout == LayoutExact {
		all := live(s.exact)
		sort.Slice(all, func(i, j int) bool {
			if !all[i].LastSeen.Equal(all[j].LastSeen) {
				return all[i].LastSeen.After(all[j].LastSeen)
			}
			return all[i].ID > all[j].ID
		})
		if offset < len(all) {
			page.Members = append(page.Members, all[offset:min(len(all), offset+limit)]...)
		}
		if len(page.Members) == limit {
			page.Next = formatCursor(0, offset+limit)
		}
		return page, nil
	}
	for ; shard < len(s.shards); shard, offset = shard+1, 0 {
		members := live(s.shards[shard])
		sort.Slice(members, func(i, j int) bool { return members[i].ID < members[j].ID })
		for ; offset < len(members); offset++ {
			if len(page.Members) >= limit {
				page.Next = formatCursor(shard, offset)
				return page, nil
			}
			page.Members = append(page.Members, members[offset])
		}
	}
	return page, nil
}

// activeWithin is Engine.ActiveWithin on the model.
func (m *Model) activeWithin(ctx context.Context, sc Scope, d time.Duration) (int64, error) {
	cls, err := m.settings.checkScope("scope", sc)
	if err != nil {
		return 0, err
	}
	if d < time.Millisecond || millis(d) > cls.window {
		return 0, invalid("d", "must be 1ms to the class window %v, got %v", time.Duration(cls.window)*time.Millisecond, d)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	s := m.scope(sc, cls, now)
	if cls.layout != LayoutCompact {
		return m.size(s, cls, millis(d), now), nil
	}
	var n int64
	for _, sh := range s.shards {
		for _, t := range sh {
			if t >= now-millis(d) {
				n++
			}
		}
	}
	return n, nil
}

// sweepScopes is Engine.SweepScopes on the model.
func (m *Model) sweepScopes(ctx context.Context) (SweepReport, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, err := m.token(); err != nil {
		return SweepReport{}, err
	}
	now := m.now()
	var due []Scope
	for sc, at := range m.registry {
		if at <= now {
			due = append(due, sc)
		}
	}
	sort.Slice(due, func(i, j int) bool {
		bi, bj := m.settings.keys.scopeBucket(due[i]), m.settings.keys.scopeBucket(due[j])
		if bi != bj {
			return bi < bj
		}
		if m.registry[due[i]] != m.registry[due[j]] {
			return m.registry[due[i]] < m.registry[due[j]]
		}
		return due[i].ref() < due[j].ref()
	})
	r := SweepReport{Buckets: int(m.settings.keys.scopeBuckets)}
	r.observe(now)
	for _, sc := range due {
		cls := m.settings.classes[sc.Class]
		s := m.scope(sc, cls, now)
		r.Visited++
		switch cls.layout {
		case LayoutExact:
			for id, t := range s.exact {
				if t < now-cls.window {
					delete(s.exact, id)
					r.Removed++
				}
			}
		case LayoutCompact:
			for _, sh := range s.shards {
				for id, t := range sh {
					if now-t > cls.window {
						delete(sh, id)
						r.Removed++
					}
				}
			}
			// a self-sized scope merges shards once it holds under a
			// quarter of what they are sized for; emptied, it is one shard
			for !cls.spread && len(s.shards) > 1 && s.stored()*4 < cls.shardSize*len(s.shards) {
				if s.stored() == 0 {
					s.resetShards(1)
					break
				}
				s.mergeShard()
			}
		}
		n := m.size(s, cls, cls.window, now)
		rel := m.releases[sc]
		if n > 0 || rel.empties+1 < m.settings.release {
			s.count, s.countExpire = Count{N: n, AsOf: msTime(now)}, now+m.settings.countTTL
			if n > 0 {
				delete(m.releases, sc)
			} else {
				m.releases[sc] = modelRelease{empties: rel.empties + 1}
			}
			m.registry[sc] = now + cls.interval
			continue
		}
		delete(m.scopes, sc)
		delete(m.registry, sc)
		delete(m.releases, sc)
		r.Released++
	}
	return r, nil
}

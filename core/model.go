package core

import (
	"context"
	"io"
	"maps"
	"sort"
	"strconv"
	"sync"
	"time"
)

// Model is the in-memory reference model: the same semantics as Engine, in
// plain Go with no Redis, written for clarity rather than speed. It is the
// oracle of the conformance suite, and serves anyone who wants presence in
// one process. It mirrors Redis down to key expiry, so that given the same
// clock, configuration and Rand, every observation (statuses, devices,
// counts, member pages, changes, kicks, errors) equals the Engine's, except
// that approx counts are exact here where Redis estimates them.
//
// A Model needs Config.Clock. It is safe for concurrent use.
type Model struct {
	settings *settings
	rand     io.Reader

	mu       sync.Mutex
	users    map[string]*modelUser
	due      map[string]int64 // the due index: user → next instant to settle
	scopes   map[Scope]*modelScope
	registry map[Scope]int64        // the scope registry: scope → next sweep
	releases map[Scope]modelRelease // the release hash: scope → consecutive empty sweeps
}

type modelUser struct {
	devs        map[string]record
	fences      map[string]fence // by device; the device hash holds them too
	devsExpire  int64            // when the device hash expires (0: no hash)
	manual      Manual
	manualUntil int64    // when the manual status expires (0: never)
	state       debounce // published status and pending change, as the state hash holds them
	hasState    bool     // the user has an entry in the bucket's state hash
}

type modelScope struct {
	exact        map[string]int64   // member → last touch
	exactExpire  int64              // when the sorted set expires
	shards       []map[string]int64 // compact shards (a self-sized scope's: 2^level + split)
	shardsExpire []int64
	level, split int                       // a self-sized compact scope's linear hashing (scopelib.lua)
	metaExpire   int64                     // when its meta and due index expire
	hll          map[int64]map[string]bool // approx: bucket start → members
	hllExpire    map[int64]int64
	count        Count // the count key
	countExpire  int64 // when the count key expires (0: no key)
}

type modelRelease struct{ empties, cursor int }

var _ Presence = (*Model)(nil)

// NewModel returns a reference model configured like an Engine.
func NewModel(cfg Config) (*Model, error) {
	if cfg.Clock == nil {
		return nil, invalid("Config.Clock", "a Model needs a clock")
	}
	s, err := newSettings(cfg)
	if err != nil {
		return nil, err
	}
	m := &Model{settings: s, rand: cfg.Rand, users: map[string]*modelUser{}, due: map[string]int64{},
		scopes: map[Scope]*modelScope{}, registry: map[Scope]int64{}, releases: map[Scope]modelRelease{}}
	if m.rand == nil {
		m.rand = cryptoRand
	}
	return m, nil
}

func (m *Model) now() int64 { return m.settings.cfg.Clock().UnixMilli() }

func (m *Model) token() (string, error) {
	e := planner{rand: m.rand}
	return e.newToken()
}

// user returns a working copy of the user's state as a script's load sees
// it: expired keys gone, records past their window and ended fences
// dropped. Like a script, an operation changes nothing unless it settles
// the copy (which stores it).
func (m *Model) user(id string, now int64) *modelUser {
	u := &modelUser{}
	if cur := m.users[id]; cur != nil {
		*u = *cur
	}
	u.devs = maps.Clone(u.devs)
	if u.devs == nil {
		u.devs = map[string]record{}
	}
	u.fences = maps.Clone(u.fences)
	if u.fences == nil {
		u.fences = map[string]fence{}
	}
	if u.devsExpire != 0 && now > u.devsExpire {
		u.devs, u.fences, u.devsExpire = map[string]record{}, map[string]fence{}, 0
	}
	if u.manualUntil > 0 && now >= u.manualUntil {
		u.manual, u.manualUntil = ManualNone, 0
	}
	for d, r := range u.devs {
		if now > m.settings.deadline(r) {
			delete(u.devs, d)
		}
	}
	for d, f := range u.fences {
		if now > f.end {
			delete(u.fences, d)
		}
	}
	return u
}

// fence mirrors userlib.lua's fence: until end, every token of device dev but
// token is refused; a fence in force keeps its later end. The model keeps
// every fence in force here; Redis stores one only where the device's
// session record does not imply it (lua/userlib.lua), which no observation
// tells apart.
func (u *modelUser) fence(dev string, end int64, token string) {
	if f, ok := u.fences[dev]; ok && f.end > end {
		end = f.end
	}
	u.fences[dev] = fence{end: end, token: token}
}

func (m *Model) live(u *modelUser, now int64) int {
	n := 0
	for _, r := range u.devs {
		if m.settings.state(r, now) != StatusOffline {
			n++
		}
	}
	return n
}

func (m *Model) aggregate(u *modelUser, now int64) Status {
	states := make([]Status, 0, len(u.devs))
	for _, r := range u.devs {
		states = append(states, m.settings.state(r, now))
	}
	return aggregate(states, u.manual)
}

// settle mirrors userlib.lua's settle: observe, then store expiry, state and index.
func (m *Model) settle(id string, u *modelUser, c cause, now int64) []Change {
	m.users[id] = u
	from, to, published := u.state.observe(m.aggregate(u, now), c, now, m.settings)
	last, next := int64(0), int64(0)
	hasLast, hasNext := false, false
	take := func(t int64) {
		if t > now && (!hasNext || t < next) {
			next, hasNext = t, true
		}
	}
	for _, r := range u.devs {
		d := m.settings.deadline(r)
		if !hasLast || d > last {
			last, hasLast = d, true
		}
		// every record is visited when it ends, so that a sweep removes it
		// (lua/userlib.lua's store): a gone one at its deadline + 1 ms too
		take(d + 1)
		if !r.gone && !r.background {
			take(r.active + m.settings.idle)
		}
	}
	for _, f := range u.fences {
		if !hasLast || f.end > last {
			last, hasLast = f.end, true
		}
		take(f.end + 1)
	}
	if hasLast {
		u.devsExpire = last + m.settings.grace
	} else {
		u.devsExpire = 0
	}
	if u.manualUntil > 0 && m.live(u, now) > 0 {
		take(u.manualUntil)
	}
	if u.state.pending {
		take(u.state.due)
	}
	u.hasState = u.state.pub != StatusOffline || u.state.pending
	if !u.hasState {
		u.state = debounce{}
	}
	if idx, ok := m.due[id]; !hasNext {
		delete(m.due, id)
	} else if !ok || next < idx || idx <= now {
		m.due[id] = next
	}
	if !published {
		return nil
	}
	return []Change{{User: id, From: from, To: to, At: msTime(now)}}
}

// heartbeat is Engine.Heartbeat on the model.
func (m *Model) heartbeat(ctx context.Context, hb Heartbeat) (Ack, error) {
	acks, err := m.heartbeatBatch(ctx, []Heartbeat{hb})
	if err != nil {
		return Ack{}, err
	}
	return acks[0], acks[0].Err
}

// heartbeatBatch is Engine.HeartbeatBatch on the model.
func (m *Model) heartbeatBatch(ctx context.Context, beats []Heartbeat) ([]Ack, error) {
	if err := checkBatch("beats", len(beats)); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	e := planner{settings: m.settings}
	acks := make([]Ack, len(beats))
	var order []int
	for i, hb := range beats {
		if acks[i].Err = e.checkHeartbeat(hb); acks[i].Err == nil {
			order = append(order, i)
		}
	}
	// Tokens of implicit logins come from one seed per bucket, as the
	// engine takes them: seed.j for the j-th beat of the bucket's run,
	// ordered by user.
	sort.SliceStable(order, func(x, y int) bool {
		bx, by := m.settings.keys.userBucket(beats[order[x]].User), m.settings.keys.userBucket(beats[order[y]].User)
		return bx < by || (bx == by && beats[order[x]].User < beats[order[y]].User)
	})
	issue := make([]string, len(beats))
	for lo := 0; lo < len(order); {
		hi := lo + 1
		b := m.settings.keys.userBucket(beats[order[lo]].User)
		for hi < len(order) && m.settings.keys.userBucket(beats[order[hi]].User) == b {
			hi++
		}
		tokenless := false
		for _, i := range order[lo:hi] {
			tokenless = tokenless || beats[i].Token == ""
		}
		if tokenless {
			seed, err := m.token()
			if err != nil {
				return nil, err
			}
			for j, i := range order[lo:hi] {
				issue[i] = seed + "." + strconv.Itoa(j)
			}
		}
		lo = hi
	}
	now := m.now()
	for _, i := range order {
		acks[i].Token, acks[i].Changes, acks[i].Err = m.beat(beats[i], issue[i], now)
	}
	return acks, nil
}

func (m *Model) beat(hb Heartbeat, issue string, now int64) (string, []Change, error) {
	if !hb.At.IsZero() {
		if at := hb.At.UnixMilli(); at > now+m.settings.skew || at < now-m.settings.skew {
			return "", nil, ErrClockSkew
		}
	}
	u := m.user(hb.User, now)
	r, ok := u.devs[hb.Device]
	f, fenced := u.fences[hb.Device]
	token := hb.Token
	switch {
	case ok && !r.gone:
		if hb.Token != "" && hb.Token != r.token {
			return "", nil, ErrSessionReplaced
		}
		if hb.Token == "" && m.settings.cfg.Policy != PolicyMulti {
			return "", nil, ErrNoSession
		}
		token = r.token
	case ok && hb.Token != "":
		// a logged-out record: its token, or any older one, is superseded
		return "", nil, ErrSessionReplaced
	case fenced && hb.Token != "" && hb.Token != f.token:
		// the device's fence: a login since has superseded this token
		return "", nil, ErrSessionReplaced
	case m.settings.cfg.Policy != PolicyMulti:
		return "", nil, ErrNoSession
	case m.live(u, now) >= m.settings.maxDevices:
		return "", nil, ErrTooManyDevices
	default:
		if token == "" {
			token = issue
		}
		r = record{token: token, loginAt: now, active: now, kind: hb.Kind, interval: m.settings.interval[hb.Kind]}
		// an implicit login under a fence fences its device as a login
		// does; with no fence in force it sets none (lua/userlib.lua)
		if fenced {
			u.fence(hb.Device, now+m.settings.fence, token)
		}
	}
	r.seen, r.background = now, hb.Background
	if hb.Gateway != "" {
		r.gateway = hb.Gateway
	}
	if hb.Active {
		t := now
		if !hb.At.IsZero() && hb.At.UnixMilli() < now {
			t = hb.At.UnixMilli()
		}
		r.active = max(r.active, t)
	}
	if hb.Meta != nil {
		r.meta = encodeMeta(hb.Meta)
	}
	u.devs[hb.Device] = r
	return token, m.settle(hb.User, u, causeChange, now), nil
}

// login is Engine.Login on the model.
func (m *Model) login(ctx context.Context, l Login) (LoginResult, error) {
	policy := m.settings.cfg.Policy
	if l.Policy != nil {
		policy = *l.Policy
	}
	if err := (&planner{settings: m.settings}).checkLogin(l, policy); err != nil {
		return LoginResult{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	token := l.Token
	if token == "" {
		var err error
		if token, err = m.token(); err != nil {
			return LoginResult{}, err
		}
	}
	now := m.now()
	u := m.user(l.User, now)
	if r, ok := u.devs[l.Device]; ok && !r.gone && r.token == token {
		// a retry of a login that applied; a session an implicit login
		// made with this token lacks the fence that login set
		if f, ok := u.fences[l.Device]; ok && f.token == token {
			return LoginResult{Token: token}, nil
		}
		u.fence(l.Device, now+m.settings.fence, token)
		return LoginResult{Token: token, Changes: m.settle(l.User, u, causeChange, now)}, nil
	}
	var kicked []string
	keep := 0
	for id, r := range u.devs {
		if m.settings.state(r, now) == StatusOffline {
			continue
		}
		if id == l.Device || policy == PolicyExclusive || (policy == PolicyExclusivePerKind && r.kind.classCode() == l.Kind.classCode()) {
			kicked = append(kicked, id)
		} else {
			keep++
		}
	}
	if keep >= m.settings.maxDevices {
		return LoginResult{}, ErrTooManyDevices
	}
	sort.Strings(kicked)
	res := LoginResult{Token: token}
	for _, id := range kicked {
		r := u.devs[id]
		res.Kicked = append(res.Kicked, Kick{User: l.User, Device: id, Kind: r.kind, Gateway: r.gateway, At: msTime(now)})
		if id != l.Device {
			delete(u.devs, id)
			u.fence(id, now+m.settings.fence, "")
		}
	}
	u.devs[l.Device] = record{kind: l.Kind, gateway: l.Gateway, token: token, loginAt: now, seen: now, active: now,
		background: l.Background, interval: m.settings.interval[l.Kind], meta: encodeMeta(l.Meta)}
	u.fence(l.Device, now+m.settings.fence, token)
	res.Changes = m.settle(l.User, u, causeChange, now)
	return res, nil
}

// logout is Engine.Logout on the model.
func (m *Model) logout(ctx context.Context, user, device, token string) (Ended, error) {
	return m.end(causeLogout, user, device, token)
}

// disconnect is Engine.Disconnect on the model.
func (m *Model) disconnect(ctx context.Context, user, device, token string) (Ended, error) {
	return m.end(causeLeave, user, device, token)
}

func (m *Model) end(c cause, user, device, token string) (Ended, error) {
	if err := checkEnd(user, device, token); err != nil {
		return Ended{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	u := m.user(user, now)
	r, ok := u.devs[device]
	if !ok || r.gone {
		return Ended{}, nil
	}
	if token != "" && token != r.token {
		return Ended{}, ErrSessionReplaced
	}
	if c == causeLogout {
		r.gone, r.active = true, m.settings.deadline(r)
		u.devs[device] = r
	} else {
		delete(u.devs, device)
	}
	return Ended{Removed: true, Changes: m.settle(user, u, c, now)}, nil
}

// setManual is Engine.SetManual on the model.
func (m *Model) setManual(ctx context.Context, user string, man Manual, ttl time.Duration) ([]Change, error) {
	if err := checkManual(user, man, ttl); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	u := m.user(user, now)
	u.manual, u.manualUntil = man, 0
	if man != ManualNone && ttl > 0 {
		u.manualUntil = now + millis(ttl)
	}
	return m.settle(user, u, causeChange, now), nil
}

// status is Engine.Status on the model.
func (m *Model) status(ctx context.Context, user string) (UserStatus, error) {
	if err := checkID("user", user); err != nil {
		return UserStatus{}, err
	}
	out, err := m.statuses(ctx, []string{user})
	if err != nil {
		return UserStatus{}, err
	}
	return out[0], nil
}

// statuses is Engine.Statuses on the model.
func (m *Model) statuses(ctx context.Context, users []string) ([]UserStatus, error) {
	if err := checkUsers(users); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	out := make([]UserStatus, len(users))
	for i, id := range users {
		recs := map[string]record{}
		var man Manual
		var manualUntil int64
		if u := m.users[id]; u != nil {
			if u.devsExpire == 0 || now <= u.devsExpire {
				recs = u.devs
			}
			man, manualUntil = u.manual, u.manualUntil
		}
		out[i] = m.settings.userStatus(id, recs, man, manualUntil, now)
	}
	return out, nil
}

// sweepUsers is Engine.SweepUsers on the model: every user due by now is settled,
// bucket by bucket, in index order.
func (m *Model) sweepUsers(ctx context.Context) (SweepReport, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, err := m.token(); err != nil {
		return SweepReport{}, err
	}
	now := m.now()
	type entry struct {
		user   string
		bucket uint32
		score  int64
	}
	var due []entry
	for u, score := range m.due {
		if score <= now {
			due = append(due, entry{u, m.settings.keys.userBucket(u), score})
		}
	}
	sort.Slice(due, func(i, j int) bool {
		a, b := due[i], due[j]
		if a.bucket != b.bucket {
			return a.bucket < b.bucket
		}
		if a.score != b.score {
			return a.score < b.score
		}
		return a.user < b.user
	})
	r := SweepReport{Buckets: int(m.settings.keys.userBuckets)}
	r.observe(now)
	for _, d := range due {
		u := m.user(d.user, now)
		r.Visited++
		r.Changes = append(r.Changes, m.settle(d.user, u, causeLeave, now)...)
		if len(u.devs) == 0 && len(u.fences) == 0 && !u.hasState && u.manualUntil == 0 && u.manual == ManualNone {
			delete(m.users, d.user)
		}
	}
	return r, nil
}

// online is Engine.Online on the model.
func (m *Model) online(ctx context.Context) (map[Status]int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := publishedCounts()
	for _, u := range m.users {
		if u.state.pub != StatusOffline {
			out[u.state.pub]++
		}
	}
	return out, nil
}

package cluster

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/presencekit/presence/core"
	"github.com/presencekit/presence/internal/redistest"
	"github.com/presencekit/presence/internal/slot"
)

// Bounds of the failover test. A failover with cluster-node-timeout 1000 ms
// takes a few seconds on an idle machine: the failure report (node timeout),
// the replica's election delay (500 ms + up to 500 ms random + rank), the
// vote; the deadlines leave room for a loaded machine.
const (
	promotionDeadline = 45 * time.Second
	recoveryDeadline  = 60 * time.Second
	beatTimeout       = 2 * time.Second
	failoverWorkers   = 4
	failoverFixed     = 48 // users that heartbeat throughout
)

// failoverConfig keeps every device alive far longer than a test run, so
// that any device missing afterwards was lost, not expired.
func failoverConfig(prefix string) core.Config {
	return core.Config{
		Prefix: prefix,
		Intervals: map[core.Kind]time.Duration{
			core.KindWeb: 10 * time.Minute,
		},
	}
}

// beat is one heartbeat the failover workers sent.
type beat struct {
	user       string
	sent, done time.Time
	err        error
}

// beatLog collects the heartbeats of a failover run.
type beatLog struct {
	mu    sync.Mutex
	beats []beat
}

func (l *beatLog) add(b beat) {
	l.mu.Lock()
	l.beats = append(l.beats, b)
	l.mu.Unlock()
}

func (l *beatLog) all() []beat {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]beat(nil), l.beats...)
}

// firstAck returns the first heartbeat of a user in victims that was sent
// after t and succeeded.
func (l *beatLog) firstAck(t time.Time, victims map[string]bool) (beat, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var first beat
	found := false
	for _, b := range l.beats {
		if b.err == nil && victims[b.user] && b.sent.After(t) && (!found || b.done.Before(first.done)) {
			first, found = b, true
		}
	}
	return first, found
}

// failoverResult is what one adapter's failover run measured.
type failoverResult struct {
	adapter           string
	victim, successor string
	promotion         time.Duration // kill → the replica reports role master and the cluster is ok
	recovery          time.Duration // kill → first acknowledged heartbeat on the victim's slots
	errors            int
	errorKinds        []string
	beats             int
	fenced, window    int           // users first acknowledged before the WAIT fence, and between it and the kill
	windowDur         time.Duration // from the fence to the kill
	lostInWindow      int           // of the window's users, those missing afterwards
	lostAge           time.Duration // the longest a lost user's acknowledgement preceded the kill
}

func (r failoverResult) String() string {
	lost := fmt.Sprintf("%d lost", r.lostInWindow)
	if r.lostInWindow > 0 {
		lost += fmt.Sprintf(", acknowledged at most %v before the kill", r.lostAge)
	}
	return fmt.Sprintf("%s: killed master %s, replica %s promoted after %v, first heartbeat on its slots acknowledged %v after the kill; %d heartbeats, %d errors during the switch %v; %d users fenced by WAIT (none may be lost), %d first acknowledged in the %v between WAIT and the kill (%s)",
		r.adapter, r.victim, r.successor, r.promotion.Round(time.Millisecond), r.recovery.Round(time.Millisecond),
		r.beats, r.errors, r.errorKinds, r.fenced, r.window, r.windowDur.Round(time.Millisecond), lost)
}

// TestFailover kills a master of a 3-master, 3-replica cluster while
// heartbeats run, once per adapter (each run kills another original
// master, whose replica then takes over). Automatic failover, no manual
// CLUSTER FAILOVER: the nodes run with cluster-node-timeout 1000 ms (set
// with CONFIG SET after start-up). It checks that every error during the
// switch is retryable (core.ErrUnavailable), that heartbeats on the dead
// master's slots resume, and that every user acknowledged before a WAIT
// fence on that master is present afterwards with at least the last
// heartbeat acknowledged before the fence. Users acknowledged between the
// fence and the kill may be lost (asynchronous replication); the run
// reports how many were.
func TestFailover(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("failovers take several seconds each; skipped in -short mode")
	}
	c := startCluster(t, 1, failoverNodeTimeout)
	var results []failoverResult
	for _, tg := range ClusterTargets(c.Addrs()) {
		ok := t.Run(tg.Adapter, func(t *testing.T) {
			be, err := tg.Open(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { be.Close() })
			r := runFailover(t, c, tg.Adapter, be.Store)
			t.Log(r)
			results = append(results, r)
		})
		if !ok {
			break // the cluster may be left in an unknown state
		}
	}
	for _, r := range results {
		t.Log(r)
	}
}

// runFailover runs one adapter's failover and checks it.
func runFailover(t testing.TB, c *redistest.ClusterInstance, adapter string, store core.Store) failoverResult {
	ctx := context.Background()
	res := failoverResult{adapter: adapter}
	var guard slotGuard
	var keys batchLog
	eng, err := core.New(guard.wrap(keys.wrap(store)), failoverConfig("failover-"+adapter))
	if err != nil {
		t.Fatal(err)
	}

	// The fixed users, one heartbeat each, to learn their buckets' masters.
	userKey := map[string]string{} // user → a key of the user's bucket
	for i := range failoverFixed {
		u := "fixed-" + strconv.Itoa(i)
		keys.take()
		if _, err := eng.Heartbeat(ctx, core.Heartbeat{User: u, Device: "d", Kind: core.KindWeb}); err != nil {
			t.Fatalf("heartbeat before the run: %v", err)
		}
		for _, batch := range keys.take() {
			if len(batch) > 0 && len(batch[0]) > 0 {
				userKey[u] = batch[0][0]
			}
		}
	}
	slots, err := clusterSlots(c)
	if err != nil {
		t.Fatal(err)
	}
	victim, replica := pickVictim(t, c, slots, userKey)
	res.victim, res.successor = victim.Addr, replica.Addr
	victims := map[string]bool{} // users whose bucket the victim serves
	var fenceKey string
	for u, k := range userKey {
		if slots.master(slot.Of(k)) == victim.Addr {
			victims[u] = true
			fenceKey = "fence" + hashTag(k)
		}
	}

	// Heartbeats: each worker alternates between the fixed users and new
	// ones, so that the run keeps creating sessions.
	var log beatLog
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range failoverWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				u := "fixed-" + strconv.Itoa((n/2*failoverWorkers+w)%failoverFixed)
				if n%2 == 1 {
					u = "new-" + strconv.Itoa(w) + "-" + strconv.Itoa(n)
				}
				bctx, cancel := context.WithTimeout(ctx, beatTimeout)
				b := beat{user: u, sent: time.Now()}
				_, b.err = eng.Heartbeat(bctx, core.Heartbeat{User: u, Device: "d", Kind: core.KindWeb})
				cancel()
				b.done = time.Now()
				log.add(b)
			}
		}()
	}
	defer func() {
		select {
		case <-stop:
		default:
			close(stop)
		}
		wg.Wait()
	}()

	// Let the run settle, then fence: everything the victim acknowledged
	// before fenceAt has reached its replica once WAIT returns 1.
	if !poll(scaledBound(10*time.Second), 20*time.Millisecond, func() bool { return len(log.all()) >= 400 }) {
		t.Fatalf("the workers acknowledged only %d heartbeats", len(log.all()))
	}
	fenceAt := time.Now()
	if n, err := waitReplicated(ctx, victim.Addr, fenceKey); err != nil || n < 1 {
		t.Fatalf("WAIT on %s: %d replicas, %v", victim.Addr, n, err)
	}
	// More heartbeats go out, acknowledged but maybe not yet replicated.
	before := len(log.all())
	poll(scaledBound(5*time.Second), 5*time.Millisecond, func() bool { return len(log.all()) >= before+100 })

	victim.Kill()
	killedAt := time.Now()
	res.windowDur = killedAt.Sub(fenceAt)

	if !poll(promotionDeadline, 20*time.Millisecond, func() bool { return promoted(replica, c) }) {
		t.Fatalf("replica %s not promoted within %v of killing %s", replica.Addr, promotionDeadline, victim.Addr)
	}
	res.promotion = time.Since(killedAt)

	var first beat
	if !poll(recoveryDeadline, 10*time.Millisecond, func() bool {
		var ok bool
		first, ok = log.firstAck(killedAt, victims)
		return ok
	}) {
		t.Fatalf("no heartbeat on the dead master's slots acknowledged within %v of the kill", recoveryDeadline)
	}
	res.recovery = first.done.Sub(killedAt)

	// Heartbeats resume for every fixed user of the victim's slots.
	resumedAt := time.Now()
	if !poll(recoveryDeadline, 20*time.Millisecond, func() bool {
		for u := range victims {
			if _, ok := log.firstAck(resumedAt, map[string]bool{u: true}); !ok {
				return false
			}
		}
		return true
	}) {
		t.Errorf("not every user on the dead master's slots heartbeated again within %v", recoveryDeadline)
	}
	close(stop)
	wg.Wait()

	// Errors: all retryable.
	beats := log.all()
	res.beats = len(beats)
	kinds := map[string]int{}
	for _, b := range beats {
		if b.err == nil {
			continue
		}
		res.errors++
		kinds[errorKind(b.err)]++
		if !errors.Is(b.err, core.ErrUnavailable) {
			t.Errorf("heartbeat of %s at +%v: error not retryable: %v", b.user, b.sent.Sub(killedAt), b.err)
		}
	}
	for k, n := range kinds {
		res.errorKinds = append(res.errorKinds, fmt.Sprintf("%d× %s", n, k))
	}
	sort.Strings(res.errorKinds)

	// Nothing acknowledged before the fence is lost: each such user is
	// there, with a last heartbeat no older than its last acknowledged one
	// before the fence. Users first acknowledged between the fence and the
	// kill may be gone.
	lastFenced := map[string]time.Time{} // user → send time of its last ack before the fence
	inWindow := map[string]bool{}
	windowAck := map[string]time.Time{} // user → its first ack between the fence and the kill
	for _, b := range beats {
		switch {
		case b.err != nil:
		case b.done.Before(fenceAt):
			if b.sent.After(lastFenced[b.user]) {
				lastFenced[b.user] = b.sent
			}
		case b.done.Before(killedAt):
			inWindow[b.user] = true
			if at, ok := windowAck[b.user]; !ok || b.done.Before(at) {
				windowAck[b.user] = b.done
			}
		}
	}
	for u := range lastFenced {
		delete(inWindow, u)
	}
	res.fenced, res.window = len(lastFenced), len(inWindow)
	present := statuses(t, eng, lastFenced, inWindow)
	for u, sent := range lastFenced {
		seen, ok := present[u]
		switch {
		case !ok:
			t.Errorf("user %s, acknowledged before the WAIT fence, is gone after the failover", u)
		case seen.UnixMilli() < sent.UnixMilli():
			t.Errorf("user %s: last seen %v, before its last heartbeat acknowledged before the fence (sent %v)", u, seen, sent)
		}
	}
	for u := range inWindow {
		if _, ok := present[u]; !ok {
			res.lostInWindow++
			res.lostAge = max(res.lostAge, killedAt.Sub(windowAck[u]))
		}
	}
	guard.check(t)
	return res
}

// errorKind shortens an error to its kind, without ports and addresses.
func errorKind(err error) string {
	msg := err.Error()
	for _, k := range []string{"connection refused", "i/o timeout", "deadline exceeded", "EOF", "connection reset", "broken pipe",
		"CLUSTERDOWN", "TRYAGAIN", "MOVED", "closed", "no node", "failed to get a connection"} {
		if strings.Contains(msg, k) {
			return k
		}
	}
	return msg
}

// statuses reads the devices of the fenced and window users and returns
// each present user's last heartbeat.
func statuses(t testing.TB, eng *core.Engine, fenced map[string]time.Time, window map[string]bool) map[string]time.Time {
	t.Helper()
	var users []string
	for u := range fenced {
		users = append(users, u)
	}
	for u := range window {
		users = append(users, u)
	}
	out := map[string]time.Time{}
	for i := 0; i < len(users); i += core.MaxBatch {
		batch := users[i:min(len(users), i+core.MaxBatch)]
		var sts []core.UserStatus
		var err error
		// The cluster just failed over: give a straggling client a few tries.
		poll(recoveryDeadline, 50*time.Millisecond, func() bool {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			sts, err = eng.Statuses(ctx, batch)
			return err == nil
		})
		if err != nil {
			t.Fatalf("Statuses after the failover: %v", err)
		}
		for _, st := range sts {
			for _, d := range st.Devices {
				if d.ID == "d" {
					out[st.User] = d.LastSeen
				}
			}
		}
	}
	return out
}

// slotMap maps slot ranges to the address of their master.
type slotMap []struct {
	lo, hi int64
	addr   string
}

func (m slotMap) master(slot uint16) string {
	for _, r := range m {
		if int64(slot) >= r.lo && int64(slot) <= r.hi {
			return r.addr
		}
	}
	return ""
}

// clusterSlots reads CLUSTER SLOTS from a live node of c.
func clusterSlots(c *redistest.ClusterInstance) (slotMap, error) {
	var lastErr error
	for _, n := range c.Nodes() {
		if n.Pid() == 0 {
			continue
		}
		reply, err := n.Do("CLUSTER", "SLOTS")
		if err != nil {
			lastErr = err
			continue
		}
		var m slotMap
		ranges, _ := reply.([]any)
		for _, r := range ranges {
			rr, _ := r.([]any)
			if len(rr) < 3 {
				continue
			}
			lo, _ := rr[0].(int64)
			hi, _ := rr[1].(int64)
			master, _ := rr[2].([]any)
			if len(master) < 2 {
				continue
			}
			port, _ := master[1].(int64)
			m = append(m, struct {
				lo, hi int64
				addr   string
			}{lo, hi, "127.0.0.1:" + strconv.FormatInt(port, 10)})
		}
		return m, nil
	}
	return nil, fmt.Errorf("no live node answered CLUSTER SLOTS: %v", lastErr)
}

// pickVictim returns the live master that serves most of the users and has
// a live replica, and that replica.
func pickVictim(t testing.TB, c *redistest.ClusterInstance, slots slotMap, userKey map[string]string) (*redistest.Instance, *redistest.Instance) {
	t.Helper()
	served := map[string]int{}
	for _, k := range userKey {
		served[slots.master(slot.Of(k))]++
	}
	byAddr := map[string]*redistest.Instance{}
	for _, n := range c.Nodes() {
		byAddr[n.Addr] = n
	}
	var victim, replica *redistest.Instance
	for addr, n := range served {
		m := byAddr[addr]
		if m == nil || m.Pid() == 0 || (victim != nil && n <= served[victim.Addr]) {
			continue
		}
		if r := replicaOf(t, m, byAddr); r != nil {
			victim, replica = m, r
		}
	}
	if victim == nil {
		t.Fatalf("no live master with a live replica serves the test's users (%v)", served)
	}
	return victim, replica
}

// replicaOf returns m's first connected replica, from INFO replication.
func replicaOf(t testing.TB, m *redistest.Instance, byAddr map[string]*redistest.Instance) *redistest.Instance {
	t.Helper()
	repl := info(t, m, "replication")
	if repl["role"] != "master" {
		return nil
	}
	for k, v := range repl {
		if !strings.HasPrefix(k, "slave") {
			continue
		}
		// slave0:ip=127.0.0.1,port=24321,state=online,offset=…,lag=0
		var port, state string
		for _, f := range strings.Split(v, ",") {
			if p, ok := strings.CutPrefix(f, "port="); ok {
				port = p
			}
			if s, ok := strings.CutPrefix(f, "state="); ok {
				state = s
			}
		}
		if r := byAddr["127.0.0.1:"+port]; r != nil && state == "online" && r.Pid() != 0 {
			return r
		}
	}
	return nil
}

// promoted reports whether replica has become a master and every live node
// sees a healthy cluster.
func promoted(replica *redistest.Instance, c *redistest.ClusterInstance) bool {
	reply, err := replica.Do("ROLE")
	items, _ := reply.([]any)
	if err != nil || len(items) == 0 || items[0] != "master" {
		return false
	}
	for _, n := range c.Nodes() {
		if n.Pid() == 0 {
			continue
		}
		reply, err := n.Do("CLUSTER", "INFO")
		text, _ := reply.(string)
		if err != nil || !strings.Contains(text, "cluster_state:ok") {
			return false
		}
	}
	return true
}

// hashTag returns key's hash tag with its braces ("{u3}"), or "".
func hashTag(key string) string {
	i := strings.IndexByte(key, '{')
	if i < 0 {
		return ""
	}
	j := strings.IndexByte(key[i:], '}')
	if j < 0 {
		return ""
	}
	return key[i : i+j+1]
}

// waitReplicated writes key on the master at addr and waits, with WAIT,
// until at least one replica has acknowledged everything the master
// processed before that write; it returns the replicas that did.
func waitReplicated(ctx context.Context, addr, key string) (int64, error) {
	c := goredis.NewClient(&goredis.Options{Addr: addr, PoolSize: 1})
	defer c.Close()
	conn := c.Conn()
	defer conn.Close()
	if err := conn.Set(ctx, key, time.Now().UnixNano(), time.Minute).Err(); err != nil {
		return 0, err
	}
	n, err := conn.Do(ctx, "WAIT", 1, 5000).Int64()
	if err != nil {
		return 0, err
	}
	if n < 1 {
		return n, errors.New("no replica acknowledged within 5 s")
	}
	return n, nil
}

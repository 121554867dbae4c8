package conformance_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/presencekit/presence/adapters/goredis"
	"github.com/presencekit/presence/conformance"
	"github.com/presencekit/presence/core"
	"github.com/presencekit/presence/internal/redistest"
)

// readsNoWriteClasses has a class of every layout: exact, compact with the
// default 256 shards, compact spread (4 shards, to keep the test quick),
// approx.
func readsNoWriteClasses() map[string]core.ScopeClass {
	return map[string]core.ScopeClass{
		"room":  {Layout: core.LayoutExact},
		"video": {Layout: core.LayoutCompact, Window: 10 * time.Minute, SweepInterval: time.Minute},
		"live":  {Layout: core.LayoutCompact, Shards: 4, Spread: true},
		"crowd": {Layout: core.LayoutApprox},
	}
}

// TestReadsNeverWrite checks docs/design.md §9: reads never write. After a
// little real data (a logged-in user, one touched scope of each class, not
// yet swept), Count of 10,000 random scope IDs (the classes in turn; the
// touched scopes first: a compact one has no count key until its first
// sweep), Members, ActiveWithin and a Status of a random user for every
// other ID of each class, and every 100 reads Statuses of 100 random users,
// Online and ChangeLogAfter leave the database's keys (so DBSIZE) exactly as
// they were, on a real server through every adapter (10,000 reads through
// go-redis, 1,000 through the others) and on miniredis (500: its Lua is
// slow). Before reads stopped writing, the 10,000 counts created 5,000
// count keys. With -short, at most 1,000 reads each.
func TestReadsNeverWrite(t *testing.T) {
	t.Parallel()
	t.Run("redis-server", func(t *testing.T) {
		t.Parallel()
		srv := redistest.Server(t)
		for i, tg := range conformance.AdapterTargets(srv.Addr) {
			t.Run(tg.Adapter, func(t *testing.T) {
				be, err := tg.Open(context.Background())
				if err != nil {
					t.Fatal(err)
				}
				defer be.Close()
				keys := func() []string {
					v, err := redistest.Do(srv.Addr, "KEYS", "*")
					if err != nil {
						t.Fatal(err)
					}
					var out []string
					for _, k := range v.([]any) {
						out = append(out, k.(string))
					}
					return out
				}
				reads := 10000 // the figure, through one adapter
				if i > 0 {
					reads = 1000
				}
				readsNeverWrite(t, be.Store, "rnw"+strconv.Itoa(i), keys, reads)
			})
		}
	})
	t.Run("miniredis", func(t *testing.T) {
		t.Parallel()
		mr := miniredis.RunT(t)
		c := redis.NewClient(&redis.Options{Addr: mr.Addr()})
		defer c.Close()
		readsNeverWrite(t, goredis.New(c), "rnw", mr.Keys, 500) // miniredis runs Lua slowly
	})
}

func readsNeverWrite(t *testing.T, store core.Store, prefix string, keys func() []string, reads int) {
	ctx := context.Background()
	e, err := core.New(store, core.Config{Prefix: prefix, Classes: readsNoWriteClasses(), ChangeLog: 100})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Login(ctx, core.Login{User: "alice", Device: "web", Kind: core.KindWeb, Gateway: "gw1"}); err != nil {
		t.Fatal(err)
	}
	classes := []string{"room", "video", "live", "crowd"}
	var touched []core.Scope
	for _, class := range classes {
		sc := core.Scope{Class: class, ID: "seeded"}
		touched = append(touched, sc)
		if err := e.TouchBatch(ctx, []core.ScopeTouch{{Scope: sc, Member: "alice"}, {Scope: sc, Member: "bob"}}); err != nil {
			t.Fatal(err)
		}
	}
	before := keys()
	slices.Sort(before)

	r := rand.New(rand.NewPCG(1, 2))
	id := func() string { return strconv.FormatUint(r.Uint64(), 36) }
	if testing.Short() {
		reads = min(reads, 1000)
	}
	for i := range reads {
		sc := core.Scope{Class: classes[i%len(classes)], ID: id()}
		if i < len(touched) {
			sc = touched[i]
		}
		c, err := e.Count(ctx, sc)
		if err != nil {
			t.Fatalf("Count(%v): %v", sc, err)
		}
		want := int64(0)
		if i < len(touched) {
			want = 2
		}
		if c.N != want {
			t.Errorf("Count(%v) = %d, want %d", sc, c.N, want)
		}
		if i%8 < len(classes) { // every other ID of each class, to keep the test quick
			if sc.Class != "crowd" {
				if _, err := e.Members(ctx, sc, "", 10); err != nil {
					t.Fatalf("Members(%v): %v", sc, err)
				}
			}
			if _, err := e.ActiveWithin(ctx, sc, time.Minute); err != nil {
				t.Fatalf("ActiveWithin(%v): %v", sc, err)
			}
			if _, err := e.Status(ctx, id()); err != nil {
				t.Fatalf("Status: %v", err)
			}
		}
		if i%100 == 0 {
			users := make([]string, 100)
			for j := range users {
				users[j] = id()
			}
			if _, err := e.Statuses(ctx, users); err != nil {
				t.Fatalf("Statuses: %v", err)
			}
			if _, err := e.Online(ctx); err != nil {
				t.Fatalf("Online: %v", err)
			}
			if _, _, err := e.ChangeLogAfter(ctx, "", 10); err != nil {
				t.Fatalf("ChangeLogAfter: %v", err)
			}
		}
	}
	after := keys()
	slices.Sort(after)
	t.Logf("DBSIZE %d before %d reads, %d after", len(before), reads, len(after))
	if !slices.Equal(before, after) {
		var added []string
		for _, k := range after {
			if _, found := slices.BinarySearch(before, k); !found {
				added = append(added, k)
			}
		}
		if len(added) > 5 {
			added = append(added[:5], fmt.Sprintf("… %d more", len(added)-5))
		}
		t.Errorf("reads changed the keys: %d before, %d after; new: %q", len(before), len(after), added)
	}
}

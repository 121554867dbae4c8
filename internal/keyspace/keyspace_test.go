package keyspace

import (
	"strconv"
	"testing"
)

// TestNames pins every name to the key table of the package doc: a change
// here moves keys a deployment already has.
func TestNames(t *testing.T) {
	l := Layout{Prefix: "P", UserBuckets: 16, ScopeBuckets: 16}
	b := l.ScopeBucket("room", "r1")
	sb := "P:{s" + strconv.Itoa(b) + "}:"
	reg, rel, lock := l.BucketKeys(3)
	for got, want := range map[string]string{
		l.Meta(3):                          "P:{u3}:m",
		l.Page(3, 7):                       "P:{u3}:p:7",
		l.PagePrefix(3):                    "P:{u3}:p:",
		l.Big(3):                           "P:{u3}:big",
		l.Manual(3):                        "P:{u3}:man",
		l.Due(3):                           "P:{u3}:due",
		l.Counts(3):                        "P:{u3}:cnt",
		l.Outbox(3):                        "P:{u3}:ob",
		l.Lock(3):                          "P:{u3}:lock",
		reg:                                "P:{s3}:reg",
		rel:                                "P:{s3}:rel",
		lock:                               "P:{s3}:lock",
		l.Log():                            "P:log",
		l.Exact("room", "r1"):              sb + "z:room:r1",
		l.Count("room", "r1"):              sb + "n:room:r1",
		l.Shard("room", "r1", 5):           sb + "c:room:5:r1",
		l.CompactMeta("room", "r1"):        sb + "c:room:m:r1",
		l.CompactIndex("room", "r1"):       sb + "c:room:i:r1",
		l.SpreadShard("room", "r1", 5):     "P:{s" + strconv.Itoa(b) + ".5}:h:room:5:r1",
		HLLHead(l.ScopeBase(b), "room"):    sb + "x:room:",
		SpreadHead(l.ScopeBase(b), "room"): sb + "h:room:",
		ShardKey(sb+"c:room:", 12, ":r1"):  sb + "c:room:12:r1",
		Ref("room", "r1"):                  "room:r1",
		Tail("r1"):                         ":r1",
	} {
		if got != want {
			t.Errorf("got %q, want %q", got, want)
		}
	}
}

// TestBuckets: FNV-1a 64 of the ID modulo the bucket count, as
// docs/design.md's key layout states (a change would move every key).
func TestBuckets(t *testing.T) {
	if got := FNV64(""); got != 14695981039346656037 {
		t.Errorf("FNV64(\"\") = %d, want the offset basis", got)
	}
	if got := FNV64("a"); got != 0xaf63dc4c8601ec8c {
		t.Errorf("FNV64(\"a\") = %#x, want FNV-1a's 0xaf63dc4c8601ec8c", got)
	}
	l := New("", 0, 0)
	if l != (Layout{Prefix: DefaultPrefix, UserBuckets: DefaultBuckets, ScopeBuckets: DefaultBuckets}) {
		t.Errorf("New with zero values = %+v, want the defaults", l)
	}
	if got, want := l.UserBucket("alice"), int(FNV64("alice")%16); got != want {
		t.Errorf("UserBucket(alice) = %d, want %d", got, want)
	}
	if got, want := l.ScopeBucket("room", "r1"), int(FNV64("room:r1")%16); got != want {
		t.Errorf("ScopeBucket(room, r1) = %d, want %d", got, want)
	}
}

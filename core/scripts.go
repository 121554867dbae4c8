package core

import (
	"strings"
	"sync"

	"github.com/presencekit/presence/internal/keyspace"
)

//go:generate go run ./internal/genscripts

// luaScript is one Lua script with its SHA1, as EVALSHA names it. Its source
// is the texts of its files as go generate ./core writes them
// (scripts_gen.go), joined when it is first sent whole: an engine sends
// scripts by their SHA1, and their sources only after a NOSCRIPT.
type luaScript struct {
	name  string
	sha   string
	parts []string

	once   sync.Once
	source string
}

// Name, Source and SHA make a luaScript a keyspace.Script, which
// documents them.
func (s *luaScript) Name() string { return s.name }

func (s *luaScript) Source() string {
	s.once.Do(func() { s.source = strings.Join(s.parts, "") })
	return s.source
}

func (s *luaScript) SHA() string { return s.sha }

// scriptSet holds every script of the engine. Scripts that share helpers get
// recordlib.lua, userlib.lua (and scopelib.lua) prepended, so each is
// self-contained; the steady beat gets recordlib.lua alone, because whatever
// a prepended file defines, the script builds on every call. Which files a
// script joins is written twice, here and in core/internal/luabuild, which
// computes the SHA1s: TestScriptSources holds the two together.
type scriptSet struct {
	beat, heartbeat, login, logout, manual, status, sweepUsers, unlock *luaScript
	touch, leave, count, members, active, sweepScopes                  *luaScript
	logAppend, logRead, outboxAck                                      *luaScript
	shardTouch, shardLen, shardSweep, shardDrop, scopeFinish           *luaScript
	counts, ping                                                       *luaScript

	bySHA map[string]*luaScript
}

// newScript returns the script named name whose SHA1 is sha and whose
// source is parts joined (parts<Name> of scripts_gen.go).
func newScript(name, sha string, parts ...string) *luaScript {
	return &luaScript{name: name, sha: sha, parts: parts}
}

// engineScripts returns every script of the engine. They are built once per
// process, and are read-only from then on, so that configuring an engine
// costs nothing for them.
var engineScripts = sync.OnceValue(func() *scriptSet {
	s := &scriptSet{
		beat:        newScript("beat", shaHeartbeatSteady, partsHeartbeatSteady...),
		heartbeat:   newScript("heartbeat", shaHeartbeatFull, partsHeartbeatFull...),
		login:       newScript("login", shaLogin, partsLogin...),
		logout:      newScript("logout", shaLogout, partsLogout...),
		manual:      newScript("manual", shaManual, partsManual...),
		status:      newScript("status", shaStatus, partsStatus...),
		sweepUsers:  newScript("sweep_users", shaSweepUsers, partsSweepUsers...),
		unlock:      newScript("unlock", shaUnlock, partsUnlock...),
		touch:       newScript("touch", shaTouch, partsTouch...),
		leave:       newScript("leave", shaLeave, partsLeave...),
		count:       newScript("count", shaCount, partsCount...),
		members:     newScript("members", shaMembers, partsMembers...),
		active:      newScript("active", shaActive, partsActive...),
		sweepScopes: newScript("sweep_scopes", shaSweepScopes, partsSweepScopes...),
		logAppend:   newScript("log_append", shaLogAppend, partsLogAppend...),
		logRead:     newScript("log_read", shaLogRead, partsLogRead...),
		outboxAck:   newScript("outbox_ack", shaOutboxAck, partsOutboxAck...),
		shardTouch:  newScript("shard_touch", shaShardTouch, partsShardTouch...),
		shardLen:    newScript("shard_len", shaShardLen, partsShardLen...),
		shardSweep:  newScript("shard_sweep", shaShardSweep, partsShardSweep...),
		shardDrop:   newScript("shard_drop", shaShardDrop, partsShardDrop...),
		scopeFinish: newScript("scope_finish", shaScopeFinish, partsScopeFinish...),
		counts:      newScript("counts", shaCounts, partsCounts...),
		ping:        newScript("ping", shaPing, partsPing...),
	}
	s.bySHA = map[string]*luaScript{}
	for _, sc := range s.all() {
		s.bySHA[sc.sha] = sc
	}
	return s
})

func (s scriptSet) all() []*luaScript {
	return []*luaScript{s.beat, s.heartbeat, s.login, s.logout, s.manual, s.status, s.sweepUsers, s.unlock,
		s.touch, s.leave, s.count, s.members, s.active, s.sweepScopes, s.logAppend, s.logRead, s.outboxAck,
		s.shardTouch, s.shardLen, s.shardSweep, s.shardDrop, s.scopeFinish, s.counts, s.ping}
}

// scriptList is every script the engine runs, for package keyspace's
// Scripts.
func scriptList() []keyspace.Script {
	all := engineScripts().all()
	out := make([]keyspace.Script, len(all))
	for i, s := range all {
		out[i] = s
	}
	return out
}

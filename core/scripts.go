package core

import (
	"strings"
	"sync"
)

//go:generate go run ./internal/genscripts

// Script is one Lua script with its SHA1, as EVALSHA names it. Its source
// is the texts of its files as go generate ./core writes them
// (scripts_gen.go), joined when it is first sent whole: an engine sends
// scripts by their SHA1, and their sources only after a NOSCRIPT.
type Script struct {
	name  string
	sha   string
	parts []string

	once   sync.Once
	source string
}

// Name returns the name the engine's tools know the script by: its file's
// name without ".lua", but "beat" for heartbeat_steady.lua and "heartbeat"
// for heartbeat_full.lua, the names tests and tools look the two up by.
func (s *Script) Name() string { return s.name }

// Source returns the full source sent by EVAL.
func (s *Script) Source() string {
	s.once.Do(func() { s.source = strings.Join(s.parts, "") })
	return s.source
}

// SHA returns the hex SHA1 of the source, as EVALSHA takes it.
func (s *Script) SHA() string { return s.sha }

// scriptSet holds every script of the engine. Scripts that share helpers get
// recordlib.lua, userlib.lua (and scopelib.lua) prepended, so each is
// self-contained; the steady beat gets recordlib.lua alone, because whatever
// a prepended file defines, the script builds on every call. Which files a
// script joins is written twice, here and in core/internal/luabuild, which
// computes the SHA1s: TestScriptSources holds the two together.
type scriptSet struct {
	beat, heartbeat, login, logout, manual, status, sweepUsers, unlock *Script
	touch, leave, count, members, active, sweepScopes                  *Script
	logAppend, logRead, outboxAck                                      *Script
	shardTouch, shardLen, shardSweep, shardDrop, scopeFinish           *Script
	counts, ping                                                       *Script

	bySHA map[string]*Script
}

// newScript returns the script named name whose SHA1 is sha and whose
// source is parts joined (parts<Name> of scripts_gen.go).
func newScript(name, sha string, parts ...string) *Script {
	return &Script{name: name, sha: sha, parts: parts}
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
	s.bySHA = map[string]*Script{}
	for _, sc := range s.all() {
		s.bySHA[sc.sha] = sc
	}
	return s
})

func (s scriptSet) all() []*Script {
	return []*Script{s.beat, s.heartbeat, s.login, s.logout, s.manual, s.status, s.sweepUsers, s.unlock,
		s.touch, s.leave, s.count, s.members, s.active, s.sweepScopes, s.logAppend, s.logRead, s.outboxAck,
		s.shardTouch, s.shardLen, s.shardSweep, s.shardDrop, s.scopeFinish, s.counts, s.ping}
}

// Scripts returns every script the engine runs, for tools that preload them
// (SCRIPT LOAD) or inspect them.
func Scripts() []*Script { return engineScripts().all() }

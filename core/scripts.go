package core

import (
	"strings"
	"sync"

	"github.com/presencekit/presence/internal/luascripts"
)

//go:generate go run ./internal/genscripts

// script is one Lua script of the engine, as luascripts holds it (go
// generate ./core writes internal/luascripts/scripts_gen.go): its source
// is the texts of its files, joined when it is first sent whole, since an
// engine sends scripts by their SHA1, and their sources only after a
// NOSCRIPT.
type script struct {
	name  string
	sha   string
	parts []string

	once   sync.Once
	source string
}

// Name returns the name the engine's tools know the script by
// (luascripts.Script.Name).
func (s *script) Name() string { return s.name }

// Source returns the full source sent by EVAL.
func (s *script) Source() string {
	s.once.Do(func() { s.source = strings.Join(s.parts, "") })
	return s.source
}

// SHA returns the hex SHA1 of the source, as EVALSHA takes it.
func (s *script) SHA() string { return s.sha }

// scriptSet holds every script of the engine. Scripts that share helpers get
// recordlib.lua, userlib.lua (and scopelib.lua) prepended, so each is
// self-contained; the steady beat gets recordlib.lua alone, because whatever
// a prepended file defines, the script builds on every call. Which files a
// script joins is written once, in core/internal/luabuild, which computes
// the SHA1s; TestScriptSources checks each SHA1 against its source.
type scriptSet struct {
	beat, heartbeat, login, logout, manual, status, sweepUsers, unlock *script
	touch, leave, count, members, active, sweepScopes                  *script
	logAppend, logRead, outboxAck                                      *script
	shardTouch, shardLen, shardSweep, shardDrop, scopeFinish           *script
	counts, ping                                                       *script

	bySHA map[string]*script
}

// newScript returns the engine's copy of the generated script s.
func newScript(s luascripts.Script) *script {
	return &script{name: s.Name, sha: s.SHA, parts: s.Parts}
}

// engineScripts returns every script of the engine. They are built once per
// process, and are read-only from then on, so that configuring an engine
// costs nothing for them.
var engineScripts = sync.OnceValue(func() *scriptSet {
	s := &scriptSet{
		beat:        newScript(luascripts.HeartbeatSteady),
		heartbeat:   newScript(luascripts.HeartbeatFull),
		login:       newScript(luascripts.Login),
		logout:      newScript(luascripts.Logout),
		manual:      newScript(luascripts.Manual),
		status:      newScript(luascripts.Status),
		sweepUsers:  newScript(luascripts.SweepUsers),
		unlock:      newScript(luascripts.Unlock),
		touch:       newScript(luascripts.Touch),
		leave:       newScript(luascripts.Leave),
		count:       newScript(luascripts.Count),
		members:     newScript(luascripts.Members),
		active:      newScript(luascripts.Active),
		sweepScopes: newScript(luascripts.SweepScopes),
		logAppend:   newScript(luascripts.LogAppend),
		logRead:     newScript(luascripts.LogRead),
		outboxAck:   newScript(luascripts.OutboxAck),
		shardTouch:  newScript(luascripts.ShardTouch),
		shardLen:    newScript(luascripts.ShardLen),
		shardSweep:  newScript(luascripts.ShardSweep),
		shardDrop:   newScript(luascripts.ShardDrop),
		scopeFinish: newScript(luascripts.ScopeFinish),
		counts:      newScript(luascripts.Counts),
		ping:        newScript(luascripts.Ping),
	}
	s.bySHA = map[string]*script{}
	for _, sc := range s.all() {
		s.bySHA[sc.sha] = sc
	}
	return s
})

func (s scriptSet) all() []*script {
	return []*script{s.beat, s.heartbeat, s.login, s.logout, s.manual, s.status, s.sweepUsers, s.unlock,
		s.touch, s.leave, s.count, s.members, s.active, s.sweepScopes, s.logAppend, s.logRead, s.outboxAck,
		s.shardTouch, s.shardLen, s.shardSweep, s.shardDrop, s.scopeFinish, s.counts, s.ping}
}

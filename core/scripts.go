package core

import (
	"crypto/sha1"
	"embed"
	"encoding/hex"

	"github.com/presencekit/presence/core/internal/luabuild"
)

//go:embed lua/*.lua
var luaFiles embed.FS

// Script is one Lua script with its SHA1, as EVALSHA names it.
type Script struct {
	name   string
	source string
	sha    string
}

// Name returns the name the engine's tools know the script by: its file's
// name without ".lua", but "beat" for heartbeat_steady.lua and "heartbeat"
// for heartbeat_full.lua, the names tests and tools look the two up by.
func (s *Script) Name() string { return s.name }

// Source returns the full source sent by EVAL.
func (s *Script) Source() string { return s.source }

// SHA returns the hex SHA1 of the source, as EVALSHA takes it.
func (s *Script) SHA() string { return s.sha }

// scriptSet holds every script of the engine. Scripts that share helpers get
// recordlib.lua, userlib.lua (and scopelib.lua) prepended, so each is
// self-contained; the steady beat gets recordlib.lua alone, because whatever
// a prepended file defines, the script builds on every call.
type scriptSet struct {
	beat, heartbeat, login, logout, manual, status, sweepUsers, unlock *Script
	touch, leave, count, members, active, sweepScopes                  *Script
	logAppend, logRead, outboxAck                                      *Script
	shardTouch, shardLen, shardSweep, shardDrop, scopeFinish           *Script
	counts, ping                                                       *Script

	bySHA map[string]*Script
}

// loadScript joins the helper files libs and the script file, each named
// without ".lua", into one script named after its file, its named
// constants written as numbers (luabuild.Inline).
func loadScript(file string, libs ...string) *Script {
	src := luabuild.Inline(joinLua(append(libs, file)...))
	sum := sha1.Sum([]byte(src))
	return &Script{name: file, source: src, sha: hex.EncodeToString(sum[:])}
}

// joinLua joins the embedded files, each named without ".lua".
func joinLua(files ...string) string {
	var src []byte
	for _, f := range files {
		b, err := luaFiles.ReadFile("lua/" + f + ".lua")
		if err != nil {
			panic("presence: missing embedded script " + f) // the embed pattern guarantees it
		}
		src = append(src, b...)
		src = append(src, '\n')
	}
	return string(src)
}

func loadScripts() scriptSet {
	user := []string{"recordlib", "userlib"}
	scope := []string{"recordlib", "userlib", "scopelib"}
	s := scriptSet{
		beat:        loadScript("heartbeat_steady", "recordlib"),
		heartbeat:   loadScript("heartbeat_full", user...),
		login:       loadScript("login", user...),
		logout:      loadScript("logout", user...),
		manual:      loadScript("manual", user...),
		status:      loadScript("status", user...),
		sweepUsers:  loadScript("sweep_users", user...),
		unlock:      loadScript("unlock"),
		touch:       loadScript("touch", scope...),
		leave:       loadScript("leave", scope...),
		count:       loadScript("count", scope...),
		members:     loadScript("members", scope...),
		active:      loadScript("active", scope...),
		sweepScopes: loadScript("sweep_scopes", scope...),
		logAppend:   loadScript("log_append"),
		logRead:     loadScript("log_read"),
		outboxAck:   loadScript("outbox_ack"),
		shardTouch:  loadScript("shard_touch", user...),
		shardLen:    loadScript("shard_len"),
		shardSweep:  loadScript("shard_sweep", scope...),
		shardDrop:   loadScript("shard_drop"),
		scopeFinish: loadScript("scope_finish", scope...),
		counts:      loadScript("counts"),
		ping:        loadScript("ping"),
	}
	// the names the heartbeat's two scripts are known by (Name)
	s.beat.name, s.heartbeat.name = "beat", "heartbeat"
	s.bySHA = map[string]*Script{}
	for _, sc := range s.all() {
		s.bySHA[sc.sha] = sc
	}
	return s
}

func (s scriptSet) all() []*Script {
	return []*Script{s.beat, s.heartbeat, s.login, s.logout, s.manual, s.status, s.sweepUsers, s.unlock,
		s.touch, s.leave, s.count, s.members, s.active, s.sweepScopes, s.logAppend, s.logRead, s.outboxAck,
		s.shardTouch, s.shardLen, s.shardSweep, s.shardDrop, s.scopeFinish, s.counts, s.ping}
}

// Scripts returns every script the engine runs, for tools that preload them
// (SCRIPT LOAD) or inspect them.
func Scripts() []*Script { return loadScripts().all() }

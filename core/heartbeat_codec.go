package core

import (
	"errors"
	"slices"
	"strconv"
	"strings"
)

// steadyHead is the number of lua/heartbeat_steady.lua's arguments before
// its beats: now, the page prefix, the settings, ARG_LEFT.
const steadyHead = 3 + len(settings{}.beatParams)

// appendSteadyHead appends the arguments of lua/heartbeat_steady.lua for
// bucket b at now before its beats to args; places are the beats'
// positions in their run, by which an implicit login's token is seed.j
// (appendBeat).
func (p *planner) appendSteadyHead(args []string, now string, b uint32, seed string, places []int) []string {
	args = append(args, now, p.settings.users[b].pagePrefix)
	return append(append(args, p.settings.beatParams[:]...), p.leftArg(b, seed, places))
}

// steadyFields is the number of a beat's fields in lua/heartbeat_steady.lua
// (BEAT_FIELDS).
const steadyFields = 6

// leftArg returns lua/heartbeat_steady.lua's ARG_LEFT in bucket b, for the
// token seed seed ("" none) and the positions of the call's beats in their
// run (nil: each 0).
func (p *planner) leftArg(b uint32, seed string, places []int) string {
	st, seen := p.settings, 0
	if p.seen.has(b) {
		seen = 1
	}
	if seed == "" {
		return st.leftNone[seen]
	}
	if !slices.ContainsFunc(places, func(j int) bool { return j != 0 }) {
		return st.left[seen][0] + seed + st.left[seen][1]
	}
	var s strings.Builder
	s.WriteString(st.left[seen][0])
	s.WriteString(seed)
	for _, j := range places {
		s.WriteByte(',')
		s.WriteString(strconv.Itoa(j))
	}
	s.WriteString(st.left[seen][1])
	return s.String()
}

// appendSteady appends one heartbeat's fields (lua/heartbeat_steady.lua),
// in bucket b, to args.
func (p *planner) appendSteady(args []string, b uint32, hb Heartbeat) []string {
	extra := kindCodes[hb.Kind]
	if meta, at := beatExtras(hb); hb.Gateway != "" || meta != "" || at != "" {
		extra += hb.Gateway + unitSep + at + unitSep + meta
	}
	return append(args, hb.User, hb.Device, hb.Token, p.hints.page(b, hb.User), steadyFlags[flagBits(hb.Active, hb.Background)], extra)
}

// steadyFlags are a steady beat's flags, 1 if active + 2 if in the
// background, as the script takes them.
var steadyFlags = [4]string{"0", "1", "2", "3"}

func flagBits(active, background bool) int {
	n := 0
	if active {
		n = 1
	}
	if background {
		n += 2
	}
	return n
}

// appendBeat appends one heartbeat's fields (lua/heartbeat_full.lua) to args:
// a beat without a token, at position j of its run, carries seed.j, the
// token its implicit login issues. It is formatted here, for the beats the
// steady script left, and not for those it applied.
func (p *planner) appendBeat(args []string, hb Heartbeat, seed string, j int) []string {
	meta, at := beatExtras(hb)
	issue := ""
	if hb.Token == "" {
		issue = seed + "." + strconv.Itoa(j)
	}
	return append(args, hb.User, hb.Device, kindCodes[hb.Kind], hb.Gateway, hb.Token,
		flag(hb.Active), flag(hb.Background), p.settings.intervalArgs[hb.Kind], meta, at, issue)
}

// beatExtras returns a beat's metadata ("" keep, "=" .. encoded to set) and
// client time ("" none) as the scripts take them.
func beatExtras(hb Heartbeat) (meta, at string) {
	if hb.Meta != nil {
		meta = "=" + encodeMeta(hb.Meta)
	}
	if !hb.At.IsZero() {
		at = itoa(hb.At.UnixMilli())
	}
	return meta, at
}

// kindCodes are the kinds as scripts take them.
var kindCodes = [len(kindNames)]string{"0", "1", "2", "3", "4"}

// decodeSteady reads a reply of lua/heartbeat_steady.lua in bucket b into
// tokens, one for each beat offered: the token in force, or "" for a beat
// the script left. The reply is one string, the tokens joined by unitSep,
// then, when the script read the bucket's page geometry, recordSep and the
// geometry, which the page hints learn; or, when the script left a beat,
// {that string, now, results, lost}: decided is then {now, results, lost}, what
// lua/heartbeat_full.lua returns (decodeBeats) for the first beats left,
// in order, and else NilValue.
func (p *planner) decodeSteady(v Value, b uint32, tokens []string) (decided Value, err error) {
	if v.Kind == ValueArray {
		items, err := v.asArray(4)
		if err != nil {
			return decided, replyErr("steady heartbeat: %v", err)
		}
		v, decided = items[0], Value{Kind: ValueArray, Array: items[1:]}
	}
	return decided, p.decodeTokens(v, b, tokens)
}

// decodeTokens reads the string of a reply of lua/heartbeat_steady.lua
// (decodeSteady).
func (p *planner) decodeTokens(v Value, b uint32, tokens []string) error {
	s, err := v.asString()
	if err != nil {
		return replyErr("steady heartbeat: %v", err)
	}
	if i := strings.IndexByte(s, recordSep[0]); i >= 0 {
		level, split, ok := strings.Cut(s[i+1:], unitSep)
		l, err1 := strconv.ParseUint(level, 10, 6)
		n, err2 := strconv.ParseUint(split, 10, 32)
		if !ok || err1 != nil || err2 != nil {
			return replyErr("steady heartbeat: page geometry %q", s[i+1:])
		}
		p.hints.learn(b, uint(l), uint32(n))
		s = s[:i]
	}
	if len(tokens) == 0 {
		return nil
	}
	if len(s) >= len(tokens) {
		p.seen.mark(b) // a token: a beat applied to a record, so the bucket has meta
	}
	last := len(tokens) - 1
	for j := range last {
		i := strings.IndexByte(s, unitSep[0])
		if i < 0 {
			return replyErr("steady heartbeat: %d tokens for %d beats", j+1, len(tokens))
		}
		tokens[j], s = s[:i], s[i+1:]
	}
	if strings.IndexByte(s, unitSep[0]) >= 0 {
		return replyErr("steady heartbeat: more tokens than the %d beats", len(tokens))
	}
	tokens[last] = s
	return nil
}

// decodeBeats reads a reply of lua/heartbeat_full.lua in bucket b, {now,
// results, lost}, for the beats at positions run into acks, and the loss
// it found into m.
func (p *planner) decodeBeats(m *machine, b uint32, v Value, beats []Heartbeat, run []int, acks []Ack, ids []string) error {
	now, rest, err := splitReply(v, 2)
	if err != nil {
		return err
	}
	if err := p.found(m, b, rest[1], now); err != nil {
		return err
	}
	results, err := rest[0].asArray(6 * len(run))
	if err != nil {
		return err
	}
	for j, i := range run {
		r := results[6*j : 6*j+6]
		code, err1 := r[0].asString()
		token, err2 := r[1].asString()
		from, err3 := r[2].asInt()
		to, err4 := r[3].asInt()
		id, err5 := r[4].asString()
		reassert, err6 := r[5].asString()
		if err := errors.Join(err1, err2, err3, err4, err5, err6); err != nil {
			return replyErr("heartbeat result %d: %v", j, err)
		}
		if acks[i].Err = codeErr(code); acks[i].Err != nil {
			continue
		}
		acks[i].Token, acks[i].Reassert = token, reassert == "1"
		if from >= 0 {
			if !inRange(from, len(statusNames)) || !inRange(to, len(statusNames)) {
				return replyErr("heartbeat result %d: status %d→%d", j, from, to)
			}
			acks[i].Changes = []Change{{User: beats[i].User, From: Status(from), To: Status(to), At: msTime(now)}}
			ids[i] = id
		}
	}
	return nil
}

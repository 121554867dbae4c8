package core

import "time"

// The plans of the change log and of the readiness probe.

// LogPage is one page of the change log, the outcome of a ChangeLogAfter
// plan: the entries, and whether entries were trimmed before them (see
// Engine.ChangeLogAfter).
type LogPage struct {
	Entries []LoggedChange
	Gap     bool
}

// ChangeLogAfter plans Engine.ChangeLogAfter (the change log's scripts
// read no clock: now is unused).
func (pl *Planner) changeLogAfter(now, after string, limit int) *plan[LogPage] {
	p := pl.p
	plan := newPlan[LogPage](p, now)
	m := &plan.m
	if p.settings.changeLog == 0 {
		m.fail(ErrUnsupported)
		return plan
	}
	if limit < 1 || limit > MaxPage {
		m.fail(invalid("limit", "must be 1 to %d, got %d", MaxPage, limit))
		return plan
	}
	if after != "" && !validStreamID(after) {
		m.fail(invalid("after", "%q is not a change log ID", after))
		return plan
	}
	call := Call{SHA: p.scripts.logRead.sha, Keys: []string{p.settings.keys.logKey()}, Args: []string{after, itoa(int64(limit))}}
	m.settle(&round{op: "change log", calls: []Call{call}, next: func(vals []Value) (*round, error) {
		entries, gap, err := decodeLogPage(vals[0], after)
		if err != nil {
			return nil, err
		}
		plan.out = LogPage{Entries: entries, Gap: gap}
		return nil, nil
	}}, nil)
	return plan
}

// AppendLog plans appending changes and kicks to the change log, as every
// plan that publishes does before it ends, for a driver that publishes
// events of its own making. It ends at once, appending nothing, without a
// change log or events; a failed append is its error.
func (pl *Planner) appendLog(changes []Change, kicks []Kick) *plan[struct{}] {
	p := pl.p
	plan := newPlan[struct{}](p, "")
	if p.settings.changeLog == 0 || len(changes)+len(kicks) == 0 {
		plan.m.fail(nil)
		return plan
	}
	calls, costs := p.logAppendCalls(changes, kicks, nil, make([]string, len(changes)+len(kicks)))
	plan.m.settle(&round{op: "change log", calls: calls, costs: costs,
		next: func([]Value) (*round, error) { return nil, nil }}, nil)
	return plan
}

// Ping plans Engine.Ping: one key-less call (a cluster driver sends it to
// any node) whose outcome is the server's clock.
func (pl *Planner) ping() *plan[time.Time] {
	p := pl.p
	plan := newPlan[time.Time](p, "")
	plan.m.settle(&round{op: "ping", calls: []Call{{SHA: p.scripts.ping.sha}}, next: func(vals []Value) (*round, error) {
		ms, err := vals[0].asInt()
		if err != nil {
			return nil, err
		}
		plan.out = msTime(ms)
		return nil, nil
	}}, nil)
	return plan
}

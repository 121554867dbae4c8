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

// logReadPlan is a ReadChangeLog's plan: lua/log_read.lua, which reads no
// clock.
type logReadPlan struct {
	plan  plan[LogPage]
	after string
}

func (p *planner) changeLogAfter(now, after string, limit int) *plan[LogPage] {
	lp := &logReadPlan{plan: plan[LogPage]{m: machine{scripts: &p.scripts, now: now}}, after: after}
	m := &lp.plan.m
	m.body = lp
	if p.settings.changeLog == 0 {
		m.fail(ErrUnsupported)
		return &lp.plan
	}
	if limit < 1 || limit > MaxPage {
		m.fail(invalid("limit", "must be 1 to %d, got %d", MaxPage, limit))
		return &lp.plan
	}
	if after != "" && !validStreamID(after) {
		m.fail(invalid("after", "%q is not a change log ID", after))
		return &lp.plan
	}
	m.settle(m.one("change log", Call{SHA: p.scripts.logRead.sha, Keys: []string{p.settings.keys.logKey()},
		Args: []string{after, itoa(int64(limit))}}), nil)
	return &lp.plan
}

func (lp *logReadPlan) next(vals []Value) (*round, error) {
	entries, gap, err := decodeLogPage(vals[0], lp.after)
	if err != nil {
		return nil, err
	}
	lp.plan.out = LogPage{Entries: entries, Gap: gap}
	return nil, nil
}

// unitPlan is the plan of an operation whose calls' values tell nothing
// but that they succeeded: AppendLog, AckEvents.
type unitPlan struct {
	plan plan[struct{}]
}

func (*unitPlan) next([]Value) (*round, error) { return nil, nil }

// newUnitPlan returns a unitPlan at now of round r, or ended at once when
// r is nil.
func (p *planner) newUnitPlan(now string, r *round) *plan[struct{}] {
	up := &unitPlan{plan: plan[struct{}]{m: machine{scripts: &p.scripts, now: now}}}
	up.plan.m.start(up, r, nil)
	return &up.plan
}

// appendLog returns the plan of appending changes and kicks to the change
// log, as every plan that publishes does before it ends, for a driver that
// publishes events of its own making. It ends at once, appending nothing,
// without a change log or events; a failed append is its error.
func (p *planner) appendLog(changes []Change, kicks []Kick) *plan[struct{}] {
	if p.settings.changeLog == 0 || len(changes)+len(kicks) == 0 {
		return p.newUnitPlan("", nil)
	}
	calls, costs := p.logAppendCalls(changes, kicks, nil, make([]string, len(changes)+len(kicks)))
	return p.newUnitPlan("", &round{op: "change log", calls: calls, costs: costs})
}

// pingPlan is a Ping's plan: one key-less call (a cluster driver sends it
// to any node) whose outcome is the server's clock.
type pingPlan struct {
	plan plan[time.Time]
}

func (p *planner) ping() *plan[time.Time] {
	pp := &pingPlan{plan: plan[time.Time]{m: machine{scripts: &p.scripts}}}
	pp.plan.m.start(pp, pp.plan.m.one("ping", Call{SHA: p.scripts.ping.sha}), nil)
	return &pp.plan
}

func (pp *pingPlan) next(vals []Value) (*round, error) {
	ms, err := vals[0].asInt()
	if err != nil {
		return nil, err
	}
	pp.plan.out = msTime(ms)
	return nil, nil
}

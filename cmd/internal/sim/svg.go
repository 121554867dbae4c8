package sim

import (
	"fmt"
	"html"
	"io"
	"math"
	"strings"

	"github.com/presencekit/presence/core"
)

// series is one line of a chart panel.
type series struct {
	name  string
	color string
	dash  bool
	ys    []float64
}

// panel is one chart of the SVG.
type panel struct {
	title  string
	series []series
}

const (
	svgW      = 1000.0
	panelH    = 220.0
	marginL   = 70.0
	marginR   = 180.0
	marginTop = 50.0
	gap       = 60.0
)

// WriteSVG writes a chart of the run, engine against truth over time:
// users per status, video viewers, and published events against net
// changes of the truth. It is plain SVG that a browser opens.
func (r *Result) WriteSVG(out io.Writer) error {
	colors := map[core.Status]string{core.StatusOnline: "#2a9d3f", core.StatusAway: "#e0a100",
		core.StatusDND: "#c0392b", core.StatusPushOnline: "#2f6fd0"}
	var users panel
	users.title = "users per status — solid: engine (published, Online), dashed: truth"
	for _, s := range statusCols {
		truth, eng := series{name: s.String() + " truth", color: colors[s], dash: true}, series{name: s.String() + " engine", color: colors[s]}
		for _, row := range r.Rows {
			truth.ys = append(truth.ys, float64(row.Truth[s]))
			eng.ys = append(eng.ys, float64(row.Engine[s]))
		}
		users.series = append(users.series, eng, truth)
	}
	viewers := panel{title: "video viewers (sum over videos) — solid: engine Count (compact, as of the last sweep), dashed: truth now"}
	vt, ve := series{name: "truth", color: "#555", dash: true}, series{name: "engine", color: "#8e44ad"}
	for _, row := range r.Rows {
		vt.ys = append(vt.ys, float64(row.ViewersTruth))
		ve.ys = append(ve.ys, float64(row.ViewersEngine))
	}
	viewers.series = []series{ve, vt}
	events := panel{title: "per sweep interval — published events, net changes of the truth, users with publication pending"}
	ev, tc, pend := series{name: "events", color: "#d35400"}, series{name: "truth changes", color: "#555", dash: true},
		series{name: "pending", color: "#16a085"}
	prevE, prevT := 0, 0
	for _, row := range r.Rows {
		ev.ys = append(ev.ys, float64(row.Events-prevE))
		tc.ys = append(tc.ys, float64(row.TruthChanges-prevT))
		pend.ys = append(pend.ys, float64(row.Pending))
		prevE, prevT = row.Events, row.TruthChanges
	}
	events.series = []series{ev, tc, pend}
	panels := []panel{users, viewers, events}

	h := marginTop + float64(len(panels))*(panelH+gap) + 20
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f" font-family="sans-serif" font-size="12">`+"\n", svgW, h, svgW, h)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	c := r.Config
	a := r.Agreement()
	fmt.Fprintf(&b, `<text x="%.0f" y="22" font-size="16" font-weight="bold">%s</text>`+"\n", marginL,
		html.EscapeString(fmt.Sprintf("presence sim: %d users, %d edges, %v, seed %d, %s engine", c.Users, c.Edges, c.Duration, c.Seed, c.Engine)))
	fmt.Fprintf(&b, `<text x="%.0f" y="40" fill="#444">%s</text>`+"\n", marginL, html.EscapeString(fmt.Sprintf(
		"statuses exact %d/%d · unsettled %d · video counts right %d/%d · disagreements %d · wall %.1fs",
		a.StatusSamples-a.StatusMismatch, a.StatusSamples, a.Unsettled, a.CountChecks-a.CountMismatch, a.CountChecks,
		r.Stats.Violations, r.Wall.Seconds())))
	var tmax float64
	if n := len(r.Rows); n > 0 {
		tmax = r.Rows[n-1].T.Minutes()
	}
	for i, p := range panels {
		top := marginTop + 20 + float64(i)*(panelH+gap)
		r.drawPanel(&b, p, top, tmax)
	}
	b.WriteString("</svg>\n")
	_, err := io.WriteString(out, b.String())
	return err
}

func (r *Result) drawPanel(b *strings.Builder, p panel, top, tmax float64) {
	plotW := svgW - marginL - marginR
	ymax := 1.0
	for _, s := range p.series {
		for _, y := range s.ys {
			ymax = math.Max(ymax, y)
		}
	}
	step := niceStep(ymax / 4)
	ymax = math.Ceil(ymax/step) * step
	x := func(t float64) float64 {
		if tmax == 0 {
			return marginL
		}
		return marginL + t/tmax*plotW
	}
	y := func(v float64) float64 { return top + panelH - v/ymax*panelH }
	fmt.Fprintf(b, `<text x="%.0f" y="%.0f" font-weight="bold">%s</text>`+"\n", marginL, top-8, html.EscapeString(p.title))
	if r.CrashAt > 0 && tmax > 0 {
		for _, m := range []struct {
			at    float64
			label string
			y     float64
		}{{r.CrashAt.Minutes(), "an edge crashes", top + panelH - 4}, {r.RestartAt.Minutes(), "it is back", top + 12}} {
			if m.at <= tmax {
				fmt.Fprintf(b, `<line x1="%.1f" x2="%.1f" y1="%.0f" y2="%.0f" stroke="#c0392b" stroke-dasharray="2,3"/><text x="%.1f" y="%.0f" fill="#c0392b" font-size="10">%s</text>`+"\n",
					x(m.at), x(m.at), top, top+panelH, x(m.at)+3, m.y, m.label)
			}
		}
	}
	fmt.Fprintf(b, `<rect x="%.0f" y="%.0f" width="%.0f" height="%.0f" fill="none" stroke="#999"/>`+"\n", marginL, top, plotW, panelH)
	for v := 0.0; v <= ymax+step/2; v += step {
		fmt.Fprintf(b, `<line x1="%.0f" x2="%.0f" y1="%.1f" y2="%.1f" stroke="#eee"/><text x="%.0f" y="%.1f" text-anchor="end" fill="#555">%s</text>`+"\n",
			marginL, marginL+plotW, y(v), y(v), marginL-6, y(v)+4, fmtNum(v))
	}
	tstep := niceStep(math.Max(tmax, 1) / 6)
	for t := 0.0; t <= tmax+tstep/2; t += tstep {
		fmt.Fprintf(b, `<text x="%.1f" y="%.0f" text-anchor="middle" fill="#555">%sm</text>`+"\n", x(t), top+panelH+16, fmtNum(t))
	}
	for i, s := range p.series {
		var pts []string
		for j, v := range s.ys {
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(r.Rows[j].T.Minutes()), y(v)))
		}
		dash := ""
		if s.dash {
			dash = ` stroke-dasharray="5,4"`
		}
		fmt.Fprintf(b, `<polyline fill="none" stroke="%s" stroke-width="1.6"%s points="%s"/>`+"\n", s.color, dash, strings.Join(pts, " "))
		ly := top + 14 + float64(i)*16
		fmt.Fprintf(b, `<line x1="%.0f" x2="%.0f" y1="%.0f" y2="%.0f" stroke="%s" stroke-width="2"%s/><text x="%.0f" y="%.0f">%s</text>`+"\n",
			marginL+plotW+12, marginL+plotW+36, ly-4, ly-4, s.color, dash, marginL+plotW+42, ly, html.EscapeString(s.name))
	}
}

// niceStep rounds x up to 1, 2 or 5 times a power of ten.
func niceStep(x float64) float64 {
	if x <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(x)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= x {
			return m * p
		}
	}
	return 10 * p
}

func fmtNum(v float64) string {
	if v == math.Trunc(v) {
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.1f", v)
}

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
	name   string
	color  string
	dashed bool
	values []float64
}

// panel is one chart of the SVG.
type panel struct {
	title  string
	series []series
}

const (
	svgWidth    = 1000.0
	panelHeight = 220.0
	marginLeft  = 70.0
	marginRight = 180.0
	marginTop   = 50.0
	panelGap    = 60.0
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
		truth, eng := series{name: s.String() + " truth", color: colors[s], dashed: true}, series{name: s.String() + " engine", color: colors[s]}
		for _, row := range r.Rows {
			truth.values = append(truth.values, float64(row.Truth[s]))
			eng.values = append(eng.values, float64(row.Engine[s]))
		}
		users.series = append(users.series, eng, truth)
	}
	viewers := panel{title: "video viewers (sum over videos) — solid: engine Count (compact, as of the last sweep), dashed: truth now"}
	viewersTruth, viewersEngine := series{name: "truth", color: "#555", dashed: true}, series{name: "engine", color: "#8e44ad"}
	for _, row := range r.Rows {
		viewersTruth.values = append(viewersTruth.values, float64(row.ViewersTruth))
		viewersEngine.values = append(viewersEngine.values, float64(row.ViewersEngine))
	}
	viewers.series = []series{viewersEngine, viewersTruth}
	events := panel{title: "per sweep interval — published events, net changes of the truth, users with publication pending"}
	published, truthChanges, pending := series{name: "events", color: "#d35400"}, series{name: "truth changes", color: "#555", dashed: true},
		series{name: "pending", color: "#16a085"}
	prevEvents, prevTruthChanges := 0, 0
	for _, row := range r.Rows {
		published.values = append(published.values, float64(row.Events-prevEvents))
		truthChanges.values = append(truthChanges.values, float64(row.TruthChanges-prevTruthChanges))
		pending.values = append(pending.values, float64(row.Pending))
		prevEvents, prevTruthChanges = row.Events, row.TruthChanges
	}
	events.series = []series{published, truthChanges, pending}
	panels := []panel{users, viewers, events}

	height := marginTop + float64(len(panels))*(panelHeight+panelGap) + 20
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f" font-family="sans-serif" font-size="12">`+"\n", svgWidth, height, svgWidth, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	cfg := r.Config
	agreement := r.Agreement()
	fmt.Fprintf(&b, `<text x="%.0f" y="22" font-size="16" font-weight="bold">%s</text>`+"\n", marginLeft,
		html.EscapeString(fmt.Sprintf("presence sim: %d users, %d edges, %v, seed %d, %s engine", cfg.Users, cfg.Edges, cfg.Duration, cfg.Seed, cfg.Engine)))
	fmt.Fprintf(&b, `<text x="%.0f" y="40" fill="#444">%s</text>`+"\n", marginLeft, html.EscapeString(fmt.Sprintf(
		"statuses exact %d/%d · unsettled %d · video counts right %d/%d · disagreements %d · wall %.1fs",
		agreement.StatusSamples-agreement.StatusMismatch, agreement.StatusSamples, agreement.Unsettled, agreement.CountChecks-agreement.CountMismatch, agreement.CountChecks,
		r.Stats.Violations, r.Wall.Seconds())))
	var lastMinute float64
	if n := len(r.Rows); n > 0 {
		lastMinute = r.Rows[n-1].Elapsed.Minutes()
	}
	for i, p := range panels {
		top := marginTop + 20 + float64(i)*(panelHeight+panelGap)
		r.drawPanel(&b, p, top, lastMinute)
	}
	b.WriteString("</svg>\n")
	_, err := io.WriteString(out, b.String())
	return err
}

func (r *Result) drawPanel(b *strings.Builder, p panel, top, lastMinute float64) {
	plotWidth := svgWidth - marginLeft - marginRight
	ymax := 1.0
	for _, s := range p.series {
		for _, y := range s.values {
			ymax = math.Max(ymax, y)
		}
	}
	step := niceStep(ymax / 4)
	ymax = math.Ceil(ymax/step) * step
	x := func(t float64) float64 {
		if lastMinute == 0 {
			return marginLeft
		}
		return marginLeft + t/lastMinute*plotWidth
	}
	y := func(v float64) float64 { return top + panelHeight - v/ymax*panelHeight }
	fmt.Fprintf(b, `<text x="%.0f" y="%.0f" font-weight="bold">%s</text>`+"\n", marginLeft, top-8, html.EscapeString(p.title))
	if r.CrashAt > 0 && lastMinute > 0 {
		for _, m := range []struct {
			at    float64
			label string
			y     float64
		}{{r.CrashAt.Minutes(), "an edge crashes", top + panelHeight - 4}, {r.RestartAt.Minutes(), "it is back", top + 12}} {
			if m.at <= lastMinute {
				fmt.Fprintf(b, `<line x1="%.1f" x2="%.1f" y1="%.0f" y2="%.0f" stroke="#c0392b" stroke-dasharray="2,3"/><text x="%.1f" y="%.0f" fill="#c0392b" font-size="10">%s</text>`+"\n",
					x(m.at), x(m.at), top, top+panelHeight, x(m.at)+3, m.y, m.label)
			}
		}
	}
	fmt.Fprintf(b, `<rect x="%.0f" y="%.0f" width="%.0f" height="%.0f" fill="none" stroke="#999"/>`+"\n", marginLeft, top, plotWidth, panelHeight)
	for v := 0.0; v <= ymax+step/2; v += step {
		fmt.Fprintf(b, `<line x1="%.0f" x2="%.0f" y1="%.1f" y2="%.1f" stroke="#eee"/><text x="%.0f" y="%.1f" text-anchor="end" fill="#555">%s</text>`+"\n",
			marginLeft, marginLeft+plotWidth, y(v), y(v), marginLeft-6, y(v)+4, fmtNum(v))
	}
	tstep := niceStep(math.Max(lastMinute, 1) / 6)
	for t := 0.0; t <= lastMinute+tstep/2; t += tstep {
		fmt.Fprintf(b, `<text x="%.1f" y="%.0f" text-anchor="middle" fill="#555">%sm</text>`+"\n", x(t), top+panelHeight+16, fmtNum(t))
	}
	for i, s := range p.series {
		var pts []string
		for j, v := range s.values {
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(r.Rows[j].Elapsed.Minutes()), y(v)))
		}
		dash := ""
		if s.dashed {
			dash = ` stroke-dasharray="5,4"`
		}
		fmt.Fprintf(b, `<polyline fill="none" stroke="%s" stroke-width="1.6"%s points="%s"/>`+"\n", s.color, dash, strings.Join(pts, " "))
		legendY := top + 14 + float64(i)*16
		fmt.Fprintf(b, `<line x1="%.0f" x2="%.0f" y1="%.0f" y2="%.0f" stroke="%s" stroke-width="2"%s/><text x="%.0f" y="%.0f">%s</text>`+"\n",
			marginLeft+plotWidth+12, marginLeft+plotWidth+36, legendY-4, legendY-4, s.color, dash, marginLeft+plotWidth+42, legendY, html.EscapeString(s.name))
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

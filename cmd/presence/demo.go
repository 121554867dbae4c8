package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/presencekit/presence/core"
)

// runDemo is "presence demo": a scripted walk-through in virtual time.
func runDemo(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newCLI("demo", "presence demo [--redis redis://host:port] [flags]", `
Walks through presence semantics in virtual time and prints each step as a
table: a user's devices going ONLINE, AWAY, DND and OFFLINE with the changes
published, an exclusive login kicking a session, and a video's viewers
counted in each scope layout. Runs on an embedded miniredis unless --redis
is given; on a real server it writes its keys under a fresh prefix
(presence-demo-…) and does not delete them.`)
	url := fs.String("redis", "", "redis://host:port URL of a real server (default: an embedded miniredis)")
	viewers := fs.Int("viewers", 10000, "viewers of the video counter, 1 to 1000000")
	if err := fs.parse(args, stdout); err != nil {
		return err
	}
	if *viewers < 1 || *viewers > 1_000_000 {
		return usageError{msg: "--viewers must be 1 to 1000000"}
	}
	be, err := openBackend(ctx, *url)
	if err != nil {
		return err
	}
	defer be.close()
	start := time.Date(2026, 1, 1, 9, 0, 0, 0, time.UTC)
	clock := newVirtualClock(start, be.mini)
	prefix := "presence-demo-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	eng, err := core.New(be.store, core.Config{
		Prefix: prefix,
		Clock:  clock.Now,
		Classes: map[string]core.ScopeClass{
			"video-exact":   {Layout: core.LayoutExact, Window: 10 * time.Minute, SweepInterval: time.Minute},
			"video-compact": {Layout: core.LayoutCompact, Window: 10 * time.Minute, SweepInterval: time.Minute},
			"video-approx":  {Layout: core.LayoutApprox, Window: 10 * time.Minute, SweepInterval: time.Minute},
		},
	})
	if err != nil {
		return err
	}
	d := &demo{ctx: ctx, eng: eng, clock: clock, start: start, out: stdout}
	fmt.Fprintf(stdout, "presence demo on %s, in virtual time from %s (keys under %q)\n", be.desc, start.Format(time.DateTime), prefix)
	fmt.Fprintln(stdout, "defaults: heartbeat every 30 s (web, desktop) or 60 s (ios); AWAY after 5 min idle; OFFLINE published 15 s after a disconnect; changes within 1 s coalesce")
	if err := d.devices(); err != nil {
		return err
	}
	if err := d.kick(); err != nil {
		return err
	}
	return d.video(*viewers)
}

type demo struct {
	ctx   context.Context
	eng   *core.Engine
	clock *virtualClock
	start time.Time
	out   io.Writer
	tw    *tabwriter.Writer
}

func (d *demo) section(title string) {
	fmt.Fprintf(d.out, "\n== %s\n\n", title)
	d.tw = tabwriter.NewWriter(d.out, 2, 8, 2, ' ', 0)
	fmt.Fprintln(d.tw, "time\taction\tstatus\tdevices\tpublished")
}

func (d *demo) at(offset time.Duration) { d.clock.Set(d.start.Add(offset)) }

// row prints one step: the action, the user's status after it, and the
// changes it published.
func (d *demo) row(action, user string, changes []core.Change, err error) error {
	st, serr := d.eng.Status(d.ctx, user)
	if serr != nil {
		return serr
	}
	var devs []string
	for _, dev := range st.Devices {
		devs = append(devs, dev.ID+":"+dev.State.String())
	}
	var pub []string
	for _, c := range changes {
		pub = append(pub, c.User+" "+c.From.String()+"→"+c.To.String())
	}
	if err != nil {
		action += " → refused: " + err.Error()
	}
	status := st.Status.String()
	if st.Manual != core.ManualNone {
		status += " (manual " + st.Manual.String() + ")"
	}
	fmt.Fprintf(d.tw, "+%s\t%s\t%s\t%s\t%s\n", d.clock.t.Sub(d.start), action, status, strings.Join(devs, " "), strings.Join(pub, ", "))
	return nil
}

func (d *demo) sweep(user string) error {
	r, err := d.eng.SweepUsers(d.ctx)
	if err != nil {
		return err
	}
	return d.row("sweep", user, r.Changes, nil)
}

func (d *demo) devices() error {
	d.section("alice: three devices, ONLINE → AWAY → DND → OFFLINE")
	devices := []struct {
		id   string
		kind core.Kind
	}{{"web", core.KindWeb}, {"desktop", core.KindDesktop}, {"phone", core.KindIOS}}
	tokens := map[string]string{}
	d.at(0)
	for _, dev := range devices {
		res, err := d.eng.Login(d.ctx, core.Login{User: "alice", Device: dev.id, Kind: dev.kind, Gateway: "gw-1"})
		if err != nil {
			return err
		}
		tokens[dev.id] = res.Token
		if err := d.row("login "+dev.id, "alice", res.Changes, nil); err != nil {
			return err
		}
	}
	d.at(time.Second)
	if err := d.sweep("alice"); err != nil {
		return err
	}
	// Keep-alive heartbeats with no user activity: the devices stay alive
	// and turn AWAY five minutes after the logins.
	for t := 30 * time.Second; t <= 5*time.Minute; t += 30 * time.Second {
		d.at(t)
		for _, dev := range devices {
			if dev.kind == core.KindIOS && t%time.Minute != 0 {
				continue
			}
			if _, err := d.eng.Heartbeat(d.ctx, core.Heartbeat{User: "alice", Device: dev.id, Kind: dev.kind, Gateway: "gw-1", Token: tokens[dev.id]}); err != nil {
				return err
			}
		}
	}
	if err := d.row("keep-alive heartbeats until +5m0s, no activity", "alice", nil, nil); err != nil {
		return err
	}
	d.at(5*time.Minute + time.Second)
	if err := d.sweep("alice"); err != nil {
		return err
	}
	d.at(5*time.Minute + 10*time.Second)
	changes, err := d.eng.SetManual(d.ctx, "alice", core.ManualDND, 0)
	if err := d.row("set DND", "alice", changes, err); err != nil {
		return err
	}
	d.at(5*time.Minute + 11*time.Second)
	if err := d.sweep("alice"); err != nil {
		return err
	}
	d.at(5*time.Minute + 20*time.Second)
	for _, dev := range devices {
		end, err := d.eng.Disconnect(d.ctx, "alice", dev.id, tokens[dev.id])
		if err := d.row("disconnect "+dev.id, "alice", end.Changes, err); err != nil {
			return err
		}
	}
	d.at(5*time.Minute + 25*time.Second)
	if err := d.sweep("alice"); err != nil {
		return err
	}
	d.at(5*time.Minute + 35*time.Second)
	if err := d.sweep("alice"); err != nil {
		return err
	}
	return d.tw.Flush()
}

func (d *demo) kick() error {
	d.section("bob: an exclusive login kicks his web session")
	d.at(10 * time.Minute)
	web, err := d.eng.Login(d.ctx, core.Login{User: "bob", Device: "web", Kind: core.KindWeb, Gateway: "gw-1"})
	if err != nil {
		return err
	}
	if err := d.row("login web on gw-1", "bob", web.Changes, nil); err != nil {
		return err
	}
	d.at(10*time.Minute + 5*time.Second)
	exclusive := core.PolicyExclusive
	phone, err := d.eng.Login(d.ctx, core.Login{User: "bob", Device: "phone", Kind: core.KindAndroid, Gateway: "gw-2", Policy: &exclusive})
	if err != nil {
		return err
	}
	var kicked []string
	for _, k := range phone.Kicked {
		kicked = append(kicked, k.Device+"@"+k.Gateway)
	}
	if err := d.row("exclusive login phone on gw-2, kicked "+strings.Join(kicked, ","), "bob", phone.Changes, nil); err != nil {
		return err
	}
	d.at(10*time.Minute + 10*time.Second)
	_, err = d.eng.Heartbeat(d.ctx, core.Heartbeat{User: "bob", Device: "web", Kind: core.KindWeb, Gateway: "gw-1", Token: web.Token})
	if err := d.row("heartbeat from the kicked web session", "bob", nil, err); err != nil {
		return err
	}
	return d.tw.Flush()
}

func (d *demo) video(viewers int) error {
	fmt.Fprintf(d.out, "\n== video 10086: %d viewers, counted in each layout\n\n", viewers)
	tw := tabwriter.NewWriter(d.out, 2, 8, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "time\tlayout\tcount\tafter sweep\tafter 11 min idle + sweep\t")
	d.at(20 * time.Minute)
	classes := []string{"video-exact", "video-compact", "video-approx"}
	for _, class := range classes {
		sc := core.Scope{Class: class, ID: "10086"}
		batch := make([]core.ScopeTouch, 0, core.MaxBatch)
		for i := 0; i < viewers; i++ {
			batch = append(batch, core.ScopeTouch{Scope: sc, Member: "viewer-" + strconv.Itoa(i)})
			if len(batch) == core.MaxBatch || i == viewers-1 {
				if err := d.eng.TouchBatch(d.ctx, batch); err != nil {
					return err
				}
				batch = batch[:0]
			}
		}
	}
	counts := make([][3]int64, len(classes))
	for step, offset := range []time.Duration{20 * time.Minute, 21 * time.Minute, 32 * time.Minute} {
		d.at(offset)
		if step > 0 {
			if _, err := d.eng.SweepScopes(d.ctx); err != nil {
				return err
			}
		}
		for i, class := range classes {
			c, err := d.eng.Count(d.ctx, core.Scope{Class: class, ID: "10086"})
			if err != nil {
				return err
			}
			counts[i][step] = c.N
		}
	}
	for i, class := range classes {
		fmt.Fprintf(tw, "+20m0s\t%s\t%d\t%d\t%d\t\n", strings.TrimPrefix(class, "video-"), counts[i][0], counts[i][1], counts[i][2])
	}
	return tw.Flush()
}

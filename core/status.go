package core

import "strconv"

// Status is a device's state or a user's aggregate status. The zero value is
// StatusOffline. The order of the automatic states is their rank: a user is
// shown as the most present of their devices.
type Status uint8

const (
	// StatusOffline means no live session (or an INVISIBLE user, as others see them).
	StatusOffline Status = iota
	// StatusPushOnline means a backgrounded mobile app, reachable by push.
	StatusPushOnline
	// StatusAway means a foreground session with no user activity for IdleAfter.
	StatusAway
	// StatusOnline means a foreground session with recent user activity.
	StatusOnline
	// StatusDND means the user set "do not disturb" and has a live session.
	StatusDND
)

var statusNames = [...]string{"OFFLINE", "PUSH_ONLINE", "AWAY", "ONLINE", "DND"}

// publishedCounts returns a count of 0 for every status but StatusOffline:
// ReadOnline's outcome before the counts are added.
func publishedCounts() map[Status]int64 {
	out := make(map[Status]int64, len(statusNames)-1)
	for s := StatusOffline + 1; int(s) < len(statusNames); s++ {
		out[s] = 0
	}
	return out
}

// String returns the status name as docs/design.md spells it, such as "PUSH_ONLINE".
func (s Status) String() string {
	return enumName(statusNames[:], int(s), "Status")
}

// Manual is a user-level status set by the user. The zero value is ManualNone.
type Manual uint8

const (
	// ManualNone means no manual status: the devices decide.
	ManualNone Manual = iota
	// ManualDND shows a user with a live session as DND.
	ManualDND
	// ManualInvisible shows the user to others as OFFLINE while still tracking them.
	ManualInvisible
)

var manualNames = [...]string{"NONE", "DND", "INVISIBLE"}

// String returns the manual status name, such as "INVISIBLE".
func (m Manual) String() string {
	return enumName(manualNames[:], int(m), "Manual")
}

// Kind is the kind of client a device runs. It selects the heartbeat interval
// and, under PolicyExclusivePerKind, the device class. The zero value is KindOther.
type Kind uint8

const (
	// KindOther is any client not listed below; it uses the web interval.
	KindOther Kind = iota
	// KindWeb is a browser.
	KindWeb
	// KindDesktop is a desktop application.
	KindDesktop
	// KindIOS is an iOS application.
	KindIOS
	// KindAndroid is an Android application.
	KindAndroid
)

var kindNames = [...]string{"other", "web", "desktop", "ios", "android"}

// String returns the kind name in lower case, such as "ios".
func (k Kind) String() string {
	return enumName(kindNames[:], int(k), "Kind")
}

// class returns the device class that PolicyExclusivePerKind keeps one device
// of: "mobile", "desktop", "web" or "other".
func (k Kind) class() string {
	switch k {
	case KindIOS, KindAndroid:
		return "mobile"
	case KindDesktop:
		return "desktop"
	case KindWeb:
		return "web"
	}
	return "other"
}

// Policy is the login policy. The zero value is PolicyMulti.
type Policy uint8

const (
	// PolicyMulti lets devices coexist up to Config.MaxDevices.
	PolicyMulti Policy = iota
	// PolicyExclusive removes every other device of the user at login.
	PolicyExclusive
	// PolicyExclusivePerKind keeps at most one device per class of kinds:
	// mobile (KindIOS, KindAndroid), desktop, web and other.
	PolicyExclusivePerKind
)

var policyNames = [...]string{"multi", "exclusive", "exclusive-per-kind"}

// String returns the policy name, such as "exclusive-per-kind".
func (p Policy) String() string {
	return enumName(policyNames[:], int(p), "Policy")
}

// Layout is how a scope class counts its members. The zero value is LayoutExact.
type Layout uint8

const (
	// LayoutExact keeps a sorted set: exact counts at any instant, members by recency.
	LayoutExact Layout = iota
	// LayoutCompact keeps sharded hashes: least memory, counts refreshed by each sweep.
	LayoutCompact
	// LayoutApprox keeps HyperLogLog buckets: constant memory, about 1% error, no listing.
	LayoutApprox
)

var layoutNames = [...]string{"exact", "compact", "approx"}

// String returns the layout name, such as "compact".
func (l Layout) String() string {
	return enumName(layoutNames[:], int(l), "Layout")
}

// Parse returns the value of one of this package's enums named name, as
// its String spells it: Parse[Kind]("ios") is KindIOS, true; an unknown
// name is the zero value, false.
func Parse[E Status | Manual | Kind | Policy | Layout](name string) (E, bool) {
	var names []string
	switch any(E(0)).(type) {
	case Status:
		names = statusNames[:]
	case Manual:
		names = manualNames[:]
	case Kind:
		names = kindNames[:]
	case Policy:
		names = policyNames[:]
	case Layout:
		names = layoutNames[:]
	}
	i, ok := enumValue(names, name)
	return E(i), ok
}

// enumName returns names[v], or "Type(v)" for a value out of range.
func enumName(names []string, v int, typ string) string {
	if v >= 0 && v < len(names) {
		return names[v]
	}
	return typ + "(" + strconv.Itoa(v) + ")"
}

// enumValue returns the index of name in names.
func enumValue(names []string, name string) (int, bool) {
	for i, n := range names {
		if n == name {
			return i, true
		}
	}
	return 0, false
}

// inRange reports whether a number read from a reply is a valid index of
// an enum with n names; it compares before any conversion, so that 256
// cannot pass as 0.
func inRange(v int64, n int) bool { return v >= 0 && v < int64(n) }

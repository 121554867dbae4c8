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

// String returns the status name as the design spells it, such as "PUSH_ONLINE".
func (s Status) String() string {
	if int(s) < len(statusNames) {
		return statusNames[s]
	}
	return "Status(" + strconv.Itoa(int(s)) + ")"
}

// Valid reports whether s is one of the five statuses.
func (s Status) Valid() bool { return int(s) < len(statusNames) }

// ParseStatus returns the status named name (as String spells it).
func ParseStatus(name string) (Status, bool) {
	for i, n := range statusNames {
		if n == name {
			return Status(i), true
		}
	}
	return 0, false
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
	if int(m) < len(manualNames) {
		return manualNames[m]
	}
	return "Manual(" + strconv.Itoa(int(m)) + ")"
}

// ParseManual returns the manual status named name (as String spells it).
func ParseManual(name string) (Manual, bool) {
	for i, n := range manualNames {
		if n == name {
			return Manual(i), true
		}
	}
	return 0, false
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
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "Kind(" + strconv.Itoa(int(k)) + ")"
}

// ParseKind returns the kind named name (as String spells it).
func ParseKind(name string) (Kind, bool) {
	for i, n := range kindNames {
		if n == name {
			return Kind(i), true
		}
	}
	return 0, false
}

// Class returns the device class that PolicyExclusivePerKind keeps one device
// of: "mobile", "desktop", "web" or "other".
func (k Kind) Class() string {
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
	// PolicyExclusivePerKind keeps at most one device per Kind.Class.
	PolicyExclusivePerKind
)

var policyNames = [...]string{"multi", "exclusive", "exclusive-per-kind"}

// String returns the policy name, such as "exclusive-per-kind".
func (p Policy) String() string {
	if int(p) < len(policyNames) {
		return policyNames[p]
	}
	return "Policy(" + strconv.Itoa(int(p)) + ")"
}

// ParsePolicy returns the policy named name (as String spells it).
func ParsePolicy(name string) (Policy, bool) {
	for i, n := range policyNames {
		if n == name {
			return Policy(i), true
		}
	}
	return 0, false
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
	if int(l) < len(layoutNames) {
		return layoutNames[l]
	}
	return "Layout(" + strconv.Itoa(int(l)) + ")"
}

// ParseLayout returns the layout named name (as String spells it).
func ParseLayout(name string) (Layout, bool) {
	for i, n := range layoutNames {
		if n == name {
			return Layout(i), true
		}
	}
	return 0, false
}

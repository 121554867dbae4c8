package core

import "github.com/presencekit/presence/internal/keyspace"

// Scope names one scope counter: a class (which sets layout, window and
// sweep interval, see Config.Classes) and an ID within it, such as
// Scope{Class: "video", ID: "10086"}.
type Scope struct {
	Class string
	ID    string
}

// ref is the scope's name inside its bucket (keyspace.Ref): class names
// hold no ':', so "class:id" is injective.
func (s Scope) ref() string { return keyspace.Ref(s.Class, s.ID) }

// String returns "class:id".
func (s Scope) String() string { return s.ref() }

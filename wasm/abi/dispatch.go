package abi

// decodeArgs and appendResult call each message type's decoder and encoder
// by its type, not through the wire and wirePtr interfaces: the Go linker
// keeps a method of every type stored in an interface once anything calls
// that method through one, so a single interface call of decodeJSON in the
// module would link the decoders of every result type too, and one of
// appendJSON the encoders of every argument type (the Go host's side).
// TestDispatchCoversOps holds them to NewArgs and NewResult.

// decodeArgs reads the arguments of a request into args, a pointer
// NewArgs returned.
func decodeArgs(args any, r *reader) error {
	switch a := args.(type) {
	case *Config:
		return readConfig(a, r)
	case *Heartbeat:
		return a.decodeJSON(r)
	case *HeartbeatBatch:
		return a.decodeJSON(r)
	case *Login:
		return a.decodeJSON(r)
	case *End:
		return a.decodeJSON(r)
	case *SetManual:
		return a.decodeJSON(r)
	case *StatusArgs:
		return a.decodeJSON(r)
	case *StatusesArgs:
		return a.decodeJSON(r)
	case *Touch:
		return a.decodeJSON(r)
	case *TouchBatch:
		return a.decodeJSON(r)
	case *ScopeArgs:
		return a.decodeJSON(r)
	case *MembersArgs:
		return a.decodeJSON(r)
	case *ActiveWithinArgs:
		return a.decodeJSON(r)
	case *Empty:
		return a.decodeJSON(r)
	case *ChangeLogArgs:
		return a.decodeJSON(r)
	case *AckArgs:
		return a.decodeJSON(r)
	case *Resume:
		return a.decodeJSON(r)
	case *PlanRef:
		return a.decodeJSON(r)
	}
	return errNotArgs
}

var errNotArgs = &DecodeError{What: "request", Field: "args", Reason: "not an argument type"}

// appendResult appends the JSON of v, one of the result types of NewResult
// or a pointer to one, and reports whether it was.
func appendResult(b []byte, v any) ([]byte, bool) {
	switch x := v.(type) {
	case *Configured:
		return x.appendJSON(b), true
	case Configured:
		return x.appendJSON(b), true
	case *Ack:
		return x.appendJSON(b), true
	case Ack:
		return x.appendJSON(b), true
	case *Acks:
		return x.appendJSON(b), true
	case Acks:
		return x.appendJSON(b), true
	case *LoginResult:
		return x.appendJSON(b), true
	case LoginResult:
		return x.appendJSON(b), true
	case *Ended:
		return x.appendJSON(b), true
	case Ended:
		return x.appendJSON(b), true
	case *Changes:
		return x.appendJSON(b), true
	case Changes:
		return x.appendJSON(b), true
	case *UserStatus:
		return x.appendJSON(b), true
	case UserStatus:
		return x.appendJSON(b), true
	case *Statuses:
		return x.appendJSON(b), true
	case Statuses:
		return x.appendJSON(b), true
	case *Empty:
		return x.appendJSON(b), true
	case Empty:
		return x.appendJSON(b), true
	case *Removed:
		return x.appendJSON(b), true
	case Removed:
		return x.appendJSON(b), true
	case *Count:
		return x.appendJSON(b), true
	case Count:
		return x.appendJSON(b), true
	case *MemberPage:
		return x.appendJSON(b), true
	case MemberPage:
		return x.appendJSON(b), true
	case *N:
		return x.appendJSON(b), true
	case N:
		return x.appendJSON(b), true
	case *SweepReport:
		return x.appendJSON(b), true
	case SweepReport:
		return x.appendJSON(b), true
	case *ChangeLog:
		return x.appendJSON(b), true
	case ChangeLog:
		return x.appendJSON(b), true
	case *Online:
		return x.appendJSON(b), true
	case Online:
		return x.appendJSON(b), true
	}
	return b, false
}

// Package limits holds the caps on input of docs/design.md §3 that a
// caller meets by construction and learns of from the *core.InputError
// that names them: package core refuses what exceeds them, and the tests
// and the service check against the same numbers. (The caps a caller
// sizes its calls by, core.MaxBatch and core.MaxPage, are core's own.)
package limits

const (
	// IDBytes is the most bytes of a user, device, gateway, session
	// token, scope or member ID (core.CheckID).
	IDBytes = 128
	// MetaEntries is the most metadata entries of one device.
	MetaEntries = 16
	// MetaBytes is the most bytes of one device's metadata, keys and
	// values together.
	MetaBytes = 1024
)

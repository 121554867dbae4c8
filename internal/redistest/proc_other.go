//go:build !linux

package redistest

import "os/exec"

// setProcAttr does nothing here: only Linux can tie the server's life to the
// test binary's. Cleanup still stops it.
func setProcAttr(*exec.Cmd) {}

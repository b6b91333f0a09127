//go:build !linux

package demo

import "os/exec"

// DieWithParent makes the process cmd will start receive SIGKILL when this
// one dies, on Linux; here it does nothing (children that watch their
// standard input with ParentGone still stop).
func DieWithParent(cmd *exec.Cmd) {}

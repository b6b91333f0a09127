package demo

import (
	"os/exec"
	"syscall"
)

// DieWithParent makes the process cmd will start receive SIGKILL when this
// one dies, however it dies (Linux's parent-death signal), so that a
// program killed outright leaves no child behind. Call it before
// cmd.Start. Elsewhere it does nothing.
func DieWithParent(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
}

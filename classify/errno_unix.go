//go:build !plan9 && !windows

package classify

import (
	"errors"
	"syscall"
)

// isConnErrno reports a connection refused, reset or aborted by the peer,
// or a write to a connection it already closed.
func isConnErrno(err error) bool {
	var e syscall.Errno
	if !errors.As(err, &e) {
		return false
	}
	switch e {
	case syscall.ECONNREFUSED, syscall.ECONNRESET, syscall.ECONNABORTED, syscall.EPIPE:
		return true
	}
	return false
}

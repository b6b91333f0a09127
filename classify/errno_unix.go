//go:build !plan9 && !windows

package classify

import "syscall"

// isConnErrno reports a connection refused, reset or aborted by the peer,
// or a write to a connection it already closed. e is one node of an error
// chain.
func isConnErrno(e error) bool {
	switch e {
	case syscall.ECONNREFUSED, syscall.ECONNRESET, syscall.ECONNABORTED, syscall.EPIPE:
		return true
	}
	return false
}

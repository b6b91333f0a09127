package classify

import (
	"errors"
	"syscall"
)

// wsaECONNREFUSED is WSAECONNREFUSED, which package syscall does not name.
const wsaECONNREFUSED syscall.Errno = 10061

// isConnErrno reports a connection refused, reset or aborted by the peer,
// or a write to a connection it already closed. Windows sockets report the
// WSA codes, which do not match the invented Unix-style constants.
func isConnErrno(err error) bool {
	var e syscall.Errno
	if !errors.As(err, &e) {
		return false
	}
	switch e {
	case syscall.ECONNREFUSED, syscall.ECONNRESET, syscall.ECONNABORTED, syscall.EPIPE,
		wsaECONNREFUSED, syscall.WSAECONNRESET, syscall.WSAECONNABORTED:
		return true
	}
	return false
}

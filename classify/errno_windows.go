package classify

import "syscall"

// wsaECONNREFUSED is WSAECONNREFUSED, which package syscall does not name.
const wsaECONNREFUSED syscall.Errno = 10061

// isConnErrno reports a connection refused, reset or aborted by the peer,
// or a write to a connection it already closed. e is one node of an error
// chain. Windows sockets report the WSA codes, which do not equal the
// Unix-style constants package syscall invents for Windows.
func isConnErrno(e error) bool {
	switch e {
	case syscall.ECONNREFUSED, syscall.ECONNRESET, syscall.ECONNABORTED, syscall.EPIPE,
		wsaECONNREFUSED, syscall.WSAECONNRESET, syscall.WSAECONNABORTED:
		return true
	}
	return false
}

//go:build !plan9

package classify

import (
	"syscall"
	"testing"
)

var (
	errRefused error = syscall.ECONNREFUSED
	errReset   error = syscall.ECONNRESET
)

func TestClassifyErrnos(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want Class
	}{
		{"refused", urlErr(opErr("dial", syscall.ECONNREFUSED)), TransportFailure},
		{"reset", urlErr(opErr("read", syscall.ECONNRESET)), TransportFailure},
		{"aborted", urlErr(opErr("read", syscall.ECONNABORTED)), TransportFailure},
		{"broken pipe", urlErr(opErr("write", syscall.EPIPE)), TransportFailure},
		{"bare errno refused", syscall.ECONNREFUSED, TransportFailure},
		{"connect ETIMEDOUT", urlErr(opErr("dial", syscall.ETIMEDOUT)), TransportFailure},
		// Routing problems and local resource limits are not the origin's
		// load.
		{"host unreachable", urlErr(opErr("dial", syscall.EHOSTUNREACH)), Neutral},
		{"network unreachable", urlErr(opErr("dial", syscall.ENETUNREACH)), Neutral},
		{"too many open files", urlErr(opErr("socket", syscall.EMFILE)), Neutral},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Response(nil, tt.err); got != tt.want {
				t.Errorf("Response(nil, %v) = %v, want %v", tt.err, got, tt.want)
			}
		})
	}
}

func TestClassifyErrorAllocs(t *testing.T) {
	err := urlErr(opErr("dial", syscall.ECONNREFUSED))
	if n := testing.AllocsPerRun(100, func() { Response(nil, err) }); n != 0 {
		t.Errorf("classifying a refused connection allocates %v times, want 0", n)
	}
}

package polite

import (
	"log/slog"
	"net/http"
	"time"

	"github.com/colly-polite/polite/internal/hook"
)

// The hooks of package internal/hook: what the Colly wiring (package
// adaptive) and the frontier need of a controller beyond its API.
func init() {
	hook.New = func(cfg any, robotsOn bool) any {
		c := cfg.(Config)
		if c.Robots == nil {
			c.Robots = new(robotsOn)
		}
		return failSafe([]Config{c})
	}
	hook.Transport = func(ctrl any, next http.RoundTripper, attemptTimeout time.Duration) http.RoundTripper {
		return ctrl.(*Controller).transport(next, attemptTimeout)
	}
	hook.Unwrap = func(rt http.RoundTripper) (any, http.RoundTripper, time.Duration, bool) {
		t, ok := rt.(*Transport)
		if !ok {
			return nil, nil, 0, false
		}
		return t.c, t.next, t.attemptTimeout, true
	}
	hook.Settings = func(ctrl any) (*slog.Logger, bool, time.Duration) {
		c := ctrl.(*Controller)
		return logger(c.st), c.st.robots, c.st.AttemptTimeout
	}
	hook.AddErr = func(ctrl any, err error) { ctrl.(*Controller).addErr(err) }
	hook.Reserve = func(ctrl any, req *http.Request) (hook.Reservation, hook.Readiness, error) {
		return ctrl.(*Controller).reserve(req)
	}
	hook.Notify = func(ctrl any, f func(string)) func() { return ctrl.(*Controller).notifyFunc(f) }
	hook.ScopeKey = func(ctrl any, req *http.Request) string { return ctrl.(*Controller).st.Scope(req) }
}

package polite

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
)

// safeHandler is the Logger's handler as the controller calls it: a panic
// in it (a user's handler, a sink that failed) is recovered, the record
// dropped, and the first such panic reported by Controller.Err. The
// controller logs inside its transitions, with a slot just granted or a
// lock held: a panic let through would leave a slot taken for good, or
// the controller locked. (It guards a Store's panics and the transport's
// below the same way: whatever the user's code does, no slot is lost.)
type safeHandler struct {
	next     slog.Handler
	panicked *atomic.Bool
	report   func(error)
}

// safeLogger wraps l's handler in a safeHandler that reports to report.
func safeLogger(l *slog.Logger, report func(error)) *slog.Logger {
	return slog.New(&safeHandler{next: l.Handler(), panicked: new(atomic.Bool), report: report})
}

func (h *safeHandler) recovered() {
	if r := recover(); r != nil && h.panicked.CompareAndSwap(false, true) {
		h.report(fmt.Errorf("polite: the Logger's handler panicked (records it panics on are dropped): %v", r))
	}
}

func (h *safeHandler) Enabled(ctx context.Context, level slog.Level) (on bool) {
	defer h.recovered()
	return h.next.Enabled(ctx, level)
}

func (h *safeHandler) Handle(ctx context.Context, r slog.Record) (err error) {
	defer h.recovered()
	return h.next.Handle(ctx, r)
}

func (h *safeHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	next := h.next
	func() {
		defer h.recovered()
		next = h.next.WithAttrs(attrs)
	}()
	return &safeHandler{next: next, panicked: h.panicked, report: h.report}
}

func (h *safeHandler) WithGroup(name string) slog.Handler {
	next := h.next
	func() {
		defer h.recovered()
		next = h.next.WithGroup(name)
	}()
	return &safeHandler{next: next, panicked: h.panicked, report: h.report}
}

package demo

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/colly-polite/polite/testserver"
)

// Sleep waits d or until ctx is done, whichever comes first, and returns
// ctx.Err() in the second case. A d <= 0 returns at once.
func Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// WaitFor waits for wg at most d and reports whether it finished. If it
// did not, the goroutine that waits on wg is left behind until wg is done.
func WaitFor(wg *sync.WaitGroup, d time.Duration) bool {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-done:
		return true
	case <-t.C:
		return false
	}
}

// Grace periods of Stop: the workers' own, then the one after srv is
// closed.
const (
	stopGrace  = 15 * time.Second
	closeGrace = 5 * time.Second
)

// ErrWorkersRunning is returned by Stop when the workers outlive the
// server.
var ErrWorkersRunning = errors.New("demo: workers did not stop")

// Stop ends a crawl whose context has just been cancelled: it waits up to
// 15 s for the workers in wg to return (a cancelled context ends polite
// waits and requests at once, so they normally do); then, saying so on
// standard error, it closes srv, which fails every request still in
// flight, and waits 5 s more. It returns ErrWorkersRunning if they are
// still running then.
func Stop(wg *sync.WaitGroup, srv *testserver.Server) error {
	if WaitFor(wg, stopGrace) {
		return nil
	}
	fmt.Fprintf(os.Stderr, "workers still busy %v after the end: closing the server\n", stopGrace)
	srv.Close()
	if !WaitFor(wg, closeGrace) {
		return ErrWorkersRunning
	}
	return nil
}

// CountIn counts the times of ts (in any order) that fall in [from, to),
// such as testserver.Stats.Accepted over the part of a run that is judged.
func CountIn(ts []time.Duration, from, to time.Duration) int {
	n := 0
	for _, t := range ts {
		if t >= from && t < to {
			n++
		}
	}
	return n
}

// Short applies the defaults of a smoke run (-short) to the command line's
// flags. If on is true, each flag named in defaults that the command line
// did not set takes the value given there, in the flag's own syntax ("5s",
// "4"); a flag the user set keeps the user's value, so that -short
// -duration 8s runs 8 s. If on is false it does nothing. Call it after
// flag.Parse; to derive one default from another, call it twice:
//
//	demo.Short(*short, map[string]string{"duration": "6s"})
//	demo.Short(*short, map[string]string{"warmup": (*duration / 2).String()})
//
// An unknown name or a value the flag refuses is a mistake in the program:
// Short prints it and exits with status 2, as flag.Parse does for a bad
// command line.
func Short(on bool, defaults map[string]string) {
	if err := short(flag.CommandLine, on, defaults); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
}

func short(fs *flag.FlagSet, on bool, defaults map[string]string) error {
	if !on {
		return nil
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	for name, value := range defaults {
		if fs.Lookup(name) == nil {
			return fmt.Errorf("demo: -short default for an undefined flag -%s", name)
		}
		if set[name] {
			continue
		}
		if err := fs.Set(name, value); err != nil {
			return fmt.Errorf("demo: -short default -%s=%s: %w", name, value, err)
		}
	}
	return nil
}

package demo

import (
	"context"
	"errors"
	"flag"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/colly-polite/polite/testserver"
)

func TestSleep(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		if err := Sleep(context.Background(), 3*time.Second); err != nil || time.Since(start) != 3*time.Second {
			t.Errorf("Sleep(3s) = %v after %v", err, time.Since(start))
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		start = time.Now()
		if err := Sleep(ctx, time.Hour); !errors.Is(err, context.DeadlineExceeded) || time.Since(start) != time.Second {
			t.Errorf("Sleep(1h) with a 1 s context = %v after %v", err, time.Since(start))
		}
		if err := Sleep(context.Background(), -time.Second); err != nil {
			t.Errorf("Sleep(-1s) = %v", err)
		}
	})
}

func TestWaitFor(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var wg sync.WaitGroup
		release := make(chan struct{})
		wg.Go(func() { <-release })
		start := time.Now()
		if WaitFor(&wg, 2*time.Second) || time.Since(start) != 2*time.Second {
			t.Errorf("WaitFor on a busy group returned true or after %v", time.Since(start))
		}
		close(release)
		if !WaitFor(&wg, 2*time.Second) {
			t.Error("WaitFor on a finished group = false")
		}
	})
}

func TestShort(t *testing.T) {
	newSet := func(args ...string) (*flag.FlagSet, *time.Duration, *int) {
		fs := flag.NewFlagSet("x", flag.ContinueOnError)
		d := fs.Duration("duration", 30*time.Second, "")
		n := fs.Int("workers", 40, "")
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		return fs, d, n
	}
	defaults := map[string]string{"duration": "5s", "workers": "4"}

	fs, d, n := newSet()
	if err := short(fs, false, defaults); err != nil || *d != 30*time.Second || *n != 40 {
		t.Errorf("off: %v, %v, %d", err, *d, *n)
	}
	fs, d, n = newSet()
	if err := short(fs, true, defaults); err != nil || *d != 5*time.Second || *n != 4 {
		t.Errorf("on: %v, %v, %d", err, *d, *n)
	}
	fs, d, n = newSet("-duration", "8s")
	if err := short(fs, true, defaults); err != nil || *d != 8*time.Second || *n != 4 {
		t.Errorf("on, -duration 8s: %v, %v, %d; want the user's 8s kept", err, *d, *n)
	}
	fs, _, _ = newSet()
	if err := short(fs, true, map[string]string{"nope": "1"}); err == nil {
		t.Error("an undefined flag: no error")
	}
	fs, _, _ = newSet()
	if err := short(fs, true, map[string]string{"workers": "many"}); err == nil {
		t.Error("a bad value: no error")
	}
}

func TestCountIn(t *testing.T) {
	s := time.Second
	ts := []time.Duration{3 * s, 0, 1 * s, 2 * s, 2*s - 1}
	if got := CountIn(ts, s, 2*s); got != 2 {
		t.Errorf("CountIn [1s, 2s) = %d, want 2", got)
	}
}

// A worker stuck in a request that never gets its headers is freed by
// closing the server after the grace period.
func TestStop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := testserver.NewTest(t, testserver.Config{Hosts: map[string]testserver.Policy{
			"a.test": {Adversary: testserver.Adversary{Kind: testserver.Hang}},
		}})
		var wg sync.WaitGroup
		wg.Go(func() {
			if resp, err := srv.Client().Get(srv.URL + "/page/1"); err == nil {
				resp.Body.Close()
			}
		})
		start := time.Now()
		if err := Stop(&wg, srv); err != nil || time.Since(start) != stopGrace {
			t.Errorf("Stop = %v after %v, want nil after %v", err, time.Since(start), stopGrace)
		}
	})
}

package main

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/colly-polite/polite/internal/demo"
)

// A crawler's machine is often busy with other work, and a law that reads
// latency reads the machine's too. A busy-machine cell runs its crawl
// beside a CPU load the bench starts and stops itself: a child process of
// this program (re-executed with burnFlag) that spins one goroutine per
// core, in its own process so that it competes for the cores as another
// program would, not for the crawl's Go scheduler. It stops when the bench
// closes its standard input, when the bench dies (Linux), and in any case
// after the limit it was given.

// burnFlag, as the first argument, makes the bench binary a CPU load; the
// second argument is the longest it may run (a time.Duration).
const burnFlag = "-burn-cpu"

// burnMain spins on every core until its standard input closes or limit
// has passed, then exits.
func burnMain(limit string) {
	d, err := time.ParseDuration(limit)
	if err != nil || d <= 0 {
		fmt.Fprintln(os.Stderr, "bench: -burn-cpu needs a duration > 0")
		os.Exit(2)
	}
	var stop atomic.Bool
	for range runtime.NumCPU() {
		go func() {
			x := 1.0
			for !stop.Load() {
				for range 1 << 12 {
					x = x*1.0000001 + 1e-9
				}
				if x > 1e300 {
					x = 1
				}
			}
		}()
	}
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		stop.Store(true)
		os.Exit(0)
	}()
	time.Sleep(d)
	stop.Store(true)
	os.Exit(0)
}

// burner is a running CPU load.
type burner struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	start time.Time
}

// startBurner starts a CPU load on every core for at most limit.
func startBurner(limit time.Duration) (*burner, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(exe, burnFlag, limit.String())
	cmd.Stderr = os.Stderr
	demo.DieWithParent(cmd)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return &burner{cmd: cmd, stdin: stdin, start: time.Now()}, nil
}

// stop ends the load and returns the share of the machine's CPU it took
// while it ran, in percent (0 when unknown).
func (b *burner) stop() float64 {
	b.stdin.Close()
	done := make(chan struct{})
	go func() { _ = b.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		_ = b.cmd.Process.Kill()
		<-done
	}
	wall := time.Since(b.start)
	ps := b.cmd.ProcessState
	if ps == nil || wall <= 0 {
		return 0
	}
	return float64(ps.UserTime()+ps.SystemTime()) / float64(wall) / float64(runtime.NumCPU()) * 100
}

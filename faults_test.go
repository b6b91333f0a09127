package polite_test

import (
	"context"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/colly-polite/polite"
	"github.com/colly-polite/polite/classify"
	"github.com/colly-polite/polite/testserver"
)

var faultsReal = flag.Bool("faults.real", false, "run the randomized fault test over loopback sockets in real time too")

// The randomized fault test: many goroutines crawl many hosts that fail in
// every way at once (429 with and without Retry-After, 503, bans, resets
// mid-body, dripping bodies, hangs, garbage Retry-After, queueing), over
// random round trips, with random deadlines and cancels, with and without
// body markers. Whatever happens, every send is recorded exactly once, no
// slot is held and nobody waits at the end, and nothing is sent during a
// pause a host announced. Seeds: POLITE_FAULT_SEEDS=5,6,7 (default 1-4).
func TestFaultsRandomized(t *testing.T) {
	seeds := []uint64{1, 2, 3, 4}
	if v := os.Getenv("POLITE_FAULT_SEEDS"); v != "" {
		seeds = nil
		for _, f := range strings.Split(v, ",") {
			n, err := strconv.ParseUint(strings.TrimSpace(f), 10, 64)
			require.NoError(t, err, "POLITE_FAULT_SEEDS")
			seeds = append(seeds, n)
		}
	}
	for _, seed := range seeds {
		for _, markers := range []bool{false, true} {
			t.Run(fmt.Sprintf("seed=%d/markers=%v", seed, markers), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) { faults(t, seed, markers, testserver.Memory, time.Minute) })
			})
		}
	}
}

// The same over real loopback sockets, in real time (under a minute: the
// last requests may wait out a pause):
// go test . -run TestFaultsRandomizedRealSockets -faults.real
func TestFaultsRandomizedRealSockets(t *testing.T) {
	if !*faultsReal {
		t.Skip("real sockets: run with -faults.real")
	}
	faults(t, 1, true, testserver.Loopback, 10*time.Second)
}

// faultPolicy draws one host's way of failing.
func faultPolicy(r *rand.Rand) testserver.Policy {
	p := testserver.Policy{Latency: testserver.Latency{
		Base: time.Duration(r.IntN(300)) * time.Millisecond,
		RTT:  time.Duration(r.IntN(200)) * time.Millisecond,
	}}
	fw := testserver.Limit{Kind: testserver.FixedWindow, N: 5 + r.IntN(25), Window: time.Second}
	switch r.IntN(10) {
	case 0:
		p.Limit = fw
	case 1:
		p.Limit = testserver.Limit{Kind: testserver.TokenBucket, Rate: float64(2 + r.IntN(18)), Burst: 1 + r.IntN(4)}
		p.Excess.RetryAfter = testserver.RetryAfterNone
	case 2:
		p.Limit = testserver.Limit{Kind: testserver.SlidingWindow, N: 5 + r.IntN(15), Window: time.Second, CountRejected: true}
		p.Excess.RetryAfter = testserver.RetryAfterHTTPDate
	case 3:
		p.Limit = testserver.Limit{Kind: testserver.Concurrency, MaxConcurrent: 1 + r.IntN(6)}
	case 4:
		p.Limit = fw
		p.Ban = &testserver.Ban{After: 5, Within: 10 * time.Second, For: 20 * time.Second}
	case 5:
		p.Limit = fw
		p.Adversary = testserver.Adversary{Kind: testserver.ResetMidBody, Bytes: r.IntN(400)}
	case 6:
		p.Limit = fw
		p.Adversary = testserver.Adversary{Kind: testserver.DripBody, Bytes: 200, Interval: time.Duration(10+r.IntN(40)) * time.Millisecond}
	case 7:
		p.Limit = fw
		p.Adversary = testserver.Adversary{Kind: testserver.Hang}
	case 8:
		p.Limit = testserver.Limit{Kind: testserver.WorkerPool, MaxConcurrent: 1 + r.IntN(4)}
	case 9:
		p.Limit = fw
		p.Excess.RawRetryAfter = [][]string{{"-1"}, {"soon"}, {"0"}, {"3, 1"}}[r.IntN(4)]
	}
	return p
}

// countingRT counts the sends that reach the network.
type countingRT struct {
	next http.RoundTripper
	n    atomic.Int64
}

func (c *countingRT) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return c.next.RoundTrip(r)
}

func faults(t *testing.T, seed uint64, markers bool, network testserver.Network, d time.Duration) {
	r := rand.New(rand.NewPCG(seed, 1))
	names := testserver.HostNames(12)
	hosts := make(map[string]testserver.Policy, len(names))
	for _, n := range names {
		hosts[n] = faultPolicy(r)
	}
	srv := testserver.NewTest(t, testserver.Config{Hosts: hosts, Network: network, Seed: int64(seed)})
	cfg := polite.Config{
		AttemptTimeout: 2 * time.Second,
		MaxPause:       20 * time.Second,
		JitterSeed:     seed,
		Default:        polite.Rule{BlockThreshold: 3, ParkFor: 10 * time.Second},
	}
	if markers {
		cfg.BlockBodyMarkers = []string{"77</a>"} // in about one page in fifty
	}
	robots := r.IntN(2) == 0
	cfg.Robots = new(robots)
	ctrl, err := polite.New(cfg)
	require.NoError(t, err)
	sends := &countingRT{next: srv.Transport()}
	client := &http.Client{Transport: ctrl.Transport(sends)}

	start := time.Now()
	var wg sync.WaitGroup
	var requests, failures atomic.Int64
	for w := range 48 {
		wr := rand.New(rand.NewPCG(seed, uint64(w)+2))
		wg.Go(func() {
			for time.Since(start) < d {
				ctx, cancel := context.Background(), context.CancelFunc(func() {})
				switch wr.IntN(6) {
				case 2, 3:
					ctx, cancel = context.WithTimeout(ctx, time.Duration(wr.IntN(15000))*time.Millisecond)
				case 4:
					ctx, cancel = context.WithCancel(ctx)
					time.AfterFunc(time.Duration(wr.IntN(5000))*time.Millisecond, cancel)
				case 5:
					ctx, cancel = context.WithCancel(ctx)
					cancel()
				}
				u := srv.HostURL(names[wr.IntN(len(names))]) + "/page/" + strconv.Itoa(wr.IntN(1000))
				requests.Add(1)
				if !faultGet(ctx, client, u, wr.IntN(5) == 0) {
					failures.Add(1)
					time.Sleep(50 * time.Millisecond) // a crawler loop does not spin on errors
				}
				cancel()
			}
		})
	}
	wg.Wait()

	var recorded uint64
	for _, s := range ctrl.Report().Scopes {
		assert.Zero(t, s.InFlight, "scope %s: slots held", s.Scope)
		assert.Zero(t, s.Waiting, "scope %s: callers waiting", s.Scope)
		for _, n := range s.Counts {
			recorded += n
		}
	}
	assert.Equal(t, uint64(sends.n.Load()), recorded, "every send recorded exactly once")
	violations := 0
	for _, n := range names {
		v := srv.Stats(n).PauseViolations
		if v > 0 {
			t.Logf("host %s (%+v): %d pause violations", n, hosts[n], v)
		}
		violations += v
	}
	assert.Zero(t, violations, "requests sent during an announced pause")
	t.Logf("robots %v: %d requests, %d failed, %d sends; %d throttled, %d blocked, %d overloaded, %d transport failures",
		robots, requests.Load(), failures.Load(), sends.n.Load(),
		count(ctrl, classify.Throttled), count(ctrl, classify.Blocked), count(ctrl, classify.Overloaded), count(ctrl, classify.TransportFailure))
}

func count(ctrl *polite.Controller, c classify.Class) (n uint64) {
	for _, s := range ctrl.Report().Scopes {
		n += s.Counts[c]
	}
	return n
}

// faultGet sends one GET and reads the body (all of it, or a few bytes and
// closes it early). It reports whether a response came back.
func faultGet(ctx context.Context, client *http.Client, u string, early bool) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return false
	}
	resp, err := client.Do(req)
	if err != nil {
		return false
	}
	if early {
		_, _ = io.CopyN(io.Discard, resp.Body, 10)
	} else {
		_, _ = io.Copy(io.Discard, resp.Body)
	}
	_ = resp.Body.Close()
	return true
}

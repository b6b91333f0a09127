package redisstore_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/colly-polite/polite"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/colly-polite/polite/fleet"
	"github.com/colly-polite/polite/fleet/storetest"
	"github.com/colly-polite/polite/internal/redistest"
	"github.com/colly-polite/polite/internal/syncbuf"
	"github.com/colly-polite/polite/redisstore"
	"github.com/colly-polite/polite/testserver"
)

// The Store passes the conformance suite against a real redis-server, in
// real time (a few seconds: leases and pauses expire on the server's
// clock).
func TestConformance(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	storetest.Run(t, storetest.Harness{
		New: func(t *testing.T) fleet.Store {
			return redisstore.New(rdb, redisstore.Options{Prefix: "test:" + t.Name()})
		},
		Slack: 150 * time.Millisecond,
		Rewind: func(t *testing.T, s fleet.Store, scope string, d time.Duration) {
			err := rewindScript.Run(context.Background(), rdb, redisstore.Keys(s.(*redisstore.Store), scope), d.Microseconds()).Err()
			require.NoError(t, err)
		},
	})
}

// rewindScript moves every time stored on a scope d µs (ARGV 1) ahead, as
// the server's clock going d back would: the schedule's slot and pause,
// the stamps of the fleet's limits, the processes' asks and the leases'
// expiries.
var rewindScript = redis.NewScript(`
local d = tonumber(ARGV[1])
local function later(v, by)
  local n = tonumber(v or '')
  if not n or n <= 0 then return v end
  return string.format('%.0f', n + by)
end
local sc = redis.call('HMGET', KEYS[1], 'tat', 'pause', 'fl')
if sc[1] then redis.call('HSET', KEYS[1], 'tat', later(sc[1], d)) end
if sc[2] then redis.call('HSET', KEYS[1], 'pause', later(sc[2], d)) end
if sc[3] then
  local fl, i = {}, 1
  for v in string.gmatch(sc[3], '%S+') do
    if i == 2 or i == 4 or i == 5 then v = later(v, d / 1000) end
    fl[i], i = v, i + 1
  end
  redis.call('HSET', KEYS[1], 'fl', table.concat(fl, ' '))
end
-- leases in µs; processes in ms times 1000, so µs too
for k = 3, 4 do
  local ms = redis.call('ZRANGE', KEYS[k], 0, -1, 'WITHSCORES')
  for i = 1, #ms, 2 do redis.call('ZADD', KEYS[k], later(ms[i + 1], d), ms[i]) end
end
return 1
`)

func acquire(t *testing.T, s *redisstore.Store, scope string) (fleet.Lease, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	return s.Lease(ctx, fleet.LeaseRequest{Scope: scope, Process: "p", Rate: 100, Limit: 10, TTL: time.Second, Seed: []byte("seed")})
}

// Faults of the server: each call fails with an error, within the
// controller's bound on a call, and the store works again when the server
// does. Nothing panics, nothing hangs.
func TestServerFaults(t *testing.T) {
	srv := redistest.Start(t, "--enable-debug-command", "yes")
	s := redisstore.New(srv.Client(t), redisstore.Options{})

	t.Run("restart", func(t *testing.T) {
		before, err := acquire(t, s, "r")
		require.NoError(t, err)
		require.NotZero(t, before.Version)
		srv.Stop()
		_, err = acquire(t, s, "r")
		assert.Error(t, err, "down")
		srv.Restart()
		g, err := acquire(t, s, "r")
		require.NoError(t, err, "back")
		assert.Greater(t, g.Version, before.Version, "a server restarted empty is seeded again by its clients, at a new epoch")
	})
	t.Run("slow", func(t *testing.T) {
		go func() { _ = srv.Do("DEBUG", "SLEEP", "2") }()
		time.Sleep(100 * time.Millisecond)
		t0 := time.Now()
		_, err := acquire(t, s, "r")
		assert.Error(t, err, "a server that does not answer within the call's deadline")
		assert.Less(t, time.Since(t0), 1900*time.Millisecond, "the call's deadline holds (ContextTimeoutEnabled)")
		time.Sleep(2 * time.Second)
		_, err = acquire(t, s, "r")
		assert.NoError(t, err)
	})
	t.Run("script flush", func(t *testing.T) {
		require.NoError(t, srv.Do("SCRIPT", "FLUSH"))
		_, err := acquire(t, s, "r")
		assert.NoError(t, err, "the script is loaded again")
	})
	t.Run("memory full", func(t *testing.T) {
		require.NoError(t, srv.Do("CONFIG", "SET", "maxmemory", "1"))
		g, err := acquire(t, s, "r")
		assert.Error(t, err, "no write: an error, not a grant (%+v)", g)
		require.NoError(t, srv.Do("CONFIG", "SET", "maxmemory", "0"))
		_, err = acquire(t, s, "r")
		assert.NoError(t, err)
	})
}

// Idle scopes vanish with their keys; a scope's keys that another program
// overwrote with other types or other values are repaired, not an error
// for ever.
func TestKeys(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	ctx := context.Background()
	s := redisstore.New(rdb, redisstore.Options{Prefix: "k", KeyTTL: time.Second})
	_, err := acquire(t, s, "idle")
	require.NoError(t, err)
	keys, err := rdb.Keys(ctx, "k:*").Result()
	require.NoError(t, err)
	assert.Len(t, keys, 4, "schedule, law, leases, processes")
	time.Sleep(1100 * time.Millisecond)
	n, err := rdb.DBSize(ctx).Result()
	require.NoError(t, err)
	assert.Zero(t, n, "every key expired")

	// a key emptied (and so deleted) and written again has its life too,
	// though the others' are not yet down to the 7/8 that renews all
	hour := redisstore.New(rdb, redisstore.Options{Prefix: "h", KeyTTL: time.Hour})
	lives := func(what string) {
		t.Helper()
		keys, err := rdb.Keys(ctx, "h:*").Result()
		require.NoError(t, err)
		require.NotEmpty(t, keys)
		for _, k := range keys {
			d, err := rdb.PTTL(ctx, k).Result()
			require.NoError(t, err)
			assert.True(t, d > 7*time.Hour/8 && d <= time.Hour, "%s: %s lives %v", what, k, d)
		}
	}
	g, err := acquire(t, hour, "e")
	require.NoError(t, err)
	lives("a first lease")
	_, err = hour.Return(ctx, fleet.Return{Scope: "e", Process: "p", Lease: g.ID})
	require.NoError(t, err)
	require.NoError(t, rdb.Del(ctx, redisstore.Keys(hour, "e")[1]).Err()) // the law, forgotten
	g, err = acquire(t, hour, "e")
	require.NoError(t, err)
	lives("a lease after the leases' key was emptied, a seed after the law was")
	_, err = hour.Return(ctx, fleet.Return{Scope: "e", Process: "p", Lease: g.ID, State: []byte("s2"), Version: g.Version})
	require.NoError(t, err)
	lives("a commit")
	e := redisstore.Keys(hour, "e")
	require.NoError(t, rdb.Del(ctx, e[1], e[3]).Err()) // the law and the processes, forgotten
	g, err = hour.Lease(ctx, fleet.LeaseRequest{Scope: "e", Process: "p", Rate: 100, Limit: 10, TTL: time.Second})
	require.NoError(t, err)
	lives("the processes seen again")
	_, err = hour.Return(ctx, fleet.Return{Scope: "e", Process: "p", Lease: g.ID, State: []byte("s3")})
	require.NoError(t, err)
	lives("a first commit, on no law")
	require.NoError(t, rdb.PExpire(ctx, e[0], 7*time.Hour/8-time.Minute).Err())
	_, err = acquire(t, hour, "e")
	require.NoError(t, err)
	lives("every key again once the schedule's life is down to 7/8")
	// a run that fails on a key of the wrong type after it made one
	require.NoError(t, rdb.Del(ctx, e[1]).Err())
	require.NoError(t, rdb.Set(ctx, e[2], "x", 0).Err())
	_, err = acquire(t, hour, "e")
	require.NoError(t, err)
	lives("a seed made by a run that then failed")

	for _, corrupt := range []func(key string) error{
		func(key string) error { return rdb.Set(ctx, key, "x", 0).Err() },
		func(key string) error {
			return rdb.HSet(ctx, key, "tat", "x", "pause", "1e400", "version", "v", "state", "s").Err()
		},
		func(key string) error { return rdb.ZAdd(ctx, key, redis.Z{Score: 1, Member: "m"}).Err() },
	} {
		_, err := acquire(t, s, "c")
		require.NoError(t, err)
		keys, err := rdb.Keys(ctx, "k:*").Result()
		require.NoError(t, err)
		for _, k := range keys {
			require.NoError(t, rdb.Del(ctx, k).Err())
			require.NoError(t, corrupt(k))
		}
		g, err := acquire(t, s, "c")
		require.NoError(t, err, "keys %v", keys)
		assert.Less(t, g.Delay, time.Second, "a corrupt schedule reads as empty")
		_, err = s.Return(ctx, fleet.Return{Scope: "c", Process: "p", Lease: g.ID, Pause: time.Second, State: []byte("s"), Version: g.Version})
		require.NoError(t, err)

		// a return and a renewal that meet the corrupt keys first repair
		// them too
		for _, k := range keys {
			require.NoError(t, rdb.Del(ctx, k).Err())
			require.NoError(t, corrupt(k))
		}
		_, err = s.Return(ctx, fleet.Return{Scope: "c", Process: "p", Lease: "p/gone", Pause: time.Second})
		require.NoError(t, err, "a return on corrupt keys")
		for _, k := range keys {
			require.NoError(t, rdb.Del(ctx, k).Err())
			require.NoError(t, corrupt(k))
		}
		require.NoError(t, s.Renew(ctx, "c", "p", []string{"p/gone"}, time.Second), "a renewal on corrupt keys")
	}
}

// A server that is not Redis (or a reply out of shape) is an error wrapping
// ErrReply or the client's, never a panic or a grant made up.
func TestNotRedis(t *testing.T) {
	for _, answer := range []string{"*2\r\n:1\r\n:2\r\n", "*7\r\n:1\r\n:2\r\n:3\r\n:4\r\n:5\r\n:6\r\n:7\r\n", "+OK\r\n", "-ERR no\r\n", "HTTP/1.1 400 Bad Request\r\n\r\n"} {
		s := redisstore.New(redistest.FakeServer(t, answer), redisstore.Options{})
		_, err := acquire(t, s, "x")
		assert.Error(t, err, "%q", answer)
		_, err = s.Return(context.Background(), fleet.Return{Scope: "x", Process: "p"})
		assert.Error(t, err, "%q", answer)
	}
	s := redisstore.New(redistest.FakeServer(t, "*7\r\n$1\r\nl\r\n:1\r\n:2\r\n:3\r\n$-1\r\n:4\r\n:5\r\n"), redisstore.Options{})
	_, err := acquire(t, s, "x")
	assert.ErrorIs(t, err, redisstore.ErrReply, "a version that is a number, not a string")
}

// Three controllers (as three processes would be) crawl two loopback
// hosts through one Redis: the fleet keeps a rate ceiling as one client
// (apart, each would have it) and comes through Redis being killed and
// restarted without a lost request, each process on its share meanwhile;
// nobody sends into a pause another was told of.
func TestFleet(t *testing.T) {
	rs := redistest.Start(t)
	rdb := rs.Client(t)
	site := testserver.NewTest(t, testserver.Config{Network: testserver.Loopback, Hosts: map[string]testserver.Policy{
		"a.test": {Latency: testserver.Latency{Base: 20 * time.Millisecond}},
		// the site is far (40 ms), Redis near (loopback), as in a real
		// fleet: a pause reaches the fleet before anything sent after it
		// reaches the site. (With no round trip to the site, a request
		// sent in the millisecond before the fleet heard of a 429 arrives
		// after it and counts as a violation.)
		"b.test": {
			Limit:   testserver.Limit{Kind: testserver.FixedWindow, N: 6, Window: time.Second},
			Latency: testserver.Latency{RTT: 40 * time.Millisecond, Base: 20 * time.Millisecond},
			Excess:  testserver.Excess{FixedRetryAfter: 2 * time.Second},
		},
	}})
	var logs syncbuf.Buffer
	store := redisstore.New(rdb, redisstore.Options{Prefix: "fleet"})
	var ctrls []*polite.Controller
	for i := range 3 {
		ctrl, err := polite.New(polite.Config{Robots: new(false), JitterSeed: uint64(i + 1), Store: store, Logger:

		// a 429 is the caller's: no tail of retries; starts above the limit: it throttles
		slog.New(slog.NewTextHandler(&logs, nil)), Rules: []polite.Rule{{Domain: "a.test", Rate: 9, InitialRate: 9},
			{Domain: "b.test", MaxRetries: -1, InitialRate: 12}}},
		)
		require.NoError(t, err)
		t.Cleanup(func() { _ = ctrl.Close() })
		ctrls = append(ctrls, ctrl)
	}
	var failed atomic.Int64
	run := func(host string, d time.Duration) {
		var wg sync.WaitGroup
		start := time.Now()
		for i, ctrl := range ctrls {
			hc := &http.Client{Transport: ctrl.Transport(site.Transport())}
			for w := range 3 {
				wg.Go(func() {
					for n := 0; time.Since(start) < d; n++ {
						resp, err := hc.Get(fmt.Sprintf("http://%s/page/%d", host, ((i*3+w)*100+n)%1000))
						if err != nil {
							failed.Add(1)
							t.Logf("%s: %v", host, err)
							continue
						}
						if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusTooManyRequests {
							t.Errorf("%s: %s", host, resp.Status)
						}
						_, _ = io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
					}
				})
			}
		}
		wg.Wait()
		t.Logf("%s: ran %v", host, time.Since(start))
	}

	// a rate ceiling of 9/s is the fleet's; Redis is killed at 1.5 s and
	// back at 3.5 s
	t0 := site.Elapsed()
	time.AfterFunc(1500*time.Millisecond, rs.Stop)
	time.AfterFunc(3500*time.Millisecond, rs.Restart)
	run("a.test", 5*time.Second)
	a := site.Stats("a.test")
	rate := func(from, to time.Duration) float64 {
		n := 0
		for _, at := range a.Accepted {
			if at >= t0+from && at < t0+to {
				n++
			}
		}
		return float64(n) / (to - from).Seconds()
	}
	up, down := rate(250*time.Millisecond, 1500*time.Millisecond), rate(1600*time.Millisecond, 3400*time.Millisecond)
	t.Logf("a.test, ceiling 9/s for the fleet: %.1f/s with Redis, %.1f/s while it is down (each process on a third)", up, down)
	// a window's count is off by one send at either end: 2 sends of slack
	assert.LessOrEqual(t, up, 9+2/1.25)
	assert.GreaterOrEqual(t, up, 9*0.8)
	assert.LessOrEqual(t, down, 9+2/1.8, "each process on its share, not 9/s each")
	assert.Greater(t, down, 9*0.5, "and not stopped")
	assert.Zero(t, failed.Load(), "no request lost")
	out := logs.String()
	assert.Equal(t, 3, strings.Count(out, "shared store unreachable"), "said once per process:\n%s", out)
	assert.Equal(t, 3, strings.Count(out, "shared store back"), "and once back, by 2 s after Redis:\n%s", out)

	// pauses: a host that allows 6/s and asks for 2 s after a 429
	run("b.test", 4*time.Second)
	b := site.Stats("b.test")
	t.Logf("b.test, 6/s: %d accepted, %d 429s, %d pause violations", len(b.Accepted), b.ByStatus[429], b.PauseViolations)
	require.Positive(t, b.ByStatus[429], "the scenario throttles")
	assert.Zero(t, b.PauseViolations, "nobody sends into a pause another was told of")
	assert.Zero(t, failed.Load())
}

// A subscription outlives a restart of Redis: go-redis reconnects and
// subscribes again, and pauses shared after it are heard.
func TestSubscribeSurvivesRestart(t *testing.T) {
	srv := redistest.Start(t)
	s := redisstore.New(srv.Client(t), redisstore.Options{})
	heard := make(chan string, 16)
	cancel := s.Subscribe(func(n fleet.Notice) { heard <- n.Scope })
	defer cancel()
	srv.Stop()
	time.Sleep(2 * time.Second) // long enough for the subscriber to fail to reconnect
	srv.Restart()
	ctx := context.Background()
	deadline := time.Now().Add(10 * time.Second)
	for i := 0; ; i++ {
		scope := fmt.Sprintf("after-%d", i)
		_, err := s.Return(ctx, fleet.Return{Scope: scope, Process: "p", Pause: time.Minute, Reason: fleet.Reason(2) /* backoff */})
		if err == nil {
			select {
			case got := <-heard:
				t.Logf("heard %q %d tries after the restart", got, i)
				return
			case <-time.After(200 * time.Millisecond):
			}
		}
		require.True(t, time.Now().Before(deadline), "no pause heard within 10 s of the restart")
	}
}

// A stored pause reason that is no reason (written by another program, or
// a store of another version) reads as an unknown reason, the pause kept:
// before, it was handed back as it was, the reply was refused as
// unreadable, and every Lease and Return failed until the pause ended
// (the fleet read the store as down, and the pause was not shared).
func TestStoredReasonOutOfRange(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	ctx := context.Background()
	s := redisstore.New(rdb, redisstore.Options{})
	scope := "r.test"
	ask := fleet.LeaseRequest{Scope: scope, Process: "p", Rate: 10, Limit: 4, TTL: 3 * time.Second, MaxWait: 120 * time.Second, Seed: []byte("s")}
	g, err := s.Lease(ctx, ask)
	require.NoError(t, err)
	_, err = s.Return(ctx, fleet.Return{Scope: scope, Process: "p", Lease: g.ID, Pause: 30 * time.Second, Reason: 1})
	require.NoError(t, err)
	for _, bad := range []string{"256", "-1", "1.5", "1e300"} {
		require.NoError(t, rdb.HSet(ctx, redisstore.Keys(s, scope)[0], "reason", bad).Err())
		g, err := s.Lease(ctx, ask)
		require.NoError(t, err, "reason %s", bad)
		assert.Greater(t, g.Paused, 20*time.Second, "reason %s: the pause is kept", bad)
		assert.Zero(t, g.Reason, "reason %s: unknown", bad)
		st, err := s.Return(ctx, fleet.Return{Scope: scope, Process: "p"})
		require.NoError(t, err, "reason %s", bad)
		assert.Greater(t, st.Paused, 20*time.Second)
	}
}

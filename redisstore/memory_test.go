package redisstore_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/colly-polite/polite/fleet"
	"github.com/colly-polite/polite/internal/fleetclient"
	"github.com/colly-polite/polite/internal/redistest"
	"github.com/colly-polite/polite/redisstore"
)

// A scope costs Redis the same few hundred bytes whatever its name: the
// keys hold a hash of the scope, not the scope, so a 100-kB host name
// costs what a short one does. Idle (one send done, its lease given back),
// a scope fits in 600 B; worn (four processes over a second, which fills
// the schedule's ring of accepted counts, a pause, and three of them
// refused while the fourth holds the limit, which writes the queue), in
// 1.25 kB (the queue's three names take the schedule's hash past the
// 64-byte values Redis packs, so its own encoding costs more than the
// names). The queue holds at most 256 names: some 11 kB more with names
// of this length, for a scope with that many processes waiting.
//
//	go test ./redisstore -run TestMemoryPerScope -v
func TestMemoryPerScope(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	s := redisstore.New(rdb, redisstore.Options{})
	name := func(n int) string { return strings.Repeat("x", n-len(".test")) + ".test" }

	t.Run("idle", func(t *testing.T) {
		lengths := map[int][]int{}
		for _, n := range []int{20, 10_000, 100_000} {
			scope := name(n)
			send(t, s, scope, 0, 0)
			total, keys := footprint(t, rdb, 3)
			t.Logf("%6d-byte scope, idle: %d B", n, total)
			assert.LessOrEqual(t, total, int64(600), "%d-byte scope", n)
			lengths[n] = keys
		}
		assert.Equal(t, lengths[20], lengths[10_000], "keys' lengths do not depend on the scope's")
		assert.Equal(t, lengths[20], lengths[100_000], "keys' lengths do not depend on the scope's")
	})
	t.Run("worn", func(t *testing.T) {
		lengths := map[int][]int{}
		for _, n := range []int{20, 10_000, 100_000} {
			scope := name(n)
			for tick := range 9 { // one send in each eighth of a second, and one more
				for p := range 4 {
					send(t, s, scope, p, time.Second)
				}
				if tick < 8 {
					time.Sleep(130 * time.Millisecond)
				}
			}
			queue(t, s, scope, 4)
			total, keys := footprint(t, rdb, 3)
			t.Logf("%6d-byte scope, worn: %d B", n, total)
			assert.LessOrEqual(t, total, int64(1280), "%d-byte scope", n)
			lengths[n] = keys
		}
		assert.Equal(t, lengths[20], lengths[10_000], "keys' lengths do not depend on the scope's")
		assert.Equal(t, lengths[20], lengths[100_000], "keys' lengths do not depend on the scope's")
	})
}

// queue has process 0 take every lease on scope (send's limit), the n-1
// others refused while it holds them (so queued), and the leases given
// back: the queue stays, the others still waiting.
func queue(t *testing.T, s *redisstore.Store, scope string, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ask := func(p int) fleet.Lease {
		g, err := s.Lease(ctx, fleet.LeaseRequest{Scope: scope, Process: processName(p), Rate: 1e6, Limit: limit, TTL: time.Minute})
		require.NoError(t, err)
		return g
	}
	var held []string
	for range limit {
		g := ask(0)
		require.NotEmpty(t, g.ID, "granted")
		held = append(held, g.ID)
	}
	for p := 1; p < n; p++ {
		require.Empty(t, ask(p).ID, "refused: the limit is in use")
	}
	for _, id := range held {
		_, err := s.Return(ctx, fleet.Return{Scope: scope, Process: processName(0), Lease: id})
		require.NoError(t, err)
	}
}

// limit is the concurrency limit the processes ask with.
const limit = 40

// processName is the longest name fleetclient gives a process (a host
// name of 63 bytes, the longest DNS label, a pid of seven digits), process
// p's.
func processName(p int) string {
	return fleetclient.ProcessName(strings.Repeat("h", 63), 4194304, [4]byte{0x9f, 0x3a, 0x1c, byte(p)})
}

// send is one send of process p on scope through s, as the controller
// makes it (a process name as fleetclient's, the law's 62-byte shared part
// committed), with a pause if given.
func send(t *testing.T, s *redisstore.Store, scope string, p int, pause time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	process := processName(p)
	state := []byte(strings.Repeat("s", 62))
	g, err := s.Lease(ctx, fleet.LeaseRequest{Scope: scope, Process: process, Rate: 1000, Limit: limit, TTL: time.Minute, Seed: state})
	require.NoError(t, err)
	require.NotEmpty(t, g.ID, "granted")
	_, err = s.Return(ctx, fleet.Return{Scope: scope, Process: process, Lease: g.ID, State: state, Version: g.Version,
		Accepted: true, Pause: pause, Reason: fleet.Reason(2)})
	require.NoError(t, err)
}

// footprint is the sum of MEMORY USAGE over the server's keys (want of
// them, all of one scope, in one hash slot), and their lengths by name;
// it empties the server for the next scope.
func footprint(t *testing.T, rdb *redis.Client, want int) (int64, []int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	keys, err := rdb.Keys(ctx, "*").Result()
	require.NoError(t, err)
	slices.Sort(keys)
	require.Len(t, keys, want, "schedule, law and processes; the leases are gone: %q", keys)
	var total int64
	var lengths []int
	for _, k := range keys {
		b, err := rdb.MemoryUsage(ctx, k, 0).Result()
		require.NoError(t, err)
		total += b
		lengths = append(lengths, len(k))
		require.NotEmpty(t, hashTag(k), "%.80q: no hash tag, or an empty one, which Cluster ignores", k)
		assert.Equal(t, hashTag(keys[0]), hashTag(k), "every key of a scope in one slot")
		t.Logf("%-60.80s %4d B", k, b)
	}
	require.NoError(t, rdb.FlushDB(ctx).Err())
	return total, lengths
}

// hashTag is the part of key Redis Cluster hashes: between the first '{'
// and the next '}', if not empty.
func hashTag(key string) string {
	i := strings.IndexByte(key, '{')
	if i < 0 {
		return ""
	}
	j := strings.IndexByte(key[i+1:], '}')
	if j <= 0 {
		return ""
	}
	return key[i+1 : i+1+j]
}

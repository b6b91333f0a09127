package redisfrontier_test

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gocolly/colly/v2"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/colly-polite/polite"
	"github.com/colly-polite/polite/adaptive"
	"github.com/colly-polite/polite/frontier"
	"github.com/colly-polite/polite/frontier/redisfrontier"
	"github.com/colly-polite/polite/internal/redistest"
	"github.com/colly-polite/polite/redisstore"
	"github.com/colly-polite/polite/testserver"
)

type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

func TestMain(m *testing.M) {
	redis.SetLogger(quiet{})
	goleak.VerifyTestMain(m)
}

// site is a testserver of hosts, each with pages pages linked five a page
// from its index, fast and generous limits (the test is of the queue).
func site(t *testing.T, pages int, hosts ...string) *testserver.Server {
	cfg := testserver.Config{Hosts: map[string]testserver.Policy{}}
	for _, h := range hosts {
		cfg.Hosts[h] = testserver.Policy{
			Limit:   testserver.Limit{Kind: testserver.TokenBucket, Rate: 200, Burst: 20},
			Latency: testserver.Latency{Base: 5 * time.Millisecond},
			Site:    testserver.Site{Pages: pages},
		}
	}
	return testserver.NewTest(t, cfg)
}

// process is one process of a fleet: a collector following links into a
// queue on the shared frontier, its sends under the fleet's store.
type process struct {
	c       *colly.Collector
	q       *frontier.Queue
	fetched atomic.Int64
}

func newProcess(t *testing.T, srv *testserver.Server, rdb *redis.Client, prefix string, cfg frontier.Config) *process {
	t.Helper()
	return newProcessWith(t, srv, rdb, redisfrontier.Options{Prefix: prefix}, cfg)
}

func newProcessWith(t *testing.T, srv *testserver.Server, rdb *redis.Client, o redisfrontier.Options, cfg frontier.Config) *process {
	t.Helper()
	prefix := o.Prefix
	sh, err := redisfrontier.New(context.Background(), rdb, o)
	require.NoError(t, err)
	c := colly.NewCollector(colly.AllowURLRevisit())
	c.WithTransport(srv.Transport())
	ctrl := adaptive.Attach(c, polite.Config{Robots: new(false), Store: redisstore.New(rdb, redisstore.Options{Prefix: prefix + "-fleet"})})
	t.Cleanup(func() { _ = ctrl.Close() })
	cfg.Shared = sh
	q, err := frontier.New(ctrl, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = q.Close() })
	p := &process{c: c, q: q}
	c.OnHTML("a[href]", func(e *colly.HTMLElement) { _ = q.AddLink(e.Request, e.Attr("href")) })
	c.OnResponse(func(*colly.Response) { p.fetched.Add(1) })
	return p
}

// runAll runs every process's queue at once and requires each Run to
// end without an error.
func runAll(t *testing.T, procs []*process) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make([]error, len(procs))
	for i, p := range procs {
		wg.Go(func() { errs[i] = p.q.Run(p.c) })
	}
	wg.Wait()
	for i := range procs {
		require.NoError(t, errs[i], "process %d", i)
	}
}

// pagedRedis is a redis-server whose hashes are hash tables from their
// first field: small ones are otherwise one listpack, which HSCAN
// returns whole, and the counts' scan would never go by pages.
func pagedRedis(t *testing.T) *redistest.Server {
	t.Helper()
	return redistest.Start(t, "--hash-max-listpack-entries", "0")
}

// pagedPair is a Frontier reading the counts one scope a call, and
// another on the same queue, for another process's adds (a Frontier's
// own adds are in its counts at once).
func pagedPair(t *testing.T, rs *redistest.Server, prefix string) (f, other *redisfrontier.Frontier) {
	t.Helper()
	ctx := context.Background()
	f, err := redisfrontier.New(ctx, rs.Client(t), redisfrontier.Options{Prefix: prefix, CountsPage: 1})
	require.NoError(t, err)
	other, err = redisfrontier.New(ctx, rs.Client(t), redisfrontier.Options{Prefix: prefix})
	require.NoError(t, err)
	return f, other
}

// Three processes crawl two sites through one shared frontier: every page
// is fetched once, by one of them, each takes a part, and each Run returns
// once the whole fleet's queue is empty, whoever added what.
func TestFleetCrawlsEachPageOnce(t *testing.T) {
	rs := redistest.Start(t)
	rdb := rs.Client(t)
	const pages = 60
	srv := site(t, pages, "a.test", "b.test")
	var procs []*process
	for range 3 {
		procs = append(procs, newProcess(t, srv, rdb, "once", frontier.Config{Threads: 4}))
	}
	require.NoError(t, procs[0].q.AddURL(srv.HostURL("a.test")+"/"))
	require.NoError(t, procs[1].q.AddURL(srv.HostURL("b.test")+"/"))
	assert.ErrorIs(t, procs[2].q.AddURL(srv.HostURL("a.test")+"/"), frontier.ErrSeen, "seen by the fleet")
	runAll(t, procs)
	total := 0
	for i, p := range procs {
		n := p.fetched.Load()
		t.Logf("process %d fetched %d", i, n)
		assert.Positive(t, n, "process %d took a part", i)
		total += int(n)
	}
	for _, h := range []string{"a.test", "b.test"} {
		st := srv.Stats(h)
		assert.Equal(t, pages+1, len(st.Accepted), "%s: each page once", h)
		assert.Equal(t, pages+1, st.Requests, "%s: no page twice", h)
	}
	assert.Equal(t, 2*(pages+1), total)
	p := procs[0].q.Progress()
	assert.Equal(t, 2*(pages+1), p.Done, "the fleet's count")
	assert.Zero(t, p.Queued)
	assert.Zero(t, p.Running)
}

// Twelve sites, read by Counts two scopes a call: each process learns of
// the sites the other added a page of the scan at a time, every page is
// still fetched once, and both runs end.
func TestFleetCrawlsScopesReadByPages(t *testing.T) {
	rdb := pagedRedis(t).Client(t)
	const pages = 6
	var hosts []string
	for i := range 12 {
		hosts = append(hosts, fmt.Sprintf("h%d.test", i))
	}
	srv := site(t, pages, hosts...)
	o := redisfrontier.Options{Prefix: "paged", CountsPage: 2}
	procs := []*process{newProcessWith(t, srv, rdb, o, frontier.Config{Threads: 4}), newProcessWith(t, srv, rdb, o, frontier.Config{Threads: 4})}
	for i, h := range hosts {
		require.NoError(t, procs[i%2].q.AddURL(srv.HostURL(h)+"/"))
	}
	runAll(t, procs)
	for _, h := range hosts {
		st := srv.Stats(h)
		assert.Equal(t, pages+1, len(st.Accepted), "%s: each page once", h)
		assert.Equal(t, pages+1, st.Requests, "%s: no page twice", h)
	}
	assert.Equal(t, int64(12*(pages+1)), procs[0].fetched.Load()+procs[1].fetched.Load())
	assert.Zero(t, procs[0].q.Progress().Queued)
}

// Counts reads the scopes another process added a page at a time, keeps what the pages read
// until the scan is through, forgets a scope a take found empty at once,
// and none at all once nothing is queued.
func TestCountsByPages(t *testing.T) {
	rs := pagedRedis(t)
	ctx := context.Background()
	f, other := pagedPair(t, rs, "pages")
	var items []frontier.SharedItem
	for i := range 40 {
		items = append(items, frontier.SharedItem{Scope: fmt.Sprintf("s%d", i%20), Key: []byte(strconv.Itoa(i)), Record: []byte("r")})
	}
	_, err := other.Add(ctx, "o", items)
	require.NoError(t, err)
	c, err := f.Counts(ctx, "o")
	require.NoError(t, err)
	assert.Less(t, len(c.Scopes), 20, "one call reads a page, not every scope")
	assert.GreaterOrEqual(t, c.Queued, 20, "at least a request for each scope with any queued")
	for range 40 {
		if c, err = f.Counts(ctx, "o"); err != nil || len(c.Scopes) == 20 {
			break
		}
	}
	require.NoError(t, err)
	require.Len(t, c.Scopes, 20, "a scan's pages read every scope")
	assert.Equal(t, frontier.ScopeCounts{Queued: 2}, c.Scopes["s3"])
	assert.Equal(t, 40, c.Queued)
	for _, l := range []string{"a", "b", "c"} {
		got, err := f.Take(ctx, []frontier.SharedAsk{{Scope: "s3", Lease: l}}, time.Minute)
		require.NoError(t, err)
		if l == "c" {
			assert.Nil(t, got[0].Record)
		}
	}
	c, err = f.Counts(ctx, "o")
	require.NoError(t, err)
	assert.NotContains(t, c.Scopes, "s3", "a take found it empty")
	var asks []frontier.SharedAsk
	for i := range 20 {
		for j := range 2 {
			asks = append(asks, frontier.SharedAsk{Scope: fmt.Sprintf("s%d", i), Lease: fmt.Sprint(i, "-", j)})
		}
	}
	_, err = f.Take(ctx, asks, time.Minute)
	require.NoError(t, err)
	c, err = f.Counts(ctx, "o")
	require.NoError(t, err)
	assert.Empty(t, c.Scopes, "nothing queued: no scope, whatever the scan read")
	assert.Zero(t, c.Queued)
	assert.Equal(t, 40, c.Leased, "two of each scope's")

	// stored counts gone wrong (a scope with no name no take can ask for,
	// a count that is no number): repaired as the scan reads them, so
	// that they hold no run open
	require.NoError(t, rs.Do("HSET", "{pages}:queued", "0123456789abcdef", "3", "fedcba9876543210", "junk"))
	for range 4 {
		c, err = f.Counts(ctx, "o")
		require.NoError(t, err)
	}
	assert.Zero(t, c.Queued, "nothing that can be taken is queued")
	assert.Empty(t, c.Scopes)
}

// Over 200 scopes another process added, read one a call: a scope this
// process adds is in its next counts whenever the scan reads it, one emptied by a take of its
// last request goes when a pass has not read it, and every one goes at
// once when nothing at all is queued, mid-pass.
func TestCountsScanPasses(t *testing.T) {
	ctx := context.Background()
	f, other := pagedPair(t, pagedRedis(t), "passes")
	var items []frontier.SharedItem
	for i := range 200 {
		items = append(items, frontier.SharedItem{Scope: fmt.Sprintf("s%d", i), Key: []byte(strconv.Itoa(i)), Record: []byte("r")})
	}
	_, err := other.Add(ctx, "o", items)
	require.NoError(t, err)
	c, err := f.Counts(ctx, "o")
	require.NoError(t, err)
	require.Less(t, len(c.Scopes), 200, "a page, not every scope")

	_, err = f.Add(ctx, "o", []frontier.SharedItem{{Scope: "mine", Key: []byte("m"), Record: []byte("r")}})
	require.NoError(t, err)
	c, err = f.Counts(ctx, "o")
	require.NoError(t, err)
	assert.Equal(t, 1, c.Scopes["mine"].Queued, "its own add, before the scan reads it")

	for range 1000 { // passes of some 256 calls: at least two
		c, err = f.Counts(ctx, "o")
		require.NoError(t, err)
	}
	require.Contains(t, c.Scopes, "s7", "read by a pass")
	got, err := f.Take(ctx, []frontier.SharedAsk{{Scope: "s7", Lease: "x"}}, time.Minute)
	require.NoError(t, err)
	require.NotNil(t, got[0].Record)
	for range 1000 {
		c, err = f.Counts(ctx, "o")
		require.NoError(t, err)
	}
	assert.NotContains(t, c.Scopes, "s7", "emptied: gone once a pass did not read it")
	assert.Len(t, c.Scopes, 200, "the other 199 and mine")

	c, err = f.Counts(ctx, "o") // a pass begun, some scopes read in it
	require.NoError(t, err)
	var asks []frontier.SharedAsk
	for i := range 200 {
		if i != 7 {
			asks = append(asks, frontier.SharedAsk{Scope: fmt.Sprintf("s%d", i), Lease: strconv.Itoa(i)})
		}
	}
	asks = append(asks, frontier.SharedAsk{Scope: "mine", Lease: "m"})
	got, err = f.Take(ctx, asks, time.Minute)
	require.NoError(t, err)
	for _, g := range got {
		require.NotNil(t, g.Record, "each take got its scope's last request")
	}
	c, err = f.Counts(ctx, "o")
	require.NoError(t, err)
	assert.Empty(t, c.Scopes, "nothing queued: none, mid-pass")
	assert.Zero(t, c.Queued)
}

// A process that dies holding requests (taken, never ended or renewed)
// returns them when their leases expire: another process fetches them,
// and Requeued says how many came back.
func TestDeadProcessReturnsItsRequests(t *testing.T) {
	rs := redistest.Start(t)
	rdb := rs.Client(t)
	srv := site(t, 10, "a.test")
	alive := newProcess(t, srv, rdb, "dead", frontier.Config{Threads: 2})
	for i := range 10 {
		require.NoError(t, alive.q.AddURL(fmt.Sprintf("%s/page/%d", srv.HostURL("a.test"), i)))
	}
	// the dead one took three, with a lease of 300 ms, and died
	dead, err := redisfrontier.New(context.Background(), rdb, redisfrontier.Options{Prefix: "dead"})
	require.NoError(t, err)
	var asks []frontier.SharedAsk
	for i := range 3 {
		asks = append(asks, frontier.SharedAsk{Scope: "a.test", Lease: fmt.Sprint("dead-", i)})
	}
	got, err := dead.Take(context.Background(), asks, 300*time.Millisecond)
	require.NoError(t, err)
	for _, g := range got {
		require.NotNil(t, g.Record)
	}
	c, err := dead.Counts(context.Background(), "dead")
	require.NoError(t, err)
	assert.Equal(t, 3, c.Leased)
	require.NoError(t, alive.q.Run(alive.c))
	st := srv.Stats("a.test")
	assert.Equal(t, 10, len(st.Accepted), "every page, the dead process's three included")
	assert.Equal(t, 10, st.Requests, "none twice: the dead process sent nothing")
	assert.Equal(t, 3, alive.q.Requeued())
}

// AddURLs adds to the shared queue, in one call, as AddURL does: those
// seen before left out without an error, the others fetched. (It once
// took the path of a queue in memory with a Shared, whose items had no
// request: Run stopped with ErrCorrupt.)
func TestAddURLsShared(t *testing.T) {
	rs := redistest.Start(t)
	srv := site(t, 4, "a.test") // its four pages link to each other only
	p := newProcess(t, srv, rs.Client(t), "addurls", frontier.Config{Threads: 2})
	var urls []string
	for i := range 4 {
		urls = append(urls, fmt.Sprintf("%s/page/%d", srv.HostURL("a.test"), i))
	}
	n, err := p.q.AddURLs(append(urls, urls[0])...)
	require.NoError(t, err)
	assert.Equal(t, 4, n)
	require.NoError(t, p.q.Run(p.c))
	assert.Equal(t, 4, int(p.fetched.Load()))
}

// crawlThroughFault crawls two sites of pages pages and their indexes with
// two processes of three threads on the queue prefix, runs fault (in the
// background) once the second process has fetched at pages, and returns
// the site once both runs returned, each without an error.
func crawlThroughFault(t *testing.T, rdb *redis.Client, prefix string, pages int, at int64, fault func()) *testserver.Server {
	t.Helper()
	srv := site(t, pages, "a.test", "b.test")
	var procs []*process
	for range 2 {
		procs = append(procs, newProcess(t, srv, rdb, prefix, frontier.Config{Threads: 3}))
	}
	require.NoError(t, procs[0].q.AddURL(srv.HostURL("a.test")+"/"))
	require.NoError(t, procs[1].q.AddURL(srv.HostURL("b.test")+"/"))
	var once sync.Once
	var during sync.WaitGroup
	procs[1].c.OnResponse(func(*colly.Response) {
		if procs[1].fetched.Load() == at {
			once.Do(func() { during.Go(fault) })
		}
	})
	var wg sync.WaitGroup
	for _, p := range procs {
		wg.Go(func() { assert.NoError(t, p.q.Run(p.c)) })
	}
	wg.Wait()
	during.Wait()
	return srv
}

// A Redis that lost the queue mid-crawl of two processes (flushed, or
// killed and restarted empty) is built again from what the processes hold:
// every page is fetched, none twice, and both runs end.
func TestLostQueueRestored(t *testing.T) {
	for _, fault := range []string{"flush", "restart"} {
		t.Run(fault, func(t *testing.T) {
			rs := redistest.Start(t)
			const pages = 60
			srv := crawlThroughFault(t, rs.Client(t), "lost", pages, 15, func() {
				if fault == "flush" {
					assert.NoError(t, rs.Do("FLUSHALL"))
					return
				}
				rs.Stop()
				time.Sleep(500 * time.Millisecond)
				rs.Restart()
			})
			for _, h := range []string{"a.test", "b.test"} {
				st := srv.Stats(h)
				assert.Equal(t, pages+1, len(st.Accepted), "%s: every page", h)
				assert.Equal(t, pages+1, st.Requests, "%s: none twice", h)
			}
		})
	}
}

// A process holding requests at its scopes' heads when Redis is flushed
// stops once the queue is built again, before they run: its Run gives
// them back to the new queue, and another process fetches them, each once.
func TestLostQueueHeadsGivenBack(t *testing.T) {
	rs := redistest.Start(t)
	rdb := rs.Client(t)
	ctx := context.Background()
	hosts := []string{"a.test", "b.test", "c.test"}
	cfg := testserver.Config{Hosts: map[string]testserver.Policy{}}
	for _, h := range hosts {
		cfg.Hosts[h] = testserver.Policy{Latency: testserver.Latency{Base: 2 * time.Second}, Site: testserver.Site{Pages: 4}}
	}
	srv := testserver.NewTest(t, cfg)
	var mu sync.Mutex
	fetched := map[string]int{}
	count := func(r *colly.Response) {
		mu.Lock()
		fetched[r.Request.URL.String()]++
		mu.Unlock()
	}
	a := newProcess(t, srv, rdb, "heads", frontier.Config{Threads: 1})
	a.c.OnResponse(count)
	var urls []string
	for _, h := range hosts {
		for i := range 2 {
			urls = append(urls, fmt.Sprintf("%s/page/%d", srv.HostURL(h), i))
		}
	}
	_, err := a.q.AddURLs(urls...)
	require.NoError(t, err)
	sending := make(chan struct{})
	var once sync.Once
	a.c.OnRequest(func(*colly.Request) { once.Do(func() { close(sending) }) })
	ran := make(chan error, 1)
	go func() { ran <- a.q.Run(a.c) }()
	<-sending
	// a head of each scope leased, one of them sent: the others wait
	// behind the one thread
	require.Eventually(t, func() bool { return rdb.ZCard(ctx, "{heads}:expiry").Val() == 4 }, 5*time.Second, 10*time.Millisecond)
	require.NoError(t, rs.Do("FLUSHALL"))
	// built again from a's part (one piece, which sets the epoch)
	require.Eventually(t, func() bool { return rdb.Exists(ctx, "{heads}:epoch").Val() == 1 }, 5*time.Second, 10*time.Millisecond)
	a.q.Stop()
	require.NoError(t, <-ran)
	require.Equal(t, int64(1), a.fetched.Load(), "stopped before its heads ran")

	b := newProcess(t, srv, rdb, "heads", frontier.Config{Threads: 6})
	b.c.OnResponse(count)
	require.NoError(t, b.q.Run(b.c))
	for _, u := range urls {
		assert.Equal(t, 1, fetched[u], "%s: fetched once, by a or b", u)
	}
	for _, h := range hosts {
		st := srv.Stats(h)
		assert.Equal(t, len(st.Accepted), st.Requests, "%s: no page twice", h)
	}
}

// A store fault of 2 s mid-crawl of two processes (queue and send slots
// alike) loses nothing and fails nothing: every page is fetched, once,
// and the crawl resumes when the store answers again. The faults: a Redis
// that hangs (DEBUG SLEEP: each call times out at 1 s), and a proxy before
// it that answers bytes that are not RESP.
func TestStoreFaultsLoseNothing(t *testing.T) {
	for _, fault := range []string{"hang", "garbage"} {
		t.Run(fault, func(t *testing.T) {
			rs := redistest.Start(t, "--enable-debug-command", "yes")
			px := redistest.StartProxy(t, rs.Addr(), 0)
			const pages = 40
			srv := crawlThroughFault(t, redistest.NewClient(t, px.Addr()), fault, pages, 10, func() {
				if fault == "hang" {
					_ = rs.Do("DEBUG", "SLEEP", "2")
					return
				}
				px.Set(redistest.Garbage)
				time.Sleep(2 * time.Second)
				px.Set(redistest.Pass)
			})
			for _, h := range []string{"a.test", "b.test"} {
				st := srv.Stats(h)
				assert.Equal(t, pages+1, len(st.Accepted), "%s: every page, once", h)
				t.Logf("%s: %d requests for %d pages", h, st.Requests, pages+1)
			}
		})
	}
}

// The scripts' bookkeeping: a key seen is not added twice; a lease taken
// again under its name returns its request; a release puts a request back
// at its scope's head; a done lease counts once.
func TestScripts(t *testing.T) {
	rs := redistest.Start(t)
	ctx := context.Background()
	f, err := redisfrontier.New(ctx, rs.Client(t), redisfrontier.Options{Prefix: "scripts"})
	require.NoError(t, err)
	added, err := f.Add(ctx, "owner-a", []frontier.SharedItem{
		{Scope: "s", Key: []byte("1"), Record: []byte("one")},
		{Scope: "s", Key: []byte("2"), Record: []byte("two")},
		{Scope: "s", Key: []byte("1"), Record: []byte("one again")},
	})
	require.NoError(t, err)
	assert.Equal(t, []bool{true, true, false}, added)
	got, err := f.Take(ctx, []frontier.SharedAsk{{Scope: "s", Lease: "a"}, {Scope: "none", Lease: "b"}}, time.Minute)
	require.NoError(t, err)
	assert.Equal(t, "one", string(got[0].Record))
	assert.Nil(t, got[1].Record)
	got, err = f.Take(ctx, []frontier.SharedAsk{{Scope: "s", Lease: "a"}}, time.Minute)
	require.NoError(t, err)
	assert.Equal(t, "one", string(got[0].Record), "a retry under the same name")
	require.NoError(t, f.Release(ctx, []string{"a"}))
	got, err = f.Take(ctx, []frontier.SharedAsk{{Scope: "s", Lease: "c"}}, time.Minute)
	require.NoError(t, err)
	assert.Equal(t, "one", string(got[0].Record), "released to the head")
	require.NoError(t, f.Done(ctx, []frontier.SharedEnd{{Lease: "c"}, {Lease: "c"}, {Lease: "unknown", Failed: true}}))
	c, err := f.Counts(ctx, "owner-a")
	require.NoError(t, err)
	assert.Equal(t, map[string]frontier.ScopeCounts{"s": {Queued: 1, Ended: 1}}, c.Scopes)
	assert.Equal(t, []int64{1, 1, 0, 0}, []int64{int64(c.Queued), c.Done, c.Failed, int64(c.Leased)})
	assert.Equal(t, int64(2), c.Added, "two requests ever added, the repeat not counted, the one ended still")
	assert.Equal(t, [][]byte{got[0].Key}, c.Ended, "the owner hears of its request's end")
	assert.Len(t, got[0].Key, 16)
	c, err = f.Counts(ctx, "owner-a")
	require.NoError(t, err)
	assert.Empty(t, c.Ended, "once")

	// lost: a call says so; a restore starts a new queue, holds its takes
	// for a moment, queues the owner's requests again, and never hands out
	// one whose key ended (or was held) before the loss
	require.NoError(t, rs.Do("FLUSHALL"))
	_, err = f.Counts(ctx, "owner-a")
	assert.True(t, errors.Is(err, frontier.ErrLost), "%v", err)
	piece := frontier.SharedRestore{
		Seen:  [][]byte{[]byte("1"), []byte("2"), []byte("3")},
		Ended: [][]byte{[]byte("3")},
		Items: []frontier.SharedItem{
			{Scope: "s", Key: []byte("2"), Record: []byte("two")},
			{Scope: "s", Key: []byte("3"), Record: []byte("three, ended elsewhere")},
		},
		Done: 5, Failed: 2,
	}
	require.NoError(t, f.Restore(ctx, "owner-a", piece))
	require.NoError(t, f.Restore(ctx, "owner-a", piece), "a piece again counts once")
	c, err = f.Counts(ctx, "owner-a")
	require.NoError(t, err)
	assert.Equal(t, []int64{2, 5, 2}, []int64{int64(c.Queued), c.Done, c.Failed})
	assert.Equal(t, int64(3), c.Added, "a restored queue holds the keys its processes saw")
	assert.Positive(t, c.Held, "takes are held")
	got, err = f.Take(ctx, []frontier.SharedAsk{{Scope: "s", Lease: "d"}}, time.Minute)
	require.NoError(t, err)
	assert.Nil(t, got[0].Record, "held")
	require.NoError(t, rs.Do("SET", "{scripts}:held", "0")) // the moment is over
	got, err = f.Take(ctx, []frontier.SharedAsk{{Scope: "s", Lease: "d"}, {Scope: "s", Lease: "e"}}, time.Minute)
	require.NoError(t, err)
	assert.Equal(t, "two", string(got[0].Record))
	assert.Nil(t, got[1].Record, "three ended before the loss: not handed out")
	c, err = f.Counts(ctx, "owner-a")
	require.NoError(t, err)
	three := sha256.Sum256([]byte("3"))
	assert.Equal(t, [][]byte{three[:16]}, c.Ended, "and its owner told, so that it forgets it")
	added, err = f.Add(ctx, "owner-b", []frontier.SharedItem{{Scope: "s", Key: []byte("1"), Record: []byte("one again")}})
	require.NoError(t, err)
	assert.Equal(t, []bool{false}, added, "the keys seen are the queue's again")

	// lost again between two pieces of a part: the later piece says so,
	// and the part starts again from its first
	require.NoError(t, rs.Do("FLUSHALL"))
	require.NoError(t, f.Restore(ctx, "owner-a", frontier.SharedRestore{Seen: [][]byte{[]byte("1")}}))
	require.NoError(t, rs.Do("FLUSHALL"))
	err = f.Restore(ctx, "owner-a", frontier.SharedRestore{N: 1, Seen: [][]byte{[]byte("2")}})
	assert.True(t, errors.Is(err, frontier.ErrLost), "%v", err)
}

// A restore leases the requests a process held at the loss to it again,
// under their names: a copy that another process queued again is dropped;
// released or expired, a request goes back to its scope's head and is
// handed out once; an end counts and its holder hears of it.
func TestScriptsRestoredLeases(t *testing.T) {
	rs := redistest.Start(t)
	ctx := context.Background()
	f, err := redisfrontier.New(ctx, rs.Client(t), redisfrontier.Options{Prefix: "restored"})
	require.NoError(t, err)
	require.NoError(t, rs.Do("FLUSHALL"))
	_, err = f.Counts(ctx, "owner-a")
	require.ErrorIs(t, err, frontier.ErrLost)
	hash := func(k string) []byte { h := sha256.Sum256([]byte(k)); return h[:16] }
	held := func(lease, key string) frontier.SharedLease {
		return frontier.SharedLease{Lease: lease, SharedItem: frontier.SharedItem{Scope: "s", Key: []byte(key), Record: []byte(key + ", held by b")}}
	}
	// a, which added x and w, is restored before b, which held x, y, w
	// and z at the loss (z for no time: its lease has expired), and after
	// it for w
	require.NoError(t, f.Restore(ctx, "owner-a", frontier.SharedRestore{
		Seen: [][]byte{[]byte("x"), []byte("w")}, Items: []frontier.SharedItem{{Scope: "s", Key: []byte("x"), Record: []byte("x, a's")}},
	}))
	require.NoError(t, f.Restore(ctx, "owner-b", frontier.SharedRestore{
		Leases: []frontier.SharedLease{held("lx", "x"), held("ly", "y"), held("lw", "w")}, TTL: time.Minute,
	}))
	require.NoError(t, f.Restore(ctx, "owner-b", frontier.SharedRestore{N: 1, Leases: []frontier.SharedLease{held("lz", "z")}}))
	require.NoError(t, f.Restore(ctx, "owner-a", frontier.SharedRestore{
		N: 1, Items: []frontier.SharedItem{{Scope: "s", Key: []byte("w"), Record: []byte("w, a's")}},
	}))
	require.NoError(t, rs.Do("SET", "{restored}:held", "0"))
	c, err := f.Counts(ctx, "owner-a")
	require.NoError(t, err)
	assert.Equal(t, [][]byte{hash("w")}, c.Ended, "a's w is not queued: b holds it")

	take := func(lease string) string {
		t.Helper()
		got, err := f.Take(ctx, []frontier.SharedAsk{{Scope: "s", Lease: lease}}, time.Minute)
		require.NoError(t, err)
		return string(got[0].Record)
	}
	// z's lease expired: back, with a pass; a's x is dropped, a told
	assert.Equal(t, "z, held by b", take("t1"))
	assert.Empty(t, take("t2"), "a's copy of x dropped: b holds x")
	c, err = f.Counts(ctx, "owner-a")
	require.NoError(t, err)
	assert.Equal(t, [][]byte{hash("x")}, c.Ended)
	assert.Equal(t, int64(1), c.Returned)
	assert.Equal(t, 4, c.Leased, "x, y, w and z's new lease")

	require.NoError(t, f.Release(ctx, []string{"lx", "t1"}))
	assert.Equal(t, "z, held by b", take("t3"), "released: handed out")
	assert.Equal(t, "x, held by b", take("t4"))
	assert.Empty(t, take("t5"))
	require.NoError(t, f.Release(ctx, []string{"t4"}))
	assert.Equal(t, "x, held by b", take("t6"), "released again: handed out again")
	require.NoError(t, f.Done(ctx, []frontier.SharedEnd{{Lease: "ly"}, {Lease: "t6"}, {Lease: "t3", Failed: true}}))
	c, err = f.Counts(ctx, "owner-b")
	require.NoError(t, err)
	assert.ElementsMatch(t, [][]byte{hash("y"), hash("x"), hash("z")}, c.Ended, "b's now: it hears of their ends")
	assert.Equal(t, []int64{2, 1, 1}, []int64{c.Done, c.Failed, int64(c.Leased)}, "w still held")
	assert.Zero(t, c.Queued)
}

// A lease lives 300 ms and each page takes 500 ms: renewed every 100 ms
// while its process holds it, no lease expires, and no page comes back.
func TestLeasesRenewedWhileHeld(t *testing.T) {
	rs := redistest.Start(t)
	rdb := rs.Client(t)
	cfg := testserver.Config{Hosts: map[string]testserver.Policy{"a.test": {
		Latency: testserver.Latency{Base: 500 * time.Millisecond}, Site: testserver.Site{Pages: 6}}}}
	srv := testserver.NewTest(t, cfg)
	p := newProcess(t, srv, rdb, "renew", frontier.Config{Threads: 3, LeaseTTL: 300 * time.Millisecond})
	require.NoError(t, p.q.AddURL(srv.HostURL("a.test")+"/"))
	require.NoError(t, p.q.Run(p.c))
	st := srv.Stats("a.test")
	assert.Equal(t, 7, len(st.Accepted))
	assert.Equal(t, 7, st.Requests, "no page twice")
	assert.Zero(t, p.q.Requeued(), "no lease expired")
}

// flaky is a Shared whose calls fail as told.
type flaky struct {
	*redisfrontier.Frontier
	addFails  atomic.Int32 // the next adds that fail (after the store applied them)
	doneFails atomic.Bool  // every Done fails
}

var errFlaky = errors.New("flaky: a fault")

func (f *flaky) Add(ctx context.Context, owner string, items []frontier.SharedItem) ([]bool, error) {
	added, err := f.Frontier.Add(ctx, owner, items)
	if f.addFails.Add(-1) >= 0 {
		return nil, errFlaky // applied, but the reply was lost
	}
	return added, err
}

func (f *flaky) Done(ctx context.Context, ends []frontier.SharedEnd) error {
	if f.doneFails.Load() {
		return errFlaky
	}
	return f.Frontier.Done(ctx, ends)
}

// An add whose reply is lost is tried again (a link found on a page is
// lost otherwise), and the request it had already added counts as added.
// A Close while every end fails returns anyway.
func TestFaultsOfTheStore(t *testing.T) {
	rs := redistest.Start(t)
	rdb := rs.Client(t)
	srv := site(t, 5, "a.test")
	sh, err := redisfrontier.New(context.Background(), rdb, redisfrontier.Options{Prefix: "flaky"})
	require.NoError(t, err)
	fl := &flaky{Frontier: sh}
	c := colly.NewCollector()
	c.WithTransport(srv.Transport())
	ctrl := adaptive.Attach(c, polite.Config{Robots: new(false)})
	q, err := frontier.New(ctrl, frontier.Config{Threads: 2, Shared: fl})
	require.NoError(t, err)
	fl.addFails.Store(2)
	require.NoError(t, q.AddURL(srv.HostURL("a.test")+"/page/1"), "tried again, and not ErrSeen")
	assert.Equal(t, 1, q.Size())
	require.NoError(t, q.Run(c))
	assert.Equal(t, 1, len(srv.Stats("a.test").Accepted))
	fl.doneFails.Store(true)
	require.NoError(t, q.AddURL(srv.HostURL("a.test")+"/page/2"))
	done := make(chan struct{})
	go func() {
		_ = q.Run(c) // its end cannot reach the store
		_ = q.Close()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("Run and Close hang while the store fails every end")
	}
	_ = ctrl.Close()
}

// A process that stops gives the heads it holds back when its Run
// returns: another process takes them, and its Run ends.
func TestStoppedProcessHoldsNothing(t *testing.T) {
	rs := redistest.Start(t)
	rdb := rs.Client(t)
	const pages = 30
	srv := site(t, pages, "a.test", "b.test")
	a := newProcess(t, srv, rdb, "stopped", frontier.Config{Threads: 2})
	b := newProcess(t, srv, rdb, "stopped", frontier.Config{Threads: 2})
	require.NoError(t, a.q.AddURL(srv.HostURL("a.test")+"/"))
	require.NoError(t, a.q.AddURL(srv.HostURL("b.test")+"/"))
	a.c.OnResponse(func(*colly.Response) {
		if a.fetched.Load() == 10 {
			a.q.Stop()
		}
	})
	require.NoError(t, a.q.Run(a.c))
	done := make(chan error, 1)
	go func() { done <- b.q.Run(b.c) }()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(60 * time.Second):
		t.Fatal("b's Run did not end: a still holds requests")
	}
	for _, h := range []string{"a.test", "b.test"} {
		assert.Equal(t, pages+1, len(srv.Stats(h).Accepted), h)
	}
	assert.Zero(t, b.q.Requeued(), "given back, not expired")
}

// A record of the shared queue that does not decode (another program's)
// fails, and the crawl goes on.
func TestBadRecordFails(t *testing.T) {
	rs := redistest.Start(t)
	rdb := rs.Client(t)
	srv := site(t, 3, "a.test")
	p := newProcess(t, srv, rdb, "bad", frontier.Config{Threads: 1})
	sh, err := redisfrontier.New(context.Background(), rdb, redisfrontier.Options{Prefix: "bad"})
	require.NoError(t, err)
	// a plain record (format 2, a checksum that holds) with a depth
	// beyond any: it passes the read's check and fails to decode
	payload := append(binary.AppendUvarint(nil, 1<<40), "http://a.test/"...)
	rec := binary.BigEndian.AppendUint32([]byte{2}, crc32.ChecksumIEEE(payload))
	_, err = sh.Add(context.Background(), "another", []frontier.SharedItem{{Scope: "a.test", Key: []byte("bad"), Record: append(rec, payload...)}})
	require.NoError(t, err)
	require.NoError(t, p.q.AddURL(srv.HostURL("a.test")+"/page/1"))
	require.NoError(t, p.q.Run(p.c))
	// the three pages (they link to each other), not the bad record's "/"
	assert.Equal(t, 3, len(srv.Stats("a.test").Accepted))
	assert.Equal(t, 1, p.q.Progress().Failed)
}

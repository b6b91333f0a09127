package frontier_test

import (
	"bufio"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gocolly/colly/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.etcd.io/bbolt"

	"github.com/colly-polite/polite"
	"github.com/colly-polite/polite/adaptive"
	"github.com/colly-polite/polite/frontier"
	"github.com/colly-polite/polite/testserver"
)

// A queue in a file: Stop leaves the rest in it, Close releases it, and a
// queue opened on it again finds each scope's FIFO in order; a request
// added before (done or queued) is not added again, after a restart too.
func TestFrontierFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "q.db")
	synctest.Test(t, func(t *testing.T) {
		srv := testserver.NewTest(t, testserver.Config{Hosts: map[string]testserver.Policy{"a.test": {}, "b.test": {}}})
		var order []string
		var mu sync.Mutex
		crawl := func(stopAfter int) (*frontier.Queue, *colly.Collector) {
			c := colly.NewCollector(colly.AllowURLRevisit())
			c.WithTransport(srv.Transport())
			ctrl := adaptive.Attach(c, polite.Config{Robots: new(false), Default: polite.Rule{Rate: 10, InitialRate: 10}})
			q, err := frontier.New(ctrl, frontier.Config{Threads: 1, Path: path})
			require.NoError(t, err)
			c.OnResponse(func(r *colly.Response) {
				mu.Lock()
				order = append(order, r.Request.URL.Host+r.Request.URL.Path)
				n := len(order)
				mu.Unlock()
				if n == stopAfter {
					q.Stop()
				}
			})
			return q, c
		}
		q, c := crawl(5)
		for i := range 6 {
			for _, h := range []string{"a.test", "b.test"} {
				require.NoError(t, q.AddURL(fmt.Sprintf("%s/page/%d", srv.HostURL(h), i)))
			}
		}
		assert.ErrorIs(t, q.AddURL(srv.HostURL("a.test")+"/page/0"), frontier.ErrSeen)
		assert.Equal(t, 12, q.Size())
		require.NoError(t, q.Run(c))
		assert.Equal(t, 7, q.Size())
		require.NoError(t, q.Close())
		require.NoError(t, q.Close(), "idempotent")
		assert.ErrorIs(t, q.AddURL(srv.HostURL("a.test")+"/page/9"), frontier.ErrClosed)
		assert.ErrorIs(t, q.Run(c), frontier.ErrClosed)

		q, c = crawl(0)
		assert.Zero(t, q.Requeued(), "closed cleanly")
		assert.Equal(t, 7, q.Size())
		assert.Equal(t, []frontier.Backlog{{Scope: "a.test", Queued: 3}, {Scope: "b.test", Queued: 4}}, q.Backlogs())
		for _, u := range []string{"/page/0", "/page/5"} { // one done, one queued
			assert.ErrorIs(t, q.AddURL(srv.HostURL("a.test")+u), frontier.ErrSeen, u)
		}
		require.NoError(t, q.Run(c))
		assert.Zero(t, q.Size())
		require.NoError(t, q.Close())
		assert.Len(t, order, 12, "each URL once over both runs")
		var a, b []string
		for _, u := range order {
			if strings.HasPrefix(u, "a.test") {
				a = append(a, u)
			} else {
				b = append(b, u)
			}
		}
		for i := range 6 {
			assert.Equal(t, fmt.Sprintf("a.test/page/%d", i), a[i], "each scope in its order")
			assert.Equal(t, fmt.Sprintf("b.test/page/%d", i), b[i])
		}
		assert.Equal(t, 6, srv.Stats("a.test").Requests)
	})
}

// A file that is not a queue, a truncated one, one of another version and
// one with a damaged record each fail New with a clear error, never an
// empty queue; so does a file another queue holds, within a second.
func TestFrontierFileErrors(t *testing.T) {
	ctrl, err := polite.New(polite.Config{})
	require.NoError(t, err)
	dir := t.TempDir()
	open := func(path string) error {
		q, err := frontier.New(ctrl, frontier.Config{Path: path})
		if err == nil {
			q.Close()
		}
		return err
	}

	good := filepath.Join(dir, "good.db")
	q, err := frontier.New(ctrl, frontier.Config{Path: good, NoSync: true})
	require.NoError(t, err)
	for i := range 2000 {
		require.NoError(t, q.AddURL(fmt.Sprintf("http://h%d.test/%d/%s", i%7, i, strings.Repeat("x", i%50))))
	}
	start := time.Now()
	err = open(good)
	assert.ErrorIs(t, err, frontier.ErrLocked)
	assert.Less(t, time.Since(start), 1500*time.Millisecond)
	require.NoError(t, q.Close())
	raw, err := os.ReadFile(good)
	require.NoError(t, err)

	// either meta page damaged: bbolt keeps two, and the other is in force
	for _, page := range []int{0, 1} {
		meta := filepath.Join(dir, fmt.Sprintf("meta%d.db", page))
		b := append([]byte{}, raw...)
		b[page*os.Getpagesize()+16+20] ^= 0xff // inside the meta, under its checksum
		require.NoError(t, os.WriteFile(meta, b, 0o600))
		assert.NoError(t, open(meta), "meta page %d damaged", page)
	}

	garbage := filepath.Join(dir, "garbage.db")
	require.NoError(t, os.WriteFile(garbage, []byte(strings.Repeat("not a queue\n", 2000)), 0o600))
	assert.ErrorIs(t, open(garbage), frontier.ErrCorrupt)

	for _, n := range []int{len(raw) / 2, 4096 + 100, 100} {
		cut := filepath.Join(dir, fmt.Sprintf("cut%d.db", n))
		require.NoError(t, os.WriteFile(cut, raw[:n], 0o600))
		assert.ErrorIs(t, open(cut), frontier.ErrCorrupt, "truncated to %d of %d bytes", n, len(raw))
	}

	other := filepath.Join(dir, "other.db")
	require.NoError(t, os.WriteFile(other, raw, 0o600))
	db, err := bbolt.Open(other, 0o600, nil)
	require.NoError(t, err)
	require.NoError(t, db.Update(func(tx *bbolt.Tx) error {
		return tx.Bucket([]byte("meta")).Put([]byte("format"), []byte("colly-polite frontier 99"))
	}))
	require.NoError(t, db.Close())
	err = open(other)
	assert.ErrorIs(t, err, frontier.ErrFormat)
	assert.ErrorContains(t, err, "frontier 99")

	foreign := filepath.Join(dir, "foreign.db")
	db, err = bbolt.Open(foreign, 0o600, nil)
	require.NoError(t, err)
	require.NoError(t, db.Update(func(tx *bbolt.Tx) error { _, err := tx.CreateBucket([]byte("someone-else")); return err }))
	require.NoError(t, db.Close())
	assert.ErrorIs(t, open(foreign), frontier.ErrFormat, "no version record")

	damaged := filepath.Join(dir, "damaged.db")
	require.NoError(t, os.WriteFile(damaged, raw, 0o600))
	db, err = bbolt.Open(damaged, 0o600, nil)
	require.NoError(t, err)
	require.NoError(t, db.Update(func(tx *bbolt.Tx) error {
		c := tx.Bucket([]byte("items")).Cursor()
		k, v := c.First()
		bad := append([]byte{}, v...)
		bad[len(bad)-2] ^= 0xff
		return tx.Bucket([]byte("items")).Put(k, bad)
	}))
	require.NoError(t, db.Close())
	assert.ErrorIs(t, open(damaged), frontier.ErrCorrupt, "a record that fails its checksum")

	// a damaged record behind a scope's head: New reads only heads, so Run
	// meets it at its turn and stops with ErrCorrupt
	behind := filepath.Join(dir, "behind.db")
	q, err = frontier.New(ctrl, frontier.Config{Path: behind})
	require.NoError(t, err)
	_, err = q.AddURLs("http://a.test/1", "http://a.test/2", "http://a.test/3")
	require.NoError(t, err)
	require.NoError(t, q.Close())
	db, err = bbolt.Open(behind, 0o600, nil)
	require.NoError(t, err)
	require.NoError(t, db.Update(func(tx *bbolt.Tx) error {
		k, v := tx.Bucket([]byte("items")).Cursor().Last()
		bad := append([]byte{}, v...)
		bad[len(bad)-1] ^= 0xff
		return tx.Bucket([]byte("items")).Put(k, bad)
	}))
	require.NoError(t, db.Close())
	c := colly.NewCollector()
	c.WithTransport(instant{})
	cctrl := adaptive.Attach(c, polite.Config{Robots: new(false), Default: polite.Rule{Rate: 1000, InitialRate: 1000}})
	q, err = frontier.New(cctrl, frontier.Config{Path: behind})
	require.NoError(t, err)
	assert.Equal(t, 3, q.Size())
	assert.ErrorIs(t, q.Run(c), frontier.ErrCorrupt)
	assert.Equal(t, 1, q.Size(), "the two before it were sent; it is left, unread")
	assert.ErrorIs(t, q.AddURL("http://a.test/4"), frontier.ErrCorrupt, "the queue stays unusable")
	require.NoError(t, q.Close())

	empty := filepath.Join(dir, "empty.db")
	require.NoError(t, os.WriteFile(empty, nil, 0o600))
	assert.NoError(t, open(empty), "an empty file is a new queue")
}

// The crash test: a child process (this test binary again) crawls from a
// file, adding URLs while it runs, and is killed with SIGKILL; a second
// child resumes on the same file. Every URL the first reported added is
// fetched, and the only URLs fetched twice are those in flight at the
// kill, which the second reports (Requeued). While the first runs, the
// file cannot be opened here (ErrLocked, within a second).
func TestFrontierKillResume(t *testing.T) {
	if os.Getenv("FRONTIER_CHILD") != "" {
		crashChild()
		return
	}
	if testing.Short() {
		t.Skip("runs two child processes for a few seconds")
	}
	var mu sync.Mutex
	fetched := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		fetched[r.URL.Path]++
		mu.Unlock()
		time.Sleep(20 * time.Millisecond)
		fmt.Fprint(w, "<html>ok</html>")
	}))
	defer srv.Close()
	total := func() (n int) {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range fetched {
			n += c
		}
		return n
	}
	path := filepath.Join(t.TempDir(), "crawl.db")
	child := func(mode string) (*exec.Cmd, *bufio.Scanner) {
		cmd := exec.Command(os.Args[0], "-test.run=^TestFrontierKillResume$", "-test.count=1")
		cmd.Env = append(os.Environ(), "FRONTIER_CHILD="+mode, "FRONTIER_PATH="+path, "FRONTIER_URL="+srv.URL)
		cmd.Stderr = os.Stderr
		out, err := cmd.StdoutPipe()
		require.NoError(t, err)
		require.NoError(t, cmd.Start())
		return cmd, bufio.NewScanner(out)
	}

	first, out := child("seed")
	added := map[string]bool{}
	lines := make(chan string)
	go func() {
		for out.Scan() {
			lines <- out.Text()
		}
		close(lines)
	}()
	deadline := time.After(20 * time.Second)
	for total() < 60 {
		select {
		case l, ok := <-lines:
			require.True(t, ok, "the first child ended early")
			if u, ok := strings.CutPrefix(l, "added "); ok {
				added[u] = true
			}
		case <-deadline:
			t.Fatal("the first child did not crawl")
		}
	}
	ctrl, err := polite.New(polite.Config{})
	require.NoError(t, err)
	start := time.Now()
	_, err = frontier.New(ctrl, frontier.Config{Path: path})
	assert.ErrorIs(t, err, frontier.ErrLocked, "the file is the running child's")
	assert.Less(t, time.Since(start), 1500*time.Millisecond)
	require.NoError(t, first.Process.Signal(syscall.SIGKILL))
	for l := range lines { // what it printed before the kill
		if u, ok := strings.CutPrefix(l, "added "); ok {
			added[u] = true
		}
	}
	_ = first.Wait()
	before := total()
	t.Logf("killed after %d fetches, %d URLs added", before, len(added))
	require.Greater(t, len(added), 60)
	require.Less(t, len(added), 400, "killed while it was still adding")

	second, out := child("resume")
	requeued := -1
	for out.Scan() {
		if n, ok := strings.CutPrefix(out.Text(), "requeued "); ok {
			requeued, _ = strconv.Atoi(n)
		}
	}
	require.NoError(t, second.Wait())
	require.GreaterOrEqual(t, requeued, 0, "the second child reported what was in flight")
	mu.Lock()
	defer mu.Unlock()
	twice := 0
	for u := range added {
		assert.Positive(t, fetched[u], "%s was added, then lost", u)
	}
	for u, n := range fetched {
		// the one add that may have been committed, not yet reported, at the kill
		assert.True(t, added[u] || u == fmt.Sprintf("/page/%d", len(added)), "%s fetched but never added", u)
		assert.LessOrEqual(t, n, 2, u)
		if n > 1 {
			twice++
		}
	}
	t.Logf("%d requeued at the resume, %d fetched twice, %d URLs", requeued, twice, len(fetched))
	assert.LessOrEqual(t, twice, requeued, "only those in flight at the kill are fetched again")
	// in flight in the file: handed to a thread (at most Threads), or done
	// with its done mark not yet committed (those done while a commit ran,
	// at most Threads more)
	assert.LessOrEqual(t, requeued, 2*4, "at most twice Threads in flight")
}

// crashChild is a child of TestFrontierKillResume: "seed" adds 400 URLs
// while it crawls (printing each once AddURL has returned) and runs until
// it is killed; "resume" crawls what is left and prints Requeued.
func crashChild() {
	mode, path, base := os.Getenv("FRONTIER_CHILD"), os.Getenv("FRONTIER_PATH"), os.Getenv("FRONTIER_URL")
	c := colly.NewCollector(colly.Async())
	ctrl := adaptive.Attach(c, polite.Config{Robots: new(false), Default: polite.Rule{Rate: 200, InitialRate: 200}})
	q, err := frontier.New(ctrl, frontier.Config{Threads: 4, Path: path})
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		os.Exit(2)
	}
	if mode == "resume" {
		fmt.Println("requeued", q.Requeued())
		if err := errors.Join(q.Run(c), q.Close()); err != nil {
			fmt.Fprintln(os.Stderr, "child:", err)
			os.Exit(2)
		}
		os.Exit(0)
	}
	go func() {
		for i := range 400 {
			u := fmt.Sprintf("/page/%d", i)
			if err := q.AddURL(base + u); err != nil {
				fmt.Fprintln(os.Stderr, "child:", err)
				os.Exit(2)
			}
			fmt.Println("added", u)
			time.Sleep(5 * time.Millisecond) // a crawl discovers its URLs as it goes
		}
	}()
	for {
		_ = q.Run(c) // returns when it catches up with the adds; go on until killed
		time.Sleep(5 * time.Millisecond)
	}
}

// AddURLs writes many in one commit and leaves out those seen before;
// one bad URL fails the call with nothing added.
func TestFrontierAddURLs(t *testing.T) {
	ctrl, err := polite.New(polite.Config{})
	require.NoError(t, err)
	for _, path := range []string{"", filepath.Join(t.TempDir(), "q.db")} {
		q, err := frontier.New(ctrl, frontier.Config{Path: path, MaxSize: 1000})
		require.NoError(t, err)
		n, err := q.AddURLs()
		assert.Zero(t, n)
		assert.NoError(t, err)
		n, err = q.AddURLs("http://a.test/1", "http://b.test/1", "http://a.test/2")
		assert.Equal(t, 3, n, path)
		assert.NoError(t, err)
		n, err = q.AddURLs("http://a.test/3", "/relative")
		assert.Zero(t, n)
		assert.Error(t, err)
		if path != "" {
			n, err = q.AddURLs("http://a.test/1", "http://a.test/4")
			assert.Equal(t, 1, n, "the one seen before is left out")
			assert.NoError(t, err)
		}
		want := 2
		if path != "" {
			want = 3
		}
		assert.Equal(t, []frontier.Backlog{{Scope: "a.test", Queued: want}, {Scope: "b.test", Queued: 1}}, q.Backlogs())
		require.NoError(t, q.Close())
	}
}

// A URL too long for the file's keys (40,000 characters, as a hostile
// page may link) is kept by its hash, and seen as itself: the queue goes
// on, and runs it. Before, bbolt refused the key, the commit failed, and
// the queue was broken for good: every later AddURL and Run failed with
// "key too large".
func TestFrontierFileLongURL(t *testing.T) {
	path := filepath.Join(t.TempDir(), "q.db")
	synctest.Test(t, func(t *testing.T) {
		srv := testserver.NewTest(t, testserver.Config{Hosts: map[string]testserver.Policy{"a.test": {}}})
		c := colly.NewCollector(colly.AllowURLRevisit())
		c.WithTransport(srv.Transport())
		ctrl := adaptive.Attach(c, polite.Config{Robots: new(false)})
		q, err := frontier.New(ctrl, frontier.Config{Threads: 1, Path: path})
		require.NoError(t, err)
		long := srv.HostURL("a.test") + "/" + strings.Repeat("x", 40_000)
		require.NoError(t, q.AddURL(long))
		assert.ErrorIs(t, q.AddURL(long), frontier.ErrSeen, "seen as itself")
		require.NoError(t, q.AddURL(srv.HostURL("a.test")+"/page/1"))
		var got atomic.Int64
		c.OnResponse(func(*colly.Response) { got.Add(1) })
		c.OnError(func(*colly.Response, error) { got.Add(1) }) // (the server may refuse so long a URL: it was run)
		require.NoError(t, q.Run(c))
		assert.Equal(t, int64(2), got.Load())
		require.NoError(t, q.Close())
	})
}

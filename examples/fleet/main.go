// Fleet runs several processes as one polite client. Each process is a
// Colly collector made polite with adaptive.Attach, and all of them share
// one Redis through polite.Config.Store and package redisstore: the host
// sees one send schedule, one estimate of its limit, one pause and one
// concurrency budget, however many processes crawl it.
//
// The program starts a redis-server of its own on a loopback port (or uses
// REDIS_URL), the bundled testserver with one host, a.test, hiding a fixed
// window of 20 req/s with 100 ms per page, and then copies of itself
// (-procs, 3 by default), each crawling a.test with 4 goroutines. Every
// second it prints each process's sends (its share), the fleet's total and
// what the server accepted and rejected; at the end, each process's share
// and the fleet's goodput against the hidden capacity. Alone, each process
// would find 20/s for itself and the three would send 60/s; together they
// send about 20.
//
// Run it from the repository root:
//
//	go run ./examples/fleet             # 30 s, 3 processes
//	go run ./examples/fleet -procs 5
//	go run ./examples/fleet -short      # 5 s smoke run
//
// It needs redis-server on PATH (Debian: apt-get install redis-server) or
// REDIS_URL. The processes stop by themselves at the end of the run, or
// when this program ends.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/colly-polite/polite"

	"github.com/gocolly/colly/v2"
	"github.com/redis/go-redis/v9"

	"github.com/colly-polite/polite/adaptive"
	"github.com/colly-polite/polite/internal/demo" // helpers shared by this repository's programs
	"github.com/colly-polite/polite/redisstore"
	"github.com/colly-polite/polite/testserver"
)

const (
	host     = "a.test"
	capacity = 20 // the hidden limit, req/s
)

// childFlag, as the first argument, makes this program one process of the
// fleet (main starts them).
const childFlag = "-child"

func main() {
	if len(os.Args) > 1 && os.Args[1] == childFlag {
		if err := child(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		return
	}
	duration := flag.Duration("duration", 30*time.Second, "how long to crawl")
	procs := flag.Int("procs", 3, "processes in the fleet")
	workers := flag.Int("workers", 4, "goroutines per process")
	short := flag.Bool("short", false, "a 5 s smoke run")
	flag.Parse()
	demo.Short(*short, map[string]string{"duration": "5s"}) // unless -duration is given
	if *procs < 1 || *workers < 1 || *duration < time.Second {
		fmt.Fprintln(os.Stderr, "fleet: -procs and -workers must be at least 1, -duration at least 1s")
		os.Exit(2)
	}

	url, rs, err := demo.Redis() // REDIS_URL, or a redis-server of our own
	if errors.Is(err, demo.ErrNoRedis) {
		if demo.RedisOptional(*short) {
			fmt.Println("fleet: skipped: redis-server is not on PATH and REDIS_URL is not set (Debian: apt-get install redis-server)")
			return
		}
		fmt.Fprintln(os.Stderr, "fleet: this example needs Redis: install redis-server (Debian: apt-get install redis-server) or set REDIS_URL")
		os.Exit(1)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "fleet:", err)
		os.Exit(1)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	where := "REDIS_URL" // not printed: it may hold a password
	if rs != nil {
		where = "redis-server on " + rs.Addr()
	}
	err = run(ctx, url, where, *procs, *workers, *duration)
	stop()
	if rs != nil {
		rs.Close()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "fleet:", err)
		os.Exit(1)
	}
}

// report is one line a process prints each second: what it sent in
// second Second of the run.
type report struct {
	Proc   int `json:"proc"`
	Second int `json:"second"`
	Sent   int `json:"sent"`
}

// run starts the server and the fleet, prints the fleet's seconds as they
// come and a summary, and stops every process it started (also when ctx
// ends: Ctrl-C).
func run(ctx context.Context, url, where string, procs, workers int, duration time.Duration) error {
	srv, err := testserver.New(testserver.Config{Network: testserver.Loopback, Hosts: map[string]testserver.Policy{
		host: {Limit: testserver.Limit{Kind: testserver.FixedWindow, N: capacity, Window: time.Second},
			Latency: testserver.Latency{Base: 100 * time.Millisecond}},
	}})
	if err != nil {
		return err
	}
	defer srv.Close()
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	// the processes count their seconds from the server's start, on the
	// wall clock they share
	start := time.Now().Add(-srv.Elapsed())
	end := start.Add(duration)
	addr := srv.HostURL(host)[len("http://"):] // 127.0.0.1:PORT
	prefix := "fleet-example:" + strconv.FormatInt(start.UnixNano(), 10)

	var (
		mu   sync.Mutex
		sent = map[int]map[int]int{} // second -> process -> sends; guarded by mu
	)
	var cmds []*exec.Cmd
	var reading sync.WaitGroup
	defer func() {
		for _, cmd := range cmds {
			_ = cmd.Process.Kill() // those still running; the others are gone already
			_ = cmd.Wait()
		}
	}()
	var stdins []io.Closer
	for p := 1; p <= procs; p++ {
		cmd := exec.Command(exe, childFlag, "-proc", strconv.Itoa(p), "-redis", url, "-prefix", prefix, "-addr", addr,
			"-workers", strconv.Itoa(workers), "-start", strconv.FormatInt(start.UnixNano(), 10), "-end", strconv.FormatInt(end.UnixNano(), 10))
		demo.DieWithParent(cmd) // on Linux, killed with this program; elsewhere, stopped by the end of its stdin
		cmd.Stderr = os.Stderr
		stdin, err := cmd.StdinPipe()
		if err != nil {
			return err
		}
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			return err
		}
		if err := cmd.Start(); err != nil {
			return err
		}
		cmds, stdins = append(cmds, cmd), append(stdins, stdin)
		reading.Go(func() {
			sc := bufio.NewScanner(stdout)
			for sc.Scan() {
				var r report
				if json.Unmarshal(sc.Bytes(), &r) == nil {
					mu.Lock()
					if sent[r.Second] == nil {
						sent[r.Second] = map[int]int{}
					}
					sent[r.Second][r.Proc] = r.Sent
					mu.Unlock()
				}
			}
		})
	}

	fmt.Printf("%d processes, %d goroutines each, one Redis (%s), %s hiding %d req/s, %v\n\n", procs, workers, where, host, capacity, duration)
	head := "   time"
	for p := 1; p <= procs; p++ {
		head += fmt.Sprintf("  %4s", "p"+strconv.Itoa(p))
	}
	fmt.Printf("%s  %6s  %8s  %5s   (requests sent in each second; accepted and 429s by the server)\n", head, "fleet", "accepted", "429s")
	for s := 0; s < int(duration/time.Second); s++ {
		// the processes report a second just after it ends
		if err := demo.Sleep(ctx, time.Until(start.Add(time.Duration(s+1)*time.Second+300*time.Millisecond))); err != nil {
			return err
		}
		st := srv.Stats(host)
		from, to := time.Duration(s)*time.Second, time.Duration(s+1)*time.Second
		line, total := fmt.Sprintf("  %4d s", s+1), 0
		mu.Lock()
		for p := 1; p <= procs; p++ {
			line += fmt.Sprintf("  %4d", sent[s][p])
			total += sent[s][p]
		}
		mu.Unlock()
		fmt.Printf("%s  %6d  %8d  %5d\n", line, total, demo.CountIn(st.Accepted, from, to), demo.CountIn(st.Rejected, from, to))
	}

	// the processes end by themselves at the end of the run; closing
	// their standard input tells any late one to stop now
	if err := demo.Sleep(ctx, time.Until(end)); err != nil {
		return err
	}
	for _, in := range stdins {
		in.Close()
	}
	if !demo.WaitFor(&reading, 20*time.Second) {
		return errors.New("processes still running 20 s after the end")
	}
	var failed []string
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			failed = append(failed, fmt.Sprintf("p%d: %v", i+1, err))
		}
	}
	cmds = nil

	st := srv.Stats(host)
	warm := max((duration / 3).Truncate(time.Second), time.Second) // whole seconds, as the processes report
	n := (duration - warm).Seconds()
	accepted := demo.CountIn(st.Accepted, warm, duration)
	rejected := demo.CountIn(st.Rejected, warm, duration)
	fmt.Printf("\nafter the %v warm-up: the fleet had %.1f req/s accepted of %d (%.0f %%), %d 429s of %d requests, %d pause violations\n",
		warm, float64(accepted)/n, capacity, float64(accepted)/n/capacity*100, rejected, accepted+rejected, st.PauseViolations)
	fmt.Print("each process's share of the fleet's sends:")
	mu.Lock()
	mine, all := make([]int, procs+1), 0
	for s := int(warm / time.Second); s < int(duration/time.Second); s++ {
		for p := 1; p <= procs; p++ {
			mine[p] += sent[s][p]
			all += sent[s][p]
		}
	}
	mu.Unlock()
	for p := 1; p <= procs; p++ {
		fmt.Printf("  p%d %.1f/s (%.0f %%)", p, float64(mine[p])/n, float64(mine[p])/float64(max(all, 1))*100)
	}
	fmt.Println()
	if len(failed) > 0 {
		return fmt.Errorf("processes failed: %v", failed)
	}
	return nil
}

// child is one process of the fleet: a collector on a.test, polite
// through the fleet's Redis, that prints what it sent each second.
func child(args []string) error {
	fs := flag.NewFlagSet("child", flag.ContinueOnError)
	proc := fs.Int("proc", 1, "this process's number")
	url := fs.String("redis", "", "the fleet's Redis")
	prefix := fs.String("prefix", "fleet-example", "the fleet's keys in Redis")
	addr := fs.String("addr", "", "a.test's listener")
	workers := fs.Int("workers", 4, "goroutines")
	startNs := fs.Int64("start", 0, "the run's start, Unix ns")
	endNs := fs.Int64("end", 0, "the run's end, Unix ns")
	if err := fs.Parse(args); err != nil {
		return err
	}
	start, end := time.Unix(0, *startNs), time.Unix(0, *endNs)
	ctx, cancel := demo.ParentGone(context.Background()) // stop if main goes away
	defer cancel()
	ctx, cancelEnd := context.WithDeadline(ctx, end)
	defer cancelEnd()
	redis.SetLogger(quiet{}) // go-redis's own lines; the controller says what matters

	// The fleet's store: every process points at the same Redis (and
	// prefix). ContextTimeoutEnabled bounds each call by the controller's
	// deadline, so a Redis that hangs delays a send by a second at most;
	// no retries and one dial, so a Redis down fails a call at once.
	opt, err := redis.ParseURL(*url)
	if err != nil {
		return err
	}
	opt.ContextTimeoutEnabled = true
	opt.MaxRetries = -1   // the controller falls back and retries by itself
	opt.DialerRetries = 1 // one dial (0 means 5, 100 ms apart)
	rdb := redis.NewClient(opt)
	defer rdb.Close()
	store := redisstore.New(rdb, redisstore.Options{Prefix: *prefix})

	var sent atomic.Int64
	c := colly.NewCollector(colly.AllowURLRevisit(), colly.StdlibContext(ctx))
	c.WithTransport(counting{next: dialAt(*addr), n: &sent})
	// Config.Store is what makes the process one of the fleet. (robots.txt
	// is off: the test site has none worth reading.)
	ctrl := adaptive.Attach(c, polite.Config{Store: store, Robots: new(false)})
	defer ctrl.Close() // gives its concurrency leases back to the fleet
	if err := ctrl.Err(); err != nil {
		return err
	}

	var wg sync.WaitGroup
	var seq atomic.Int64
	seq.Store(int64(*proc) * 100)
	for range *workers {
		wg.Go(func() {
			for ctx.Err() == nil {
				t0 := time.Now()
				err := c.Visit(fmt.Sprintf("http://%s/page/%d", host, seq.Add(1)%1000))
				if err != nil && time.Since(t0) < time.Millisecond {
					demo.Sleep(ctx, 100*time.Millisecond) // refused without sending: do not spin
				}
			}
		})
	}
	out := json.NewEncoder(os.Stdout)
	for s := 0; start.Add(time.Duration(s+1) * time.Second).Before(end.Add(time.Millisecond)); s++ {
		if demo.Sleep(ctx, time.Until(start.Add(time.Duration(s+1)*time.Second))) != nil && time.Now().Before(end) {
			break // main went away
		}
		_ = out.Encode(report{Proc: *proc, Second: s, Sent: int(sent.Swap(0))})
	}
	wg.Wait()
	return nil
}

// dialAt reaches http://a.test at the testserver's loopback listener, as a
// real crawler would reach the site by DNS.
func dialAt(addr string) *http.Transport {
	var d net.Dialer
	return &http.Transport{
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return d.DialContext(ctx, network, addr)
		},
		MaxIdleConnsPerHost: 64,
	}
}

// counting counts the requests put on the wire.
type counting struct {
	next http.RoundTripper
	n    *atomic.Int64
}

func (t counting) RoundTrip(req *http.Request) (*http.Response, error) {
	t.n.Add(1)
	return t.next.RoundTrip(req)
}

type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

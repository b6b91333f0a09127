package testserver_test

import (
	"fmt"
	"io"
	"log"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/gocolly/colly/v2"

	"github.com/colly-polite/polite/testserver"
)

// politeFetch is the "crawler under test" of the example: it fetches the
// pages one after the other and waits out every Retry-After it is given.
func politeFetch(c *http.Client, base string, pages int) (fetched, throttled int) {
	for i := 0; i < pages; {
		resp, err := c.Get(base + "/page/" + strconv.Itoa(i))
		if err != nil {
			log.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusTooManyRequests {
			throttled++
			secs, _ := strconv.Atoi(resp.Header.Get("Retry-After"))
			time.Sleep(time.Duration(secs) * time.Second)
			continue
		}
		fetched++
		i++
	}
	return fetched, throttled
}

// Testing your own crawler: give it the server's client, run it, and assert
// on what the server saw. Here the host takes 10 requests per second; the
// crawler is throttled once, waits the announced second and never knocks
// during the pause.
//
// This example runs in real time (about a second). In a test, create the
// server with NewTest inside testing/synctest.Test: the same code then runs
// in virtual time, instantly, with exact counts.
func Example() {
	srv, err := testserver.New(testserver.Config{
		Network: testserver.Memory,
		Hosts: map[string]testserver.Policy{
			"a.test": {Limit: testserver.Limit{Kind: testserver.FixedWindow, N: 10, Window: time.Second}},
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()

	fetched, throttled := politeFetch(srv.Client(), srv.URL, 20)

	st := srv.Stats("a.test")
	fmt.Println("crawler: fetched", fetched, "throttled", throttled)
	fmt.Println("server: accepted", len(st.Accepted), "rejected", len(st.Rejected), "pause violations", st.PauseViolations)
	// Output:
	// crawler: fetched 20 throttled 1
	// server: accepted 20 rejected 1 pause violations 0
}

// A Colly collector crawls a host's site through the server's transport
// (in memory here; a Loopback server works the same way).
func Example_colly() {
	srv, err := testserver.New(testserver.Config{
		Network: testserver.Memory,
		Hosts: map[string]testserver.Policy{
			"a.test": {Site: testserver.Site{Pages: 30, FanOut: 3}},
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()

	c := colly.NewCollector(colly.AllowedDomains("a.test"))
	c.WithTransport(srv.Transport())
	c.OnHTML("a[href]", func(e *colly.HTMLElement) {
		e.Request.Visit(e.Attr("href"))
	})
	if err := c.Visit(srv.URL + "/"); err != nil {
		log.Fatal(err)
	}

	st := srv.Stats("a.test")
	fmt.Println("requests:", st.Requests, "200s:", st.ByStatus[200])
	// Output:
	// requests: 31 200s: 31
}

// Several virtual hosts, each with its own policy. On loopback each host has
// its own listener; the server's client also reaches them by name.
func ExampleServer_HostURL() {
	srv, err := testserver.New(testserver.Config{Hosts: map[string]testserver.Policy{
		"a.test": {},
		"b.test": {Robots: testserver.Robots{Status: http.StatusServiceUnavailable}},
	}})
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()

	for _, host := range srv.Hosts() {
		resp, err := srv.Client().Get(srv.HostURL(host) + "/robots.txt")
		if err != nil {
			log.Fatal(err)
		}
		resp.Body.Close()
		fmt.Println(host, resp.StatusCode)
	}
	// Output:
	// a.test 200
	// b.test 503
}

// Every host serves redirects: to a given URL, in a loop, or in a chain of
// hops between hosts. Each redirect is a request the host serves and counts
// against its limit.
func Example_redirects() {
	srv, err := testserver.New(testserver.Config{
		Network: testserver.Memory,
		Hosts:   map[string]testserver.Policy{"a.test": {}, "b.test": {}},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()

	c := srv.Client()
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	url := "http://a.test/redirect/hop?n=3&hosts=a.test,b.test"
	for {
		resp, err := c.Get(url)
		if err != nil {
			log.Fatal(err)
		}
		resp.Body.Close()
		fmt.Println(resp.StatusCode, url)
		if resp.StatusCode != http.StatusFound {
			break
		}
		url = resp.Header.Get("Location")
	}
	fmt.Println("a.test accepted", len(srv.Stats("a.test").Accepted), "b.test accepted", len(srv.Stats("b.test").Accepted))
	// Output:
	// 302 http://a.test/redirect/hop?n=3&hosts=a.test,b.test
	// 302 http://b.test/redirect/hop?n=2&hosts=a.test,b.test
	// 302 http://a.test/redirect/hop?n=1&hosts=a.test,b.test
	// 200 http://b.test/page/1
	// a.test accepted 2 b.test accepted 2
}

// An adversarial origin: it resets every page mid-body and throttles with
// Retry-After lines no client should trust, on a connection it then closes.
// A crawler under test must report the short page as an error and must
// neither spin nor stop for good.
func ExampleAdversary() {
	srv, err := testserver.New(testserver.Config{
		Network: testserver.Memory,
		Hosts: map[string]testserver.Policy{"a.test": {
			Limit:     testserver.Limit{Kind: testserver.FixedWindow, N: 1, Window: time.Hour},
			Excess:    testserver.Excess{RawRetryAfter: []string{"-1", "1000000000000"}, CloseConnection: true},
			Adversary: testserver.Adversary{Kind: testserver.ResetMidBody, Bytes: 15},
		}},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()

	c := srv.Client()
	resp, err := c.Get(srv.URL + "/")
	if err != nil {
		log.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	fmt.Println(resp.StatusCode, "announced", resp.ContentLength > int64(len(body)), "got", len(body), "bytes:", err)

	resp, err = c.Get(srv.URL + "/")
	if err != nil {
		log.Fatal(err)
	}
	resp.Body.Close()
	fmt.Println(resp.StatusCode, "Retry-After", resp.Header.Values("Retry-After"), "closed", resp.Close)

	st := srv.Stats("a.test")
	fmt.Println("server:", st.Requests, "requests", st.ByStatus)
	// Output:
	// 200 announced true got 15 bytes: unexpected EOF
	// 429 Retry-After [-1 1000000000000] closed true
	// server: 2 requests map[200:1 429:1]
}

// An origin that never says no: two workers of 20 ms, reached over a
// network of 10 ms round trip. Ten requests at once are all served, two at
// a time; the others wait in the queue, so that latency, not refusals,
// tells the crawler it goes too fast.
func ExampleLimit_workerPool() {
	srv, err := testserver.New(testserver.Config{
		Network: testserver.Memory,
		Hosts: map[string]testserver.Policy{"a.test": {
			Limit:   testserver.Limit{Kind: testserver.WorkerPool, MaxConcurrent: 2},
			Latency: testserver.Latency{RTT: 10 * time.Millisecond, Base: 20 * time.Millisecond},
		}},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()

	c := srv.Client()
	var wg sync.WaitGroup
	for range 10 {
		wg.Go(func() {
			resp, err := c.Get(srv.URL + "/")
			if err != nil {
				log.Fatal(err)
			}
			resp.Body.Close()
		})
	}
	wg.Wait()

	st := srv.Stats("a.test")
	fmt.Println("served", st.ByStatus[200], "refused", len(st.Rejected), "latencies", len(st.Latencies))
	fmt.Println("never more than 2 in service:", st.MaxInFlight <= 2)
	// Output:
	// served 10 refused 0 latencies 10
	// never more than 2 in service: true
}

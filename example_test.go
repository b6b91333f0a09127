package polite_test

import (
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"sync"
	"time"

	"github.com/colly-polite/polite"
	"github.com/colly-polite/polite/testserver"
)

// A plain http.Client made polite: every request goes through the
// controller's Transport, which paces each host, limits its concurrency,
// waits out its pauses and retries what it was refused. Here four
// goroutines fetch 20 pages from a host that takes 10 requests per second
// and answers 429 with Retry-After beyond that: every page arrives, and
// the host never sees a request during a pause it announced.
//
// The example runs in real time, about two seconds, against the bundled
// test server in memory.
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

	ctrl, err := polite.New(polite.Config{})
	if err != nil {
		log.Fatal(err)
	}
	defer ctrl.Close()
	client := &http.Client{Transport: ctrl.Transport(srv.Client().Transport)}

	var wg sync.WaitGroup
	var mu sync.Mutex
	ok := 0
	pages := make(chan int)
	for range 4 {
		wg.Go(func() {
			for i := range pages {
				resp, err := client.Get(fmt.Sprintf("%s/page/%d", srv.URL, i))
				if err != nil {
					log.Print(err)
					continue
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					mu.Lock()
					ok++
					mu.Unlock()
				}
			}
		})
	}
	for i := range 20 {
		pages <- i
	}
	close(pages)
	wg.Wait()

	st := srv.Stats("a.test")
	fmt.Println("pages fetched:", ok)
	fmt.Println("requests during a pause:", st.PauseViolations)
	// Output:
	// pages fetched: 20
	// requests during a pause: 0
}

// Config is the one front door: its zero value is a polite controller,
// and a field set overrides one default. New says what is wrong with a
// Config; NewTransport and adaptive.Attach take the most conservative
// value instead and keep the error in Controller.Err.
func ExampleNew() {
	cfg := polite.Config{Default: polite.Rule{MinRate: 5, Rate: 1}}
	_, err := polite.New(cfg)
	fmt.Println(err)

	tr := polite.NewTransport(http.DefaultTransport, cfg)
	fmt.Println(errors.Is(tr.Controller().Err(), polite.ErrConfig))
	// Output:
	// polite: invalid configuration: Default: MinRate 5 above Rate 1
	// true
}

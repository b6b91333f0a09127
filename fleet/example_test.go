package fleet_test

import (
	"fmt"
	"io"
	"log"
	"net/http"
	"sync"
	"time"

	"github.com/colly-polite/polite"
	"github.com/colly-polite/polite/fleet"
	"github.com/colly-polite/polite/testserver"
)

// Two controllers that share a Store are one client to the sites they
// crawl: one send schedule per host, one estimate of its limit, one pause.
// Here each of two crawlers fetches 15 pages of a host that takes 10
// requests per second, at the same time: the host sees them as one polite
// client, and each controller knows it has a partner. Across processes,
// package redisstore is the Store.
//
// The example runs in real time (a few seconds) against the bundled test
// server in memory.
func ExampleMemoryStore() {
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

	store := &fleet.MemoryStore{}
	var wg sync.WaitGroup
	ctrls := make([]*polite.Controller, 2)
	for i := range ctrls {
		ctrl, err := polite.New(polite.Config{Store: store})
		if err != nil {
			log.Fatal(err)
		}
		defer ctrl.Close()
		ctrls[i] = ctrl
		client := &http.Client{Transport: ctrl.Transport(srv.Client().Transport)}
		wg.Go(func() {
			for p := range 15 {
				resp, err := client.Get(fmt.Sprintf("%s/page/%d", srv.URL, i*15+p))
				if err != nil {
					log.Print(err)
					continue
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		})
	}
	wg.Wait()

	st := srv.Stats("a.test")
	snap, _ := ctrls[0].Snapshot("a.test")
	fmt.Println("pages:", len(st.Accepted))
	fmt.Println("requests during a pause:", st.PauseViolations)
	fmt.Println("processes on a.test:", snap.FleetProcesses)
	// Output:
	// pages: 30
	// requests during a pause: 0
	// processes on a.test: 2
}

package polite

import (
	"fmt"
	"os"
	"testing"
)

// TestSimDump writes every simulator result, in full, for seeds 1–10 of
// every family and every kind at every round trip, and of 200 scopes of the
// scale run, to
// the file SIM_DUMP names: the proof that a change which must not move what
// is sent and when did not (diff the files before and after).
func TestSimDump(t *testing.T) {
	name := os.Getenv("SIM_DUMP")
	if name == "" {
		t.Skip("SIM_DUMP=FILE to run")
	}
	f, err := os.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st := simSettings(t)
	type raw simResult // every field, not String's summary
	for _, rtt := range simRTTs {
		for i := range simFamilies(rtt) {
			for seed := uint64(1); seed <= 10; seed++ {
				sc := simFamilies(rtt)[i]
				sc.Seed = seed
				fmt.Fprintf(f, "%s @ %v seed %d: %+v\n", sc.Name, rtt, seed, raw(simRun(sc, st)))
			}
		}
	}
	for _, rtt := range simRTTs {
		for i := range simKinds(rtt) {
			for seed := uint64(1); seed <= 10; seed++ {
				sc := simKinds(rtt)[i]
				sc.Seed = seed
				r := simRun(sc, st)
				crawl := r.Crawl
				r.Crawl = nil // a pointer: its contents, not its address
				fmt.Fprintf(f, "%s @ %v seed %d: %+v", sc.Name, rtt, seed, raw(r))
				if crawl != nil {
					fmt.Fprintf(f, " %+v", *crawl)
				}
				fmt.Fprintln(f)
			}
		}
	}
	for i := range uint64(200) {
		sc := simFleetScope(i)
		sc.Duration = sc.Duration / 6 // ten virtual minutes each
		fmt.Fprintf(f, "%s: %+v\n", sc.Name, raw(simRun(sc, st)))
	}
}

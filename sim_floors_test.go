package polite

import (
	"bufio"
	"fmt"
	"math"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The regression gate. The simulator is deterministic, so the worst of ten
// worlds of every kind and family at every RTT is a fixed figure of the
// law: TestSimFloors fails when one falls below the floor recorded in
// testdata/simfloors.txt, or when its worst rejected share rises above the
// ceiling recorded beside it. A change that does better may raise a floor
// (or lower a ceiling): SIM_FLOORS=write go test . -run
// TestSimFloors rewrites the file with what the code measures now. A
// floor is lowered (a ceiling raised) only with the reason in the commit
// message that does it.

const (
	simFloorsFile  = "testdata/simfloors.txt"
	simFloorsSeeds = 10
)

// simFloor is one line of the file: a family at an RTT, its worst goodput
// and its worst rejected share over the seeds, in percent.
type simFloor struct {
	key            string // "name @ rtt"
	goodput, rejct float64
}

func simFloorKey(name string, rtt time.Duration) string { return name + " @ " + rtt.String() }

// simFloorsMeasure runs the gate's matrix: every family and kind at every
// RTT over seeds 1..10, a cell at a time on each core.
func simFloorsMeasure(st *settings) []simFloor {
	type job struct {
		fams func(time.Duration) []simScenario
		rtt  time.Duration
		i    int
	}
	var jobs []job
	for _, fams := range []func(time.Duration) []simScenario{simFamilies, simKinds} {
		for _, rtt := range simRTTs {
			for i := range fams(rtt) {
				jobs = append(jobs, job{fams, rtt, i})
			}
		}
	}
	out := make([]simFloor, len(jobs))
	var next atomic.Int64
	var wg sync.WaitGroup
	for range runtime.GOMAXPROCS(0) {
		wg.Go(func() {
			for k := int(next.Add(1) - 1); k < len(jobs); k = int(next.Add(1) - 1) {
				j := jobs[k]
				one := func(rtt time.Duration) []simScenario { return j.fams(rtt)[j.i : j.i+1] }
				c := simMatrix(one, []time.Duration{j.rtt}, simFloorsSeeds, st)[0]
				w, _ := c.worst()
				out[k] = simFloor{key: simFloorKey(c.Name, c.RTT), goodput: simDown(100 * w), rejct: simUp(100 * slices.Max(c.Rejected))}
			}
		})
	}
	wg.Wait()
	return out
}

// The file holds two decimals: a floor rounded down, a ceiling up, so that
// the figures they were written from pass.
func simDown(x float64) float64 { return math.Floor(x*100+1e-6) / 100 }
func simUp(x float64) float64   { return max(math.Ceil(x*100-1e-6)/100, 0) }

func TestSimFloors(t *testing.T) {
	st := simSettings(t)
	got := simFloorsMeasure(st)
	if os.Getenv("SIM_FLOORS") == "write" {
		require.NoError(t, simFloorsWrite(simFloorsFile, got))
		t.Logf("wrote %d floors to %s", len(got), simFloorsFile)
		return
	}
	want, err := simFloorsRead(simFloorsFile)
	require.NoError(t, err, "SIM_FLOORS=write go test . -run TestSimFloors writes it")
	seen := map[string]bool{}
	for _, g := range got {
		seen[g.key] = true
		w, ok := want[g.key]
		if !ok {
			t.Errorf("%s: no floor in %s (a new family or kind: SIM_FLOORS=write records it)", g.key, simFloorsFile)
			continue
		}
		if g.goodput < w.goodput {
			t.Errorf("%s: worst goodput of %d worlds %.2f %% < floor %.2f %%", g.key, simFloorsSeeds, g.goodput, w.goodput)
		}
		if g.rejct > w.rejct {
			t.Errorf("%s: worst rejected share of %d worlds %.2f %% > ceiling %.2f %%", g.key, simFloorsSeeds, g.rejct, w.rejct)
		}
	}
	for k := range want {
		if !seen[k] {
			t.Errorf("%s: in %s but no longer simulated (renamed or removed: SIM_FLOORS=write)", k, simFloorsFile)
		}
	}
}

func simFloorsWrite(path string, fs []simFloor) error {
	var b strings.Builder
	b.WriteString(`# The simulator's regression gate (TestSimFloors in sim_floors_test.go):
# per family or kind and RTT, the worst goodput (% of capacity) and the
# worst rejected share (% of sends) over seeds 1-10, each seed a world.
# Goodput may not fall below its floor, rejections not rise above their
# ceiling. Written by: SIM_FLOORS=write go test . -run TestSimFloors
# A change may raise a floor or lower a ceiling; it lowers a floor or
# raises a ceiling only with the reason in its commit message.
#
# family @ RTT<TAB>worst goodput %<TAB>worst rejected %
`)
	for _, f := range fs {
		fmt.Fprintf(&b, "%s\t%.2f\t%.2f\n", f.key, f.goodput, f.rejct)
	}
	return os.WriteFile(path, []byte(b.String()), 0o644)
}

func simFloorsRead(path string) (map[string]simFloor, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string]simFloor{}
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Split(line, "\t")
		if len(fields) != 3 {
			return nil, fmt.Errorf("%s:%d: want 3 tab-separated fields, got %d", path, n, len(fields))
		}
		g, err1 := strconv.ParseFloat(fields[1], 64)
		r, err2 := strconv.ParseFloat(fields[2], 64)
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("%s:%d: figures %q, %q", path, n, fields[1], fields[2])
		}
		if _, dup := out[fields[0]]; dup {
			return nil, fmt.Errorf("%s:%d: %s twice", path, n, fields[0])
		}
		out[fields[0]] = simFloor{key: fields[0], goodput: g, rejct: r}
	}
	return out, sc.Err()
}

// TestSimFloorsFile checks the gate's own reading: a floor above what is
// measured fails, a ceiling below it fails, and the file's lines parse
// back to what was written.
func TestSimFloorsFile(t *testing.T) {
	path := t.TempDir() + "/floors.txt"
	in := []simFloor{{key: "a @ 0s", goodput: 95.5, rejct: 0.25}, {key: "b, c @ 200ms", goodput: 0, rejct: 12.5}}
	require.NoError(t, simFloorsWrite(path, in))
	out, err := simFloorsRead(path)
	require.NoError(t, err)
	require.Len(t, out, 2)
	for _, f := range in {
		require.Equal(t, f, out[f.key])
	}
	require.NoError(t, os.WriteFile(path, []byte("a @ 0s\t95.5\n"), 0o644))
	_, err = simFloorsRead(path)
	require.Error(t, err)
	require.Equal(t, 95.54, simDown(95.549))
	require.Equal(t, 0.26, simUp(0.2501))
	require.Equal(t, 95.5, simDown(95.5))
}

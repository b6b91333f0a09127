package fleet_test

import (
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/colly-polite/polite/fleet"
	"github.com/colly-polite/polite/fleet/storetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// MemoryStore passes the Store conformance suite, in virtual time.
func TestMemoryStore(t *testing.T) {
	storetest.Run(t, storetest.Harness{
		New:     func(*testing.T) fleet.Store { return &fleet.MemoryStore{} },
		Virtual: true,
		Rewind: func(_ *testing.T, s fleet.Store, _ string, d time.Duration) {
			fleet.Rewind(s.(*fleet.MemoryStore), d)
		},
	})
}

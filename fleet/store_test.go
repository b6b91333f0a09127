package fleet_test

import (
	"testing"

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
	})
}

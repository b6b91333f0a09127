package adaptive

import (
	"log/slog"
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"github.com/colly-polite/polite"

	"github.com/gocolly/colly/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/colly-polite/polite/internal/hook"
	"github.com/colly-polite/polite/internal/syncbuf"
	"github.com/colly-polite/polite/testserver"
)

// The read of Colly's unexported client works on the version in go.mod:
// it is the client Colly's own setters change.
func TestCollyLayout(t *testing.T) {
	c := colly.NewCollector()
	rt := &http.Transport{}
	c.WithTransport(rt)
	c.SetRequestTimeout(3 * time.Second)
	client, err := collyClient(c)
	require.NoError(t, err, "Colly's layout changed: update collyClient (and the version in go.mod)")
	require.NotNil(t, client)
	assert.Same(t, rt, client.Transport)
	assert.Equal(t, 3*time.Second, client.Timeout)
	assert.Same(t, client, collyClientOf(t, c.Clone()), "a clone shares the client")
}

func collyClientOf(t *testing.T, c *colly.Collector) *http.Client {
	client, err := collyClient(c)
	require.NoError(t, err)
	return client
}

// unwrap is the controller, next transport and attempt timeout of the
// collector's transport, which must be a controller's.
func unwrap(t *testing.T, c *colly.Collector) (*polite.Controller, http.RoundTripper, time.Duration) {
	t.Helper()
	ctrl, next, timeout, ok := hook.Unwrap(collyClientOf(t, c).Transport)
	require.True(t, ok, "the collector's transport is a controller's")
	return ctrl.(*polite.Controller), next, timeout
}

// Should Colly's layout change, the read fails loudly: an error in Err
// wrapping ErrAttach, a log line, and the controller still in front of a
// transport (http.DefaultTransport, the collector's own being unknown).
func TestAttachLayoutChangedIsLoud(t *testing.T) {
	broken := func(*colly.Collector) (**http.Client, error) { return nil, errCollyLayout }
	var log syncbuf.Buffer
	c := colly.NewCollector()
	ctrl := attach(c, []polite.Config{{Logger: slog.New(slog.NewTextHandler(&log, nil))}}, broken)
	require.ErrorIs(t, ctrl.Err(), ErrAttach)
	assert.Contains(t, ctrl.Err().Error(), "c.WithTransport(ctrl.Transport(yours))")
	assert.Contains(t, log.String(), "Colly's layout")
	owner, next, timeout := unwrap(t, c)
	assert.Same(t, ctrl, owner, "still polite")
	assert.Equal(t, http.DefaultTransport, next)
	assert.Equal(t, collyDefaultTimeout, timeout)
}

// AttachTo replacing another controller keeps the collector's timeout,
// which the first Attach moved into its transport.
func TestAttachReplaceKeepsTimeout(t *testing.T) {
	c := colly.NewCollector()
	c.SetRequestTimeout(7 * time.Second)
	Attach(c)
	second, err := polite.New(polite.Config{})
	require.NoError(t, err)
	require.NoError(t, AttachTo(c, second))
	owner, next, timeout := unwrap(t, c)
	assert.Same(t, second, owner)
	assert.Equal(t, 7*time.Second, timeout)
	_, _, _, nested := hook.Unwrap(next)
	assert.False(t, nested, "no controller inside a controller")
}

// A request timeout set after Attach moves into the attempt timeout before
// the next request (it would count polite waits otherwise), and a clone
// that Attach was called on catches a transport set through it with its
// own requests.
func TestGuardTimeoutAndClone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := testserver.NewTest(t, testserver.Config{Hosts: map[string]testserver.Policy{"a.test": {}}})
		c := colly.NewCollector(colly.AllowURLRevisit())
		c.WithTransport(srv.Transport())
		ctrl := Attach(c, polite.Config{Robots: new(false)})
		c.SetRequestTimeout(7 * time.Second)
		require.NoError(t, c.Visit(srv.HostURL("a.test")+"/page/1"))
		assert.Zero(t, collyClientOf(t, c).Timeout, "moved out of the client")
		_, _, timeout := unwrap(t, c)
		assert.Equal(t, 7*time.Second, timeout)
		assert.NoError(t, ctrl.Err(), "a timeout is no replaced transport")

		clone := c.Clone()
		assert.Same(t, ctrl, Attach(clone))
		clone.WithTransport(srv.Transport())
		require.NoError(t, clone.Visit(srv.HostURL("a.test")+"/page/2"))
		snap, ok := ctrl.Snapshot("a.test")
		require.True(t, ok)
		assert.Equal(t, uint64(2), snap.Counts[0], "the clone's request went through the controller")
		assert.ErrorIs(t, ctrl.Err(), ErrAttach)
		_, _, timeout = unwrap(t, c)
		assert.Equal(t, 7*time.Second, timeout, "the timeout moved before stays")
	})
}

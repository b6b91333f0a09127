package adaptive

import (
	"log/slog"
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gocolly/colly/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

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

// Should Colly's layout change, the read fails loudly: an error in Err
// wrapping ErrAttach, a log line, and the controller still in front of a
// transport (http.DefaultTransport, the collector's own being unknown).
// WithBaseTransport names the transport to wrap: then nothing is lost.
func TestAttachLayoutChangedIsLoud(t *testing.T) {
	broken := func(*colly.Collector) (**http.Client, error) { return nil, errCollyLayout }
	t.Run("loud", func(t *testing.T) {
		var log syncBuffer
		c := colly.NewCollector()
		ctrl := attach(c, []Option{WithLogger(slog.New(slog.NewTextHandler(&log, nil)))}, broken)
		require.ErrorIs(t, ctrl.Err(), ErrAttach)
		assert.Contains(t, ctrl.Err().Error(), "WithBaseTransport")
		assert.Contains(t, log.String(), "Colly's layout")
		tr, ok := collyClientOf(t, c).Transport.(*Transport)
		require.True(t, ok, "still polite")
		assert.Same(t, ctrl, tr.c)
		assert.Equal(t, http.DefaultTransport, tr.next)
		assert.Equal(t, collyDefaultTimeout, tr.attemptTimeout)
	})
	t.Run("WithBaseTransport", func(t *testing.T) {
		base := &http.Transport{}
		c := colly.NewCollector()
		ctrl := attach(c, []Option{WithBaseTransport(base)}, broken)
		require.NoError(t, ctrl.Err())
		tr := collyClientOf(t, c).Transport.(*Transport)
		assert.Same(t, base, tr.next)
	})
}

// ctrl.Attach replacing another controller keeps the collector's timeout,
// which the first Attach moved into its transport.
func TestAttachReplaceKeepsTimeout(t *testing.T) {
	c := colly.NewCollector()
	c.SetRequestTimeout(7 * time.Second)
	Attach(c)
	second, err := New()
	require.NoError(t, err)
	require.NoError(t, second.Attach(c))
	tr := collyClientOf(t, c).Transport.(*Transport)
	assert.Same(t, second, tr.c)
	assert.Equal(t, 7*time.Second, tr.attemptTimeout)
	_, nested := tr.next.(*Transport)
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
		ctrl := Attach(c, WithRobots(false))
		c.SetRequestTimeout(7 * time.Second)
		require.NoError(t, c.Visit(srv.HostURL("a.test")+"/page/1"))
		client := collyClientOf(t, c)
		assert.Zero(t, client.Timeout, "moved out of the client")
		tr, ok := client.Transport.(*Transport)
		require.True(t, ok)
		assert.Equal(t, 7*time.Second, tr.attemptTimeout)
		assert.NoError(t, ctrl.Err(), "a timeout is no replaced transport")

		clone := c.Clone()
		assert.Same(t, ctrl, Attach(clone))
		clone.WithTransport(srv.Transport())
		require.NoError(t, clone.Visit(srv.HostURL("a.test")+"/page/2"))
		snap, ok := ctrl.Snapshot("a.test")
		require.True(t, ok)
		assert.Equal(t, uint64(2), snap.Counts[0], "the clone's request went through the controller")
		assert.ErrorIs(t, ctrl.Err(), ErrAttach)
		tr = collyClientOf(t, c).Transport.(*Transport)
		assert.Equal(t, 7*time.Second, tr.attemptTimeout, "the timeout moved before stays")
	})
}

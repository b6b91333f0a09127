package testserver_test

import (
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/colly-polite/polite/testserver"
)

// Config.ClientHeader splits a host's Accepted and Rejected by the
// header's value; robots.txt stays out, and a request without the header
// is the client "".
func TestClientHeader(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := testserver.NewTest(t, testserver.Config{ClientHeader: "X-Client",
			Hosts: map[string]testserver.Policy{"a.test": {Limit: fixed(3, time.Second)}}})
		c := srv.Client()
		send := func(client string) int { return sendAs(t, c, srv.URL+"/", client) }
		// second 0: 1, 2, 1 admitted, then 2 and "" refused
		for _, id := range []string{"1", "2", "1", "2", ""} {
			send(id)
		}
		time.Sleep(time.Second)
		assert.Equal(t, 200, send("2")) // second 1
		assert.Equal(t, 200, get(t, c, srv.URL+"/robots.txt").status)

		st := srv.Stats("a.test")
		assert.Equal(t, map[string]testserver.ClientStats{
			"1": {Accepted: []time.Duration{0, 0}},
			"2": {Accepted: []time.Duration{0, time.Second}, Rejected: []time.Duration{0}},
			"":  {Rejected: []time.Duration{0}},
		}, st.Clients)
		n := 0
		for _, cs := range st.Clients {
			n += len(cs.Accepted) + len(cs.Rejected)
		}
		assert.Equal(t, len(st.Accepted)+len(st.Rejected), n, "every request but robots.txt in exactly one client")

		// a copy: what the caller does with it changes nothing
		st.Clients["1"].Accepted[0] = time.Hour
		assert.Equal(t, time.Duration(0), srv.Stats("a.test").Clients["1"].Accepted[0])
	})
}

// Without Config.ClientHeader nothing is split; a ClientHeader that is not
// a header name is an error.
func TestClientHeaderOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := testserver.NewTest(t, testserver.Config{})
		get(t, srv.Client(), srv.URL+"/")
		assert.Nil(t, srv.Stats("a.test").Clients)
	})
	for _, bad := range []string{"X Client", "X-Client:", "é"} {
		_, err := testserver.New(testserver.Config{ClientHeader: bad, Network: testserver.Memory})
		assert.ErrorIs(t, err, testserver.ErrConfig, "%q", bad)
	}
}

// With Config.ClientHeader, a pause violation by a client that was never
// told of the pause (it was announced to another) is counted apart, with
// how long after the pause began it arrived; one by the client told, or
// by one told through an extension, is not.
func TestPauseViolationsByOthers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		srv := testserver.NewTest(t, testserver.Config{ClientHeader: "X-Client",
			Hosts: map[string]testserver.Policy{"a.test": {Limit: fixed(1, 10*time.Second)}}})
		c := srv.Client()
		send := func(client string) int { return sendAs(t, c, srv.URL+"/", client) }
		require.Equal(t, 200, send("1"))
		require.Equal(t, 429, send("1")) // a pause until 10 s, told to 1
		sleepUntil(start, 2*time.Second)
		require.Equal(t, 429, send("2")) // 2 was not told; now it is
		sleepUntil(start, 3*time.Second)
		require.Equal(t, 429, send("1"))
		require.Equal(t, 429, send("2"))
		st := srv.Stats("a.test")
		assert.Equal(t, 3, st.PauseViolations)
		assert.Equal(t, 1, st.PauseViolationsByOthers, "only 2's first")
		assert.Equal(t, 2*time.Second, st.OthersViolationLate)

		srv2 := testserver.NewTest(t, testserver.Config{
			Hosts: map[string]testserver.Policy{"a.test": {Limit: fixed(1, 10*time.Second)}}})
		c = srv2.Client()
		get(t, c, srv2.URL+"/")
		get(t, c, srv2.URL+"/")
		time.Sleep(time.Second)
		get(t, c, srv2.URL+"/")
		st = srv2.Stats("a.test")
		assert.Equal(t, 1, st.PauseViolations)
		assert.Zero(t, st.PauseViolationsByOthers, "without ClientHeader every request is one client's")
	})
}

// sendAs gets url as client (its X-Client header; none for "") and returns
// the status.
func sendAs(t *testing.T, c *http.Client, url, client string) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	require.NoError(t, err)
	if client != "" {
		req.Header.Set("X-Client", client)
	}
	resp, err := c.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	return resp.StatusCode
}

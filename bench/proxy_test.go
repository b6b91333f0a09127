package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/colly-polite/polite/testserver"
)

// proxied is a client end and a server end joined by a delayProxy over
// in-memory pipes, inside a synctest bubble.
func proxied(t *testing.T, rtt time.Duration) (p *delayProxy, client, server net.Conn) {
	p = newDelayProxy("unused", rtt)
	client, c := net.Pipe()
	s, server := net.Pipe()
	go p.relay(c, s)
	t.Cleanup(func() {
		client.Close()
		server.Close()
		p.Close()
	})
	return p, client, server
}

// Every byte crosses each direction half the round trip after it was
// written, in order, and the first ones wait one round trip more for the
// handshake.
func TestProxyDelaysEachDirection(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const rtt = 200 * time.Millisecond
		_, client, server := proxied(t, rtt)
		start := time.Now()
		arrivals := make(chan time.Duration, 16)
		go func() {
			r := bufio.NewReader(server)
			for {
				if _, err := r.ReadString('\n'); err != nil {
					close(arrivals)
					return
				}
				arrivals <- time.Since(start)
			}
		}()
		_, err := client.Write([]byte("first\n"))
		require.NoError(t, err)
		assert.Equal(t, rtt+rtt/2, <-arrivals, "the handshake, then half the round trip")
		time.Sleep(time.Second)
		sent := time.Since(start)
		for i := range 3 {
			_, err := fmt.Fprintf(client, "line %d\n", i)
			require.NoError(t, err)
			time.Sleep(10 * time.Millisecond)
		}
		for i := range 3 {
			assert.Equal(t, sent+rtt/2+time.Duration(i)*10*time.Millisecond, <-arrivals, "line %d", i)
		}
		// and back
		t0 := time.Now()
		go func() { _, _ = server.Write([]byte("answer\n")) }()
		line, err := bufio.NewReader(client).ReadString('\n')
		require.NoError(t, err)
		assert.Equal(t, "answer\n", line)
		assert.Equal(t, rtt/2, time.Since(t0))
	})
}

// A receiver that does not read holds the sender back once the proxy's
// bounded buffer of one direction is full.
func TestProxyBoundedBuffer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, client, _ := proxied(t, 100*time.Millisecond)
		written := 0
		go func() {
			buf := make([]byte, proxyChunk)
			for {
				if _, err := client.Write(buf); err != nil {
					return
				}
				written++
			}
		}()
		time.Sleep(time.Minute)
		synctest.Wait()
		// the proxy's channel, the packet its writer holds, the one its
		// reader holds
		assert.LessOrEqual(t, written, proxyChunks+2)
		assert.GreaterOrEqual(t, written, proxyChunks)
	})
}

// An end of stream reaches the other side after the bytes before it, and
// ends the connection once both directions are done.
func TestProxyPassesEndOfStream(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, client, server := proxied(t, 100*time.Millisecond)
		go func() {
			_, _ = client.Write([]byte("last words"))
			client.Close()
		}()
		b, err := io.ReadAll(server)
		require.NoError(t, err)
		assert.Equal(t, "last words", string(b))
	})
}

// Over real loopback sockets in front of testserver: requests on a new
// connection and on a reused one reach the host and come back whole, and
// Close leaves nothing running. (The delays are asserted in virtual time
// above.)
func TestProxyLoopback(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	srv, err := testserver.New(testserver.Config{Network: testserver.Loopback})
	require.NoError(t, err)
	defer srv.Close()
	p, err := startProxy(srv.HostURL(testserver.DefaultHost)[len("http://"):], 20*time.Millisecond)
	require.NoError(t, err)
	defer p.Close()
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr}
	for i := range 2 {
		resp, err := c.Get("http://" + p.Addr() + "/page/1")
		require.NoError(t, err)
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.NoError(t, err)
		assert.Equal(t, 200, resp.StatusCode, "request %d", i)
		assert.Contains(t, string(b), "page 1")
	}
	assert.Equal(t, 2, srv.Stats(testserver.DefaultHost).Requests)
	tr.CloseIdleConnections()
	p.Close()
	p.Close() // idempotent
}

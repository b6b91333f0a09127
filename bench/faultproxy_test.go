package main

import (
	"bufio"
	"net"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// faulty is a client end and a Redis end joined by a faultProxy over
// in-memory pipes, inside a synctest bubble; what reaches each end is read
// line by line, with the time it arrived.
func faulty(t *testing.T) (p *faultProxy, client, redis net.Conn, atClient, atRedis <-chan arrival) {
	p = newFaultProxy("unused")
	client, c := net.Pipe()
	s, redis := net.Pipe()
	go p.relay(c, s)
	t.Cleanup(func() {
		client.Close()
		redis.Close()
		p.Close()
	})
	return p, client, redis, lines(client), lines(redis)
}

type arrival struct {
	line string
	at   time.Time
}

func lines(c net.Conn) <-chan arrival {
	ch := make(chan arrival, 16)
	go func() {
		defer close(ch)
		r := bufio.NewReader(c)
		for {
			l, err := r.ReadString('\n')
			if err != nil {
				return
			}
			ch <- arrival{l, time.Now()}
		}
	}()
	return ch
}

func write(t *testing.T, c net.Conn, s string) {
	t.Helper()
	go func() { _, _ = c.Write([]byte(s)) }() // a pipe's write waits for its read
}

// Healthy, the proxy passes both directions at once.
func TestFaultProxyHealthy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, client, redis, atClient, atRedis := faulty(t)
		t0 := time.Now()
		write(t, client, "PING\r\n")
		got := <-atRedis
		assert.Equal(t, arrival{"PING\r\n", t0}, got)
		write(t, redis, "+PONG\r\n")
		assert.Equal(t, arrival{"+PONG\r\n", t0}, <-atClient)
	})
}

// faultGarbage answers every write of the client with bytes that are not
// RESP, and Redis sees none of them; healed, the proxy passes them again.
func TestFaultProxyGarbage(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, client, _, atClient, atRedis := faulty(t)
		p.Set(faultGarbage)
		for range 2 {
			write(t, client, "PING\r\n")
			got := <-atClient
			assert.Equal(t, string(garbageReply), got.line)
			require.NotContains(t, "+-:$*_,#!=(%~>|", got.line[:1], "a RESP type byte")
		}
		synctest.Wait()
		assert.Empty(t, atRedis, "Redis saw a command during the fault")
		p.Set(faultNone)
		write(t, client, "PING\r\n")
		assert.Equal(t, "PING\r\n", (<-atRedis).line)
	})
}

// faultSlow holds each reply for slowReply, in order; healed, what it holds
// goes at once and new replies are not held.
func TestFaultProxySlow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, client, redis, atClient, atRedis := faulty(t)
		p.Set(faultSlow)
		t0 := time.Now()
		write(t, client, "PING\r\n")
		assert.Equal(t, arrival{"PING\r\n", t0}, <-atRedis, "commands are not held")
		write(t, redis, "+one\r\n")
		time.Sleep(100 * time.Millisecond)
		write(t, redis, "+two\r\n")
		assert.Equal(t, arrival{"+one\r\n", t0.Add(slowReply)}, <-atClient)
		assert.Equal(t, arrival{"+two\r\n", t0.Add(100*time.Millisecond + slowReply)}, <-atClient)

		t1 := time.Now()
		write(t, redis, "+three\r\n")
		time.Sleep(500 * time.Millisecond)
		synctest.Wait()
		assert.Empty(t, atClient, "held for less than slowReply")
		p.Set(faultNone)
		assert.Equal(t, arrival{"+three\r\n", t1.Add(500 * time.Millisecond)}, <-atClient, "released when healed")
		write(t, redis, "+four\r\n")
		assert.Equal(t, arrival{"+four\r\n", t1.Add(500 * time.Millisecond)}, <-atClient)
	})
}

// Close ends every relay.
func TestFaultProxyClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, _, _, atClient, atRedis := faulty(t)
		p.Set(faultSlow)
		p.Close()
		_, open := <-atClient
		assert.False(t, open)
		_, open = <-atRedis
		assert.False(t, open)
	})
}

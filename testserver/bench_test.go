package testserver_test

import (
	"io"
	"testing"

	"github.com/colly-polite/polite/testserver"
)

func benchGet(b *testing.B, network testserver.Network, p testserver.Policy) {
	srv, err := testserver.New(testserver.Config{Network: network, Hosts: map[string]testserver.Policy{"a.test": p}})
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Close()
	c := srv.Client()
	url := srv.URL + "/page/1"
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			resp, err := c.Get(url)
			if err != nil {
				b.Error(err)
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	})
}

func BenchmarkMemory(b *testing.B) { benchGet(b, testserver.Memory, testserver.Policy{}) }

func BenchmarkLoopback(b *testing.B) { benchGet(b, testserver.Loopback, testserver.Policy{}) }

func BenchmarkMemoryLimited(b *testing.B) {
	benchGet(b, testserver.Memory, testserver.Policy{
		Limit:  testserver.Limit{Kind: testserver.TokenBucket, Rate: 1000, Burst: 10},
		Excess: testserver.Excess{QuotaHeaders: true},
	})
}

package tokenbucket_test

import (
	"fmt"
	"time"

	"github.com/colly-polite/polite/tokenbucket"
)

// A scope paced at 4 sends per second, paused by a 429 with Retry-After: 2.
func Example() {
	var b tokenbucket.Bucket
	b.SetRate(4)
	var sent []string
	for now := time.Duration(0); now <= 3*time.Second; now += 50 * time.Millisecond {
		if now == time.Second {
			b.Drain(now + 2*time.Second) // the answer to the last send said 429
		}
		if b.Take(now) {
			sent = append(sent, now.String())
		}
	}
	fmt.Println(sent)
	// Output: [0s 250ms 500ms 750ms 3s]
}

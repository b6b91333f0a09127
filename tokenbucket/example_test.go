package tokenbucket_test

import (
	"context"
	"fmt"
	"time"

	"github.com/colly-polite/polite/tokenbucket"
)

// A crawler's politeness floor: two requests per second per host, bursts of
// three, and a drain on a 429.
func Example() {
	reg, err := tokenbucket.New(tokenbucket.Config{Rate: 2, Burst: 3})
	if err != nil {
		panic(err)
	}
	now := time.Now()

	granted := 0
	for range 5 {
		if reg.AllowAt("example.com", now) {
			granted++
		}
	}
	fmt.Println("granted at once:", granted)
	fmt.Println("other host:", reg.AllowAt("example.org", now))

	// The server answers 429 with Retry-After: 10.
	reg.DrainAt("example.com", now, now.Add(10*time.Second))
	fmt.Println("at 9s:", reg.AllowAt("example.com", now.Add(9*time.Second)))
	fmt.Println("at 10s:", reg.AllowAt("example.com", now.Add(10*time.Second)))
	fmt.Println("at 10.5s:", reg.AllowAt("example.com", now.Add(10500*time.Millisecond)))

	// A reservation says how long to wait.
	res := reg.ReserveAt("example.com", now.Add(10500*time.Millisecond))
	fmt.Println("next one in:", res.DelayFrom(now.Add(10500*time.Millisecond)))
	res.CancelAt(now.Add(10500 * time.Millisecond)) // changed our mind: the token goes back

	// Output:
	// granted at once: 3
	// other host: true
	// at 9s: false
	// at 10s: false
	// at 10.5s: true
	// next one in: 500ms
}

// Wait blocks, and refuses at once a wait that would pass the context's
// deadline, instead of letting the request go out unpaced.
func ExampleBucket_Wait() {
	b := tokenbucket.NewBucket(0.5, 1) // one request every two seconds
	ctx := context.Background()
	fmt.Println(b.Wait(ctx)) // the burst token

	short, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	fmt.Println(b.Wait(short))

	// Output:
	// <nil>
	// tokenbucket: wait would exceed context deadline
}

func ExampleBucket_DrainAt() {
	b := tokenbucket.NewBucket(1, 10)
	now := time.Now()
	b.DrainAt(now, now.Add(30*time.Second))
	b.DrainAt(now, now.Add(5*time.Second)) // a shorter drain does not shorten it

	count := func(at time.Time) (n int) {
		for b.AllowAt(at) {
			n++
		}
		return n
	}
	fmt.Println("before the deadline:", count(now.Add(29*time.Second)))
	fmt.Println("one second after it:", count(now.Add(31*time.Second)))
	fmt.Println("five seconds after it:", count(now.Add(35*time.Second)))

	// Output:
	// before the deadline: 0
	// one second after it: 1
	// five seconds after it: 4
}

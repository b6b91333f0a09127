// Package redisstore shares a crawl's politeness through Redis, so that
// several processes (workers, pods, machines) crawling the same sites are
// one polite client: one send schedule, one law, one pause and one
// concurrency budget per scope, all on the Redis server's clock.
//
//	rdb := redis.NewClient(&redis.Options{
//		Addr:                  "localhost:6379",
//		ContextTimeoutEnabled: true, // a slow Redis delays a send by at most a second
//		MaxRetries:            -1,   // the controller falls back, and tries again, by itself
//		DialerRetries:         1,    // one dial per connection: a Redis down fails a call at once
//	})
//	ctrl := adaptive.Attach(c, polite.Config{Store: redisstore.New(rdb, redisstore.Options{})})
//	defer ctrl.Close() // gives the fleet's leases back
//
// Each send costs two round trips to Redis, one script before it and one
// after. If Redis is down or slow, each process falls back to its share of
// what the fleet last knew (the rate divided by the processes seen; the
// concurrency limit stays the process's own), says so once in its log, and
// comes back by itself.
//
// The controller bounds each call to the store to a second and falls back
// by itself, so the client should neither wait past that second nor retry
// within it. ContextTimeoutEnabled has go-redis end a call's reads and
// writes at the call's deadline: without it a Redis that hangs holds a send
// for the client's ReadTimeout (5 s by default). MaxRetries -1 turns off
// go-redis's retries, which include a failed dial (0 means 3). DialerRetries
// 1 is one dial per connection: go-redis counts the first, and 0 means 5,
// 100 ms apart. New names, in one line at Warn, any of these a client
// lacks. go-redis still logs each failed dial itself: redis.SetLogger,
// which is process-wide, is the application's to set.
package redisstore

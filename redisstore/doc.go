// Package redisstore shares a crawl's politeness through Redis, so that
// several processes (workers, pods, machines) crawling the same sites are
// one polite client: one send schedule, one law, one pause and one
// concurrency budget per scope, all on the Redis server's clock.
//
//	rdb := redis.NewClient(&redis.Options{
//		Addr:                  "localhost:6379",
//		ContextTimeoutEnabled: true, // a slow Redis delays a send by at most a second
//		DialTimeout:           time.Second,
//		MaxRetries:            -1, // the controller falls back, and tries again, by itself
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
// Set ContextTimeoutEnabled on the client: without it go-redis ignores the
// deadline the controller puts on each call, and a Redis that hangs holds
// a send for the client's ReadTimeout (3 s by default) rather than one
// second. MaxRetries -1 spares the retries go-redis would make within
// that second (the controller's fallback is the retry).
package redisstore

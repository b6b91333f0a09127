// Package demo holds the helpers that the repository's runnable programs
// (examples/..., bench, soak) share: waiting on a context, stopping a
// crawl's workers, counting a testserver time series over a window, the
// defaults of a -short smoke run, and for the fleet programs a Redis of
// their own (a redis-server on loopback, or REDIS_URL) and child processes
// that end with their parent.
//
//	short := flag.Bool("short", false, "a 5 s smoke run")
//	flag.Parse()
//	demo.Short(*short, map[string]string{"duration": "5s"})
//
// It is internal: a program copied out of this repository replaces each
// call with the few lines it stands for.
package demo

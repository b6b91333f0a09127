// Package fleet is what several collectors share, in one process or many,
// so that the sites they crawl see one polite client: the Store a
// controller takes its turns through (polite.Config.Store), the values that
// travel to and from it, and MemoryStore for the collectors of one process.
// Package redisstore serves processes on many machines; fleet/storetest is
// the conformance suite every store passes.
//
//	store := &fleet.MemoryStore{}
//	a := adaptive.Attach(c1, polite.Config{Store: store})
//	b := adaptive.Attach(c2, polite.Config{Store: store})
package fleet

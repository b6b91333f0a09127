// Package redisfrontier is a frontier.Shared on Redis: the processes of a
// fleet consume one crawl frontier, one FIFO per scope, each taking the
// next request of a scope its controller says is ready, under a lease it
// renews while it works. A process that dies returns its requests when
// their leases expire.
//
//	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379", ContextTimeoutEnabled: true, MaxRetries: -1, DialerRetries: 1})
//	sh, err := redisfrontier.New(ctx, rdb, redisfrontier.Options{Prefix: "crawl-1"})
//	q, err := frontier.New(ctrl, frontier.Config{Threads: 8, Shared: sh})
//
// Each call is one script on the server, atomic: taking a request and its
// lease is one round trip, ending it another (the send slot is the
// fleet's Store's, a separate round trip: redisstore). Every key of a
// queue carries the same hash tag, so the queue lives in one slot: it
// runs on one Redis, or on a Cluster as one slot (one shard does its
// work). Without persistence, a Redis restarted empty has lost the queue:
// the scripts find its epoch gone and answer frontier.ErrLost, and each
// process gives its part back (Restore): the first starts a new queue.
package redisfrontier

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/colly-polite/polite/frontier"
)

// ErrReply is wrapped by every error about a reply this package cannot
// read: the frontier treats it as a store fault and tries again.
var ErrReply = errors.New("redisfrontier: unreadable reply")

// reclaimPerCall bounds the expired leases one call queues again.
const reclaimPerCall = 64

// endsPerCall bounds the ends one Counts reads.
const endsPerCall = 4096

// restoreHold is how long a queue started again after a loss holds its
// takes, so that every process's part is in (each learns of the loss at
// its next call: a Queue reads the counts four times a second).
const restoreHold = 2 * time.Second

// Options are a Frontier's settings; the zero value of each field means
// the stated default.
type Options struct {
	// Prefix names the queue: processes with the same prefix share it.
	// "" means "colly-polite-frontier".
	Prefix string
	// CountsPage is about how many scopes with requests queued one Counts
	// reads (a Queue calls it four times a second): what the call costs
	// Redis is about that many lookups, whatever the queue holds. With
	// more scopes than that, each is read again at least once every
	// scopes/CountsPage calls, and a scope added by another process is
	// seen within as many. 0 means 1000.
	CountsPage int
}

// Frontier is a frontier.Shared in Redis. Safe for concurrent use; one
// Frontier serves one Queue (after a loss, the first queue's restore moves
// the Frontier to the new queue, and a second queue on it would not learn
// of the loss).
type Frontier struct {
	c      redis.UniversalClient
	keys   []string
	lists  string // a scope's list is lists + its id
	prefix string

	mu    sync.Mutex
	epoch string // guarded by mu

	page     int        // Options.CountsPage
	counting sync.Mutex // one Counts at a time: each continues the last one's scan
	// the scan of the scopes with requests queued, a page per Counts:
	// what the pages read, merged, is the queue's scopes (and what this
	// Frontier added since, at once)
	scan struct {
		sync.Mutex
		epoch  string // the queue the scan reads
		cursor string // where the next page starts ("0": a new pass)
		pass   uint32 // passes begun
		scopes map[string]scanned
	}
}

// scanned is a scope as the scan last read it, in pass.
type scanned struct {
	frontier.ScopeCounts
	pass uint32
}

var _ frontier.Shared = (*Frontier)(nil)

// New returns the queue named o.Prefix on client, made if it does not
// exist yet.
func New(ctx context.Context, client redis.UniversalClient, o Options) (*Frontier, error) {
	if o.Prefix == "" {
		o.Prefix = "colly-polite-frontier"
	}
	tag := "{" + o.Prefix + "}"
	f := &Frontier{c: client, lists: tag + ":q:", prefix: o.Prefix, page: o.CountsPage}
	if f.page <= 0 {
		f.page = 1000
	}
	for _, k := range []string{"epoch", "seen", "queued", "names", "leases", "expiry", "totals", "ended", "tomb", "restored", "held", "pass"} {
		f.keys = append(f.keys, tag+":"+k)
	}
	if err := client.SetNX(ctx, f.keys[0], newEpoch(), 0).Err(); err != nil {
		return nil, fmt.Errorf("redisfrontier: %w", err)
	}
	e, err := client.Get(ctx, f.keys[0]).Result()
	if err != nil {
		return nil, fmt.Errorf("redisfrontier: %w", err)
	}
	f.epoch = e
	return f, nil
}

// scopeID is a scope's id in the keys: 16 hex digits of a hash, whatever
// the scope's length.
func scopeID(scope string) string {
	h := sha256.Sum256([]byte(scope))
	return hex.EncodeToString(h[:8])
}

// newEpoch names a new queue.
func newEpoch() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// seenKey is a request's key as the scripts keep it: 16 bytes (the
// frontier's are; any other is hashed to that).
func seenKey(k []byte) string {
	if len(k) == 16 {
		return string(k)
	}
	h := sha256.Sum256(k)
	return string(h[:16])
}

// owner is an owner's name as the scripts keep it: 16 characters.
func owner(o string) string {
	if len(o) == 16 {
		return o
	}
	h := sha256.Sum256([]byte(o))
	return hex.EncodeToString(h[:8])
}

func (f *Frontier) run(ctx context.Context, s *redis.Script, args []any) (any, error) {
	v, err := s.Run(ctx, f.c, f.keys, args...).Result()
	if err != nil {
		if strings.HasPrefix(err.Error(), "LOST") {
			return nil, fmt.Errorf("%w (%s): %v", frontier.ErrLost, f.prefix, err)
		}
		return nil, fmt.Errorf("redisfrontier: %w", err)
	}
	return v, nil
}

func (f *Frontier) head(extra any) []any {
	f.mu.Lock()
	defer f.mu.Unlock()
	return []any{f.epoch, f.lists, extra}
}

// Add implements frontier.Shared.
func (f *Frontier) Add(ctx context.Context, own string, items []frontier.SharedItem) ([]bool, error) {
	if len(items) == 0 {
		return nil, nil
	}
	args := f.head(owner(own))
	for _, it := range items {
		args = append(args, scopeID(it.Scope), it.Scope, seenKey(it.Key), it.Record)
	}
	v, err := f.run(ctx, addScript, args)
	if err != nil {
		return nil, err
	}
	added, err := addedOf(v, len(items))
	if err != nil {
		return nil, err
	}
	f.noteAdded(f.queue(), items, added)
	return added, nil
}

// queue is the epoch of the queue this Frontier works on.
func (f *Frontier) queue() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.epoch
}

// rescan starts the scan over if it reads another queue than epoch (the
// queue was lost and started again) or never began. Called with scan held.
func (f *Frontier) rescan(epoch string) {
	if f.scan.epoch != epoch || f.scan.cursor == "" {
		f.scan.epoch, f.scan.cursor, f.scan.scopes = epoch, "0", map[string]scanned{}
	}
}

// noteAdded counts the items added (all of them when added is nil) in
// the scan's scopes at once: a scope this process added is in its next
// counts, whenever the scan reads it.
func (f *Frontier) noteAdded(epoch string, items []frontier.SharedItem, added []bool) {
	f.scan.Lock()
	defer f.scan.Unlock()
	f.rescan(epoch)
	for i, it := range items {
		if added != nil && !added[i] {
			continue
		}
		sc := f.scan.scopes[it.Scope]
		sc.Queued++
		sc.pass = f.scan.pass
		f.scan.scopes[it.Scope] = sc
	}
}

// addedOf reads the add script's reply for n items.
func addedOf(v any, n int) ([]bool, error) {
	a, ok := v.([]any)
	if !ok || len(a) != n {
		return nil, fmt.Errorf("%w: add: %T", ErrReply, v)
	}
	out := make([]bool, len(a))
	for i, x := range a {
		n, ok := x.(int64)
		if !ok {
			return nil, fmt.Errorf("%w: add: %T", ErrReply, x)
		}
		out[i] = n == 1
	}
	return out, nil
}

// Take implements frontier.Shared.
func (f *Frontier) Take(ctx context.Context, asks []frontier.SharedAsk, ttl time.Duration) ([]frontier.Leased, error) {
	if len(asks) == 0 {
		return nil, nil
	}
	args := append(f.head(reclaimPerCall), ttl.Milliseconds())
	for _, a := range asks {
		args = append(args, scopeID(a.Scope), a.Lease)
	}
	v, err := f.run(ctx, takeScript, args)
	if err != nil {
		return nil, err
	}
	out, empty, err := leasedOf(v, len(asks))
	if err != nil {
		return nil, err
	}
	f.scan.Lock()
	for i, a := range asks {
		if empty[i] {
			// nothing queued there now: the scan's last read of it is
			// stale, and would ask again at every Counts until the scan
			// came back to it
			delete(f.scan.scopes, a.Scope)
		}
	}
	f.scan.Unlock()
	return out, nil
}

// leasedOf reads the take script's reply for n asks: what each was
// leased, and whether its scope had nothing queued.
func leasedOf(v any, n int) ([]frontier.Leased, []bool, error) {
	a, ok := v.([]any)
	if !ok || len(a) != n {
		return nil, nil, fmt.Errorf("%w: take: %T", ErrReply, v)
	}
	out := make([]frontier.Leased, len(a))
	empty := make([]bool, len(a))
	for i, x := range a {
		switch r := x.(type) {
		case nil:
		case int64:
			empty[i] = true
		case string:
			if len(r) < 16 {
				return nil, nil, fmt.Errorf("%w: take: an entry of %d bytes", ErrReply, len(r))
			}
			out[i].Key, out[i].Record = []byte(r[:16]), []byte(r[16:])
		default:
			return nil, nil, fmt.Errorf("%w: take: %T", ErrReply, x)
		}
	}
	return out, empty, nil
}

// Done implements frontier.Shared.
func (f *Frontier) Done(ctx context.Context, ends []frontier.SharedEnd) error {
	if len(ends) == 0 {
		return nil
	}
	args := f.head(0)
	for _, e := range ends {
		failed := "0"
		if e.Failed {
			failed = "1"
		}
		args = append(args, e.Lease, failed)
	}
	_, err := f.run(ctx, doneScript, args)
	return err
}

// Release implements frontier.Shared.
func (f *Frontier) Release(ctx context.Context, leases []string) error {
	if len(leases) == 0 {
		return nil
	}
	args := f.head(0)
	for _, l := range leases {
		args = append(args, l)
	}
	_, err := f.run(ctx, releaseScript, args)
	return err
}

// Renew implements frontier.Shared.
func (f *Frontier) Renew(ctx context.Context, leases []string, ttl time.Duration) error {
	if len(leases) == 0 {
		return nil
	}
	args := append(f.head(0), ttl.Milliseconds())
	for _, l := range leases {
		args = append(args, l)
	}
	_, err := f.run(ctx, renewScript, args)
	return err
}

// Counts implements frontier.Shared. It reads a page of the scopes with
// requests queued (Options.CountsPage) and returns every scope the pages
// read since the scan last began again, and those this Frontier added to
// since: a scope that emptied since its page was read stays in until a
// pass of the scan has not read it (a take that finds it empty drops it at
// once); when no scope has anything queued, none does.
// The totals are exact; Queued, summed from the scopes, is at least the
// number of scopes with requests queued.
func (f *Frontier) Counts(ctx context.Context, own string) (frontier.SharedCounts, error) {
	f.counting.Lock()
	defer f.counting.Unlock()
	epoch := f.queue()
	f.scan.Lock()
	f.rescan(epoch)
	cursor := f.scan.cursor
	f.scan.Unlock()
	v, err := f.run(ctx, countsScript, append(f.head(reclaimPerCall), owner(own), endsPerCall, cursor, f.page))
	if err != nil {
		return frontier.SharedCounts{}, err
	}
	c, next, pending, err := countsOf(v)
	if err != nil {
		return frontier.SharedCounts{}, err
	}
	e := f.queue()
	f.scan.Lock()
	defer f.scan.Unlock()
	if e != epoch {
		// a restore started another queue meanwhile: which one this page
		// read is not known, and the next call's scan starts over
		f.rescan(e)
		c.Queued = max(c.Queued, pending)
		return c, nil
	}
	s := &f.scan
	if cursor == "0" {
		s.pass++
	}
	for name, sc := range c.Scopes {
		s.scopes[name] = scanned{sc, s.pass}
	}
	s.cursor = next
	if next == "0" {
		// the pass is through: a scope it did not read has nothing queued
		for name, sc := range s.scopes {
			if sc.pass != s.pass {
				delete(s.scopes, name)
			}
		}
	}
	if pending == 0 {
		clear(s.scopes)
	}
	c.Scopes, c.Queued = make(map[string]frontier.ScopeCounts, len(s.scopes)), 0
	for name, sc := range s.scopes {
		c.Scopes[name] = sc.ScopeCounts
		c.Queued += sc.Queued
	}
	c.Queued = max(c.Queued, pending)
	return c, nil
}

// countsOf reads the counts script's reply: the page's counts, the scan's
// next cursor and how many scopes have requests queued.
func countsOf(v any) (c frontier.SharedCounts, next string, pending int, err error) {
	bad := func(what string) (frontier.SharedCounts, string, int, error) {
		return frontier.SharedCounts{}, "", 0, fmt.Errorf("%w: counts: %s", ErrReply, what)
	}
	a, ok := v.([]any)
	if !ok || len(a) != 10 {
		return bad("not ten parts")
	}
	per, ok := a[0].([]any)
	if !ok || len(per)%3 != 0 {
		return bad("scopes")
	}
	c = frontier.SharedCounts{Scopes: make(map[string]frontier.ScopeCounts, len(per)/3)}
	for i := 0; i < len(per); i += 3 {
		name, ok := per[i].(string)
		if !ok {
			return bad("a scope's name")
		}
		q, qok := num(per[i+1])
		e, eok := num(per[i+2])
		if !qok || !eok {
			return bad("a scope's counts")
		}
		if name == "" || q <= 0 {
			continue // a count without a name, or gone wrong: nothing to take
		}
		c.Scopes[name] = frontier.ScopeCounts{Queued: int(min(q, 1<<40)), Ended: e}
		c.Queued += int(min(q, 1<<40))
	}
	var okAll bool
	c.Done, okAll = num(a[1])
	fl, ok2 := num(a[2])
	ret, ok3 := num(a[3])
	leased, ok4 := a[4].(int64)
	if !okAll || !ok2 || !ok3 || !ok4 || leased < 0 {
		return bad("totals")
	}
	c.Failed, c.Returned, c.Leased = fl, ret, int(min(leased, 1<<40))
	ends, ok := a[5].([]any)
	if !ok {
		return bad("ends")
	}
	for _, e := range ends {
		k, ok := e.(string)
		if !ok || len(k) != 16 {
			return bad("an end")
		}
		c.Ended = append(c.Ended, []byte(k))
	}
	held, ok := a[6].(int64)
	if !ok || held < 0 {
		return bad("held")
	}
	c.Held = time.Duration(min(held, int64(restoreHold/time.Millisecond))) * time.Millisecond
	next, ok = a[7].(string)
	if _, err := strconv.ParseUint(next, 10, 64); !ok || err != nil {
		return bad("the scan's cursor")
	}
	n, ok := a[8].(int64)
	if !ok || n < 0 {
		return bad("the scopes queued")
	}
	added, ok := a[9].(int64)
	if !ok || added < 0 {
		return bad("the requests added")
	}
	c.Added = added
	return c, next, int(min(n, 1<<40)), nil
}

// Restore implements frontier.Shared.
func (f *Frontier) Restore(ctx context.Context, own string, p frontier.SharedRestore) error {
	epoch := newEpoch()
	if p.N > 0 {
		epoch = f.queue() // the first piece's
	}
	args := []any{epoch, f.lists, owner(own), p.N, p.Done, p.Failed, restoreHold.Milliseconds(), p.TTL.Milliseconds(), len(p.Seen)}
	for _, k := range p.Seen {
		args = append(args, seenKey(k))
	}
	args = append(args, len(p.Ended))
	for _, k := range p.Ended {
		args = append(args, seenKey(k))
	}
	args = append(args, len(p.Leases))
	for _, l := range p.Leases {
		args = append(args, l.Lease, scopeID(l.Scope), l.Scope, seenKey(l.Key), l.Record)
	}
	for _, it := range p.Items {
		args = append(args, scopeID(it.Scope), it.Scope, seenKey(it.Key), it.Record)
	}
	v, err := f.run(ctx, restoreScript, args)
	if err != nil {
		return err
	}
	e, ok := v.(string)
	if !ok || e == "" {
		return fmt.Errorf("%w: restore: %T", ErrReply, v)
	}
	f.mu.Lock()
	f.epoch = e
	f.mu.Unlock()
	f.noteAdded(e, p.Items, nil) // some may have been re-added by another process: a take that finds them gone drops them
	return nil
}

// num reads a count Redis returned as a string or an integer: untrusted,
// so a negative or unreadable one is not ok.
func num(x any) (int64, bool) {
	switch v := x.(type) {
	case int64:
		return v, v >= 0
	case string:
		n, err := strconv.ParseInt(v, 10, 64)
		return n, err == nil && n >= 0
	}
	return 0, false
}

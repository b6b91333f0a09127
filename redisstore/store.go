package redisstore

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/colly-polite/polite/fleet"
)

// ErrReply is wrapped by every error about a reply from Redis that this
// package cannot read (a script flushed and replaced, a server that is not
// Redis): the caller falls back as for a server down.
var ErrReply = errors.New("redisstore: unreadable reply")

// Options are the Store's settings. The zero value of every field means the
// stated default.
type Options struct {
	// Prefix namespaces every key and the pause channel. "" means
	// "colly-polite".
	Prefix string
	// KeyTTL is how long a scope's keys live after their last use, so that
	// idle scopes vanish: at least 7/8 of it, at most all of it (the keys'
	// lives are renewed when they are down to 7/8). 0 means 1 hour.
	KeyTTL time.Duration
	// Logger is where New says which of the client's options would slow
	// each call to a down or slow Redis (one line at Warn, none for a
	// client set as the package recommends). nil means slog.Default().
	Logger *slog.Logger
}

// Store is an fleet.Store in Redis: several processes crawling the same
// sites share one send schedule, one law, one pause and one concurrency
// budget per scope, all advanced by Lua scripts on the server's clock. It
// is safe for concurrent use. Make one with New; the zero value is not
// usable.
type Store struct {
	c      redis.UniversalClient
	prefix string
	keyTTL time.Duration
	// leases numbers this store's leases: the acquiring process's name
	// (unique to it) and the number make a lease's name unique in the fleet
	leases atomic.Uint64

	mu   sync.Mutex
	subs map[uint64]func(fleet.Notice) // guarded by mu
	seq  uint64                        // guarded by mu
	ps   *redis.PubSub                 // guarded by mu: nil without subscribers
	done chan struct{}                 // guarded by mu: closed when the reader ends
}

// New returns a Store on client (any go-redis client: a single node, a
// Cluster, a Ring; authentication and TLS are the client's options). For a
// *redis.Client, *redis.ClusterClient or *redis.Ring it reads the options
// that decide how long a call to a down or slow Redis takes, and names in
// one line on o.Logger those to change (see the package doc).
func New(client redis.UniversalClient, o Options) *Store {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	checkClient(client, o.Logger)
	if o.Prefix == "" {
		o.Prefix = "colly-polite"
	}
	if o.KeyTTL <= 0 {
		o.KeyTTL = time.Hour
	}
	return &Store{c: client, prefix: o.Prefix, keyTTL: o.KeyTTL}
}

// keys are the scope's keys, all under one hash tag so that a script's
// keys share a Cluster slot.
func (s *Store) keys(scope string) []string {
	base := s.prefix + ":{" + tag(scope) + "}:"
	return []string{base + "sched", base + "law", base + "leases", base + "procs"}
}

// readable is how many of a scope's first bytes its tag shows.
const readable = 16

// tag names a scope in its keys in at most 39 bytes whatever its length
// (a key is written before the request it is for fails, and a host name
// may be any size): the scope's first bytes made readable for redis-cli
// --scan (a-z, 0-9, '.' and '-'; any other byte is '-'), a colon, and 128
// bits of its SHA-256 in base64url. It is never empty, which Cluster
// would ignore, and holds no brace, which would cut it short. Two scopes
// share keys only if their hashes collide: among a billion scopes the
// chance is under 10^-20 (n²/2^129), and a pair made on purpose costs
// some 2^64 hashes.
func tag(scope string) string {
	sum := sha256.Sum256([]byte(scope))
	b := make([]byte, 0, readable+1+base64.RawURLEncoding.EncodedLen(16))
	for i := 0; i < len(scope) && i < readable; i++ {
		c := scope[i]
		switch {
		case 'a' <= c && c <= 'z', '0' <= c && c <= '9', c == '.', c == '-':
		case 'A' <= c && c <= 'Z':
			c += 'a' - 'A'
		default:
			c = '-'
		}
		b = append(b, c)
	}
	b = append(b, ':')
	return string(base64.RawURLEncoding.AppendEncode(b, sum[:16]))
}

func (s *Store) channel() string { return s.prefix + ":pauses" }

func micros(d time.Duration) int64 { return int64(d / time.Microsecond) }

// member is the name in the leases' sorted set of lease id held by
// process: the holder, a '/' and a name with no '/', which the scripts
// read the holder back from (everything before the last '/'). An id that
// is already "process/name", name free of '/' and '%' (as the fleet's
// clients and this Store name theirs), is its own member, with no
// allocation; any other becomes "process/%" and the id with '%' and '/'
// escaped, so that two ids of a process never share a member.
func member(process, id string) string {
	if len(id) > len(process) && id[len(process)] == '/' && strings.HasPrefix(id, process) &&
		!strings.ContainsAny(id[len(process)+1:], "/%") {
		return id
	}
	var b strings.Builder
	b.Grow(len(process) + 2 + len(id) + 8)
	b.WriteString(process)
	b.WriteString("/%")
	for i := 0; i < len(id); i++ {
		switch id[i] {
		case '%':
			b.WriteString("%25")
		case '/':
			b.WriteString("%2F")
		default:
			b.WriteByte(id[i])
		}
	}
	return b.String()
}

// Lease implements fleet.Store.
func (s *Store) Lease(ctx context.Context, a fleet.LeaseRequest) (fleet.Lease, error) {
	a = a.Clamped()
	id := a.ID
	if id == "" {
		id = a.Process + "/" + strconv.FormatUint(s.leases.Add(1), 10)
	}
	res, err := s.run(ctx, acquireScript, s.keys(a.Scope),
		a.Process, a.Rate, a.Limit, strconv.FormatUint(a.Version, 10), a.Seed,
		micros(a.TTL), member(a.Process, id), s.keyTTL.Milliseconds(), a.Want,
		fleet.WantFresh.Milliseconds(), a.Ceiling, micros(a.MaxWait)).Slice()
	if err != nil {
		return fleet.Lease{}, fmt.Errorf("redisstore: lease %q: %w", a.Scope, err)
	}
	g, err := leaseOf(res)
	if g.ID != "" {
		g.ID = id // the caller's name, not its member
	}
	return g, err
}

// run runs script on a scope's keys; one that fails on a key of the wrong
// type (another program wrote there) runs again once repairScript has
// dropped such keys.
func (s *Store) run(ctx context.Context, script *redis.Script, keys []string, args ...any) *redis.Cmd {
	cmd := script.Run(ctx, s.c, keys, args...)
	if err := cmd.Err(); err != nil && strings.Contains(err.Error(), "WRONGTYPE") {
		if repairScript.Run(ctx, s.c, keys, s.keyTTL.Milliseconds()).Err() == nil {
			cmd = script.Run(ctx, s.c, keys, args...)
		}
	}
	return cmd
}

// leaseOf reads acquireScript's reply.
func leaseOf(res []any) (fleet.Lease, error) {
	r := reply{op: "lease", v: res, n: 10}
	g := fleet.Lease{
		ID:      r.str(0),
		Delay:   r.micros(1),
		Paused:  r.micros(2),
		Reason:  fleet.Reason(r.int(3, 255)),
		State:   r.bytes(4),
		Version: r.version(5),
		Live:    int(r.int(6, math.MaxInt32)),
		Full:    r.int(7, 1) == 1,
		Ceiling: r.rate(8),
		Held:    int(r.int(9, math.MaxInt32)),
	}
	return g, r.err
}

// Return implements fleet.Store.
func (s *Store) Return(ctx context.Context, rel fleet.Return) (fleet.Settlement, error) {
	res, err := s.run(ctx, releaseScript, s.keys(rel.Scope),
		rel.Process, leaseArg(rel.Process, rel.Lease), max(micros(rel.Pause), 0), int(rel.Reason), string(rel.State),
		strconv.FormatUint(rel.Version, 10), s.keyTTL.Milliseconds(), s.channel(), rel.Scope, boolArg(rel.Accepted),
		fleet.WantFresh.Milliseconds()).Slice()
	if err != nil {
		return fleet.Settlement{}, fmt.Errorf("redisstore: return %q: %w", rel.Scope, err)
	}
	return settlementOf(res)
}

// settlementOf reads releaseScript's reply.
func settlementOf(res []any) (fleet.Settlement, error) {
	r := reply{op: "return", v: res, n: 6}
	st := fleet.Settlement{
		Committed: r.int(0, 1) == 1,
		State:     r.bytes(1),
		Version:   r.version(2),
		Paused:    r.micros(3),
		Reason:    fleet.Reason(r.int(4, 255)),
		Accepted:  r.accepted(5),
	}
	return st, r.err
}

// leaseArg is the member of lease held by process, "" for none.
func leaseArg(process, lease string) string {
	if lease == "" {
		return ""
	}
	return member(process, lease)
}

func boolArg(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

// reply reads a script's reply; the first value out of shape is its err.
type reply struct {
	op  string
	v   []any
	n   int
	err error
}

func (r *reply) at(i int) (any, bool) {
	if r.err == nil && len(r.v) != r.n {
		r.err = fmt.Errorf("%w: %s returned %d values, want %d", ErrReply, r.op, len(r.v), r.n)
	}
	if r.err != nil {
		return nil, false
	}
	return r.v[i], true
}

func (r *reply) fail(i int, v any) {
	r.err = fmt.Errorf("%w: %s value %d: %v", ErrReply, r.op, i, v)
}

// int reads an integer in [0, hi].
func (r *reply) int(i int, hi int64) int64 {
	v, ok := r.at(i)
	if !ok {
		return 0
	}
	n, ok := v.(int64)
	if !ok || n < 0 || n > hi {
		r.fail(i, v)
		return 0
	}
	return n
}

func (r *reply) micros(i int) time.Duration {
	return time.Duration(r.int(i, math.MaxInt64/int64(time.Microsecond))) * time.Microsecond
}

// accepted reads a count of accepted answers, or -1 for none yet.
func (r *reply) accepted(i int) float64 {
	if v, ok := r.at(i); ok && v == int64(-1) {
		return -1
	}
	return float64(r.int(i, math.MaxInt32))
}

// rate reads a rate in req/s written as a string: a finite number at
// least 0.
func (r *reply) rate(i int) float64 {
	s := r.str(i)
	if r.err != nil {
		return 0
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) || f < 0 {
		r.fail(i, s)
		return 0
	}
	return f
}

func (r *reply) str(i int) string {
	v, ok := r.at(i)
	if !ok {
		return ""
	}
	s, ok := v.(string)
	if !ok {
		r.fail(i, v)
	}
	return s
}

// bytes reads a string or nil (Lua's false).
func (r *reply) bytes(i int) []byte {
	if v, ok := r.at(i); !ok || v == nil {
		return nil
	}
	return []byte(r.str(i))
}

func (r *reply) version(i int) uint64 {
	s := r.str(i)
	if r.err != nil {
		return 0
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		r.fail(i, s)
	}
	return n
}

// Renew implements fleet.Store.
func (s *Store) Renew(ctx context.Context, scope, process string, leases []string, ttl time.Duration) error {
	args := make([]any, 0, 4+len(leases))
	args = append(args, process, micros(fleet.LeaseTTL(ttl)), s.keyTTL.Milliseconds(), fleet.WantFresh.Milliseconds())
	for _, l := range leases {
		args = append(args, member(process, l))
	}
	if err := s.run(ctx, renewScript, s.keys(scope), args...).Err(); err != nil {
		return fmt.Errorf("redisstore: renew %q: %w", scope, err)
	}
	return nil
}

// Subscribe implements fleet.Notifier: fn hears of every pause shared
// and every turn announced by any process, through Redis pub/sub, while
// the subscription lasts. A message that cannot be read is ignored.
// Reconnection is go-redis's.
func (s *Store) Subscribe(fn func(fleet.Notice)) (cancel func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.subs == nil {
		s.subs = map[uint64]func(fleet.Notice){}
	}
	s.seq++
	id := s.seq
	s.subs[id] = fn
	if s.ps == nil {
		s.ps = s.c.Subscribe(context.Background(), s.channel())
		// wait (briefly) for the subscription to be in force, so that a
		// pause shared once Subscribe returns is heard; a server down now
		// is subscribed to when it comes back (go-redis reconnects)
		ctx, cancel := context.WithTimeout(context.Background(), subscribeWait)
		_, _ = s.ps.ReceiveTimeout(ctx, subscribeWait)
		cancel()
		s.done = make(chan struct{})
		go s.read(s.ps, s.done)
	}
	return func() {
		s.mu.Lock()
		delete(s.subs, id)
		var ps *redis.PubSub
		var done chan struct{}
		if len(s.subs) == 0 && s.ps != nil {
			ps, done = s.ps, s.done
			s.ps, s.done = nil, nil
		}
		s.mu.Unlock()
		if ps != nil {
			_ = ps.Close()
			<-done
		}
	}
}

const subscribeWait = time.Second

func (s *Store) read(ps *redis.PubSub, done chan struct{}) {
	defer close(done)
	for m := range ps.Channel() {
		n, ok := parseNotice(m.Payload)
		if !ok {
			continue
		}
		s.mu.Lock()
		fns := make([]func(fleet.Notice), 0, len(s.subs))
		for _, fn := range s.subs {
			fns = append(fns, fn)
		}
		s.mu.Unlock()
		for _, fn := range fns {
			fn(n)
		}
	}
}

// parseNotice reads a pause, "p\npause-µs\nreason\nscope", or a turn,
// "t\nprocess\nscope" (the scope last: it may hold newlines).
func parseNotice(p string) (fleet.Notice, bool) {
	kind, rest, ok := strings.Cut(p, "\n")
	if !ok {
		return fleet.Notice{}, false
	}
	switch kind {
	case "t":
		proc, scope, ok := strings.Cut(rest, "\n")
		if !ok || proc == "" {
			return fleet.Notice{}, false
		}
		return fleet.Notice{Scope: scope, Turn: proc}, true
	case "p":
		ds, rest, ok1 := strings.Cut(rest, "\n")
		rs, scope, ok2 := strings.Cut(rest, "\n")
		if !ok1 || !ok2 {
			return fleet.Notice{}, false
		}
		d, err1 := strconv.ParseInt(ds, 10, 64)
		r, err2 := strconv.ParseUint(rs, 10, 8)
		if err1 != nil || err2 != nil || d <= 0 || d > int64(math.MaxInt64/time.Microsecond) {
			return fleet.Notice{}, false
		}
		return fleet.Notice{Scope: scope, Pause: time.Duration(d) * time.Microsecond, Reason: fleet.Reason(r)}, true
	}
	return fleet.Notice{}, false
}

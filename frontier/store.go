package frontier

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"hash/fnv"
	"net/http"
	"net/url"
	"os"
	"sync"
	"time"

	"go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// The file's layout (bbolt buckets):
//
//	meta    "format" → fileFormat: the version record, written first
//	scopes  scope key → its id (8 bytes, big-endian)
//	items   id ‖ seq (16 bytes) → a record: every request not done, in
//	        flight or queued, in its scope's order (seq grows)
//	flight  id ‖ seq → nothing: the requests handed to a thread
//	seen    request key → nothing: every request ever added, so that a
//	        repeat is dropped across restarts
var (
	bucketMeta   = []byte("meta")
	bucketScopes = []byte("scopes")
	bucketItems  = []byte("items")
	bucketFlight = []byte("flight")
	bucketSeen   = []byte("seen")
	keyFormat    = []byte("format")
)

// fileFormat is the version record; another value is another version's file.
const fileFormat = "colly-polite frontier 1"

// A record's first byte is its format; the next four are the CRC-32
// (IEEE) of the rest: Colly's marshalled request (recordColly), or for a
// GET with nothing but a URL and a depth (what AddURL and most AddLink
// calls add), the depth as a uvarint and the URL (recordPlain), less than
// half the bytes to write.
const (
	recordColly = 1
	recordPlain = 2
)

// maxDepth bounds a plain record's depth, untrusted input.
const maxDepth = 1 << 20

// openTimeout bounds the wait for the file's lock.
const openTimeout = time.Second

// window is how many of a scope's requests a file-backed queue keeps in
// memory; the rest are read from the file as the scope's turn comes.
const window = 1

func encodeRecord(data []byte) []byte { return sealRecord(recordColly, data) }

func encodePlain(u string, depth int) []byte {
	p := binary.AppendUvarint(make([]byte, 0, len(u)+3), uint64(depth))
	return sealRecord(recordPlain, append(p, u...))
}

func sealRecord(format byte, payload []byte) []byte {
	b := make([]byte, 5+len(payload))
	b[0] = format
	binary.BigEndian.PutUint32(b[1:5], crc32.ChecksumIEEE(payload))
	copy(b[5:], payload)
	return b
}

// plain is a plain record's request, as Colly marshals it.
type plain struct {
	URL    string
	Method string
	Depth  int
}

// serialized is what the queue reads of Colly's marshalled request.
type serialized struct {
	URL     string
	Method  string
	Headers http.Header
}

// checkRecord checks a record's format and checksum, what a read of the
// file checks before the record is decoded (at its turn, decodeRecord).
func checkRecord(b []byte) error {
	if len(b) < 5 || (b[0] != recordColly && b[0] != recordPlain) {
		return errors.New("frontier: a record of an unknown format")
	}
	if crc32.ChecksumIEEE(b[5:]) != binary.BigEndian.Uint32(b[1:5]) {
		return errors.New("frontier: a record fails its checksum")
	}
	return nil
}

// decodeRecord reads a record from the file: untrusted bytes.
func decodeRecord(b []byte) (item, error) {
	if err := checkRecord(b); err != nil {
		return item{}, err
	}
	data := b[5:]
	if b[0] == recordColly {
		return parseItem(bytes.Clone(data))
	}
	depth, n := binary.Uvarint(data)
	if n <= 0 || depth > maxDepth {
		return item{}, errors.New("frontier: a record with a bad depth")
	}
	// a plain GET: its request made straight from the URL, and what Colly
	// reads marshalled for it
	raw := string(data[n:])
	u, err := url.Parse(raw)
	if err != nil || !webURL(u) {
		return item{}, fmt.Errorf("frontier: a record holds %q, not an absolute http or https URL", raw)
	}
	j, err := json.Marshal(plain{URL: raw, Method: http.MethodGet, Depth: int(depth)})
	if err != nil {
		return item{}, fmt.Errorf("frontier: %w", err)
	}
	return item{data: j, req: &http.Request{Method: http.MethodGet, URL: u, Host: u.Host, Header: http.Header{}}}, nil
}

// parseItem makes an item of Colly's marshalled request.
func parseItem(data []byte) (item, error) {
	var sr serialized
	if err := json.Unmarshal(data, &sr); err != nil {
		return item{}, fmt.Errorf("frontier: a record does not hold a request: %w", err)
	}
	u, err := url.Parse(sr.URL)
	if err != nil || !webURL(u) {
		return item{}, fmt.Errorf("frontier: a record holds %q, not an absolute http or https URL", sr.URL)
	}
	method := sr.Method
	if method == "" {
		method = http.MethodGet
	}
	req := &http.Request{Method: method, URL: u, Host: u.Host, Header: sr.Headers}
	if req.Header == nil {
		req.Header = http.Header{}
	}
	return item{data: data, req: req}, nil
}

func itemKey(id, seq uint64) [16]byte {
	var k [16]byte
	binary.BigEndian.PutUint64(k[:8], id)
	binary.BigEndian.PutUint64(k[8:], seq)
	return k
}

// seenKey is what makes two requests the same: method, URL and body, as
// Colly's revisit check hashes them. A key longer than maxKey (a URL of
// 40,000 characters, which a hostile page may link) is its hash instead:
// the file keeps keys in bbolt, which refuses one over 32 KiB, and the
// commit that carried it failed and broke the queue for good.
func seenKey(method, u string, body []byte) []byte {
	k := method + " " + u
	if len(body) > 0 {
		h := sha256.Sum256(body)
		k += fmt.Sprintf(" %x", h[:16])
	}
	if len(k) > maxKey {
		h := sha256.Sum256([]byte(k))
		k = fmt.Sprintf("%s #%x", method, h)
	}
	return []byte(k)
}

// maxKey bounds a key the file keeps as it is (bbolt's bound is 32 KiB).
const maxKey = 16 << 10

type opKind uint8

const (
	opAdd    opKind = iota // put a request in its scope's FIFO, if not seen
	opFlight               // mark a request handed to a thread
	opDone                 // forget a request that is done
)

// op is one change to the file. Its results are set by the commit that
// writes it, before done is closed.
type op struct {
	kind  opKind
	key   [16]byte // opFlight, opDone
	scope string   // opAdd
	rec   []byte   // opAdd
	seen  []byte   // opAdd
	mem   item     // opAdd to a queue without a file

	id, seq uint64 // opAdd: where it went
	dup     bool   // opAdd: seen before, not added
	err     error
	done    chan struct{}
}

// store is a queue's file. Commits are grouped: a caller whose ops find no
// commit running writes them, and those that arrive meanwhile, in one
// transaction each round; the others wait for the round that holds
// theirs. An op posted (post) waits for no round: it rides in the next
// one. Safe for concurrent use.
type store struct {
	db    *bbolt.DB
	path  string
	apply func([]*op) // the queue's view of a committed round, in order
	fail  func(error) // told of a posted op that failed

	mu      sync.Mutex // a leaf
	pend    []*op      // guarded by mu
	busy    bool       // guarded by mu: a caller is committing
	drained *sync.Cond // on mu: broadcast when busy ends
}

// do writes ops to the file and returns once they are committed.
func (st *store) do(ops ...*op) error {
	for _, o := range ops {
		o.done = make(chan struct{})
	}
	st.mu.Lock()
	st.pend = append(st.pend, ops...)
	if st.busy {
		st.mu.Unlock()
		for _, o := range ops {
			<-o.done
		}
		return ops[0].err
	}
	st.busy = true
	st.drain()
	st.mu.Unlock()
	return ops[0].err
}

// post writes o to the file without waiting for it: with the next round,
// or in one of its own begun in the background if none is running. A
// failure goes to fail.
func (st *store) post(o *op) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.pend = append(st.pend, o)
	if !st.busy {
		st.busy = true
		go func() {
			st.mu.Lock()
			st.drain()
			st.mu.Unlock()
		}()
	}
}

// drain commits rounds until nothing is pending. Called with mu held and
// busy set by the caller; returns with mu held and busy clear.
func (st *store) drain() {
	for len(st.pend) > 0 {
		round := st.pend
		st.pend = nil
		st.mu.Unlock()
		st.commit(round)
		st.apply(round)
		for _, o := range round {
			if o.done != nil {
				close(o.done)
			} else if o.err != nil && st.fail != nil {
				st.fail(o.err)
			}
		}
		st.mu.Lock()
	}
	st.busy = false
	if st.drained != nil {
		st.drained.Broadcast()
	}
}

// flush returns once every op posted before it is committed.
func (st *store) flush() {
	st.mu.Lock()
	defer st.mu.Unlock()
	for st.busy || len(st.pend) > 0 {
		if !st.busy {
			st.busy = true
			st.drain()
			continue
		}
		st.drained.Wait()
	}
}

// commit writes a round in one transaction; an error fails each op.
func (st *store) commit(round []*op) {
	var err error
	defer func() {
		if r := recover(); r != nil { // bbolt panics on a page damaged since the file was opened
			err = fmt.Errorf("%w: %s: %v", ErrCorrupt, st.path, r)
			for _, o := range round {
				o.err = err
			}
		}
	}()
	err = st.db.Update(func(tx *bbolt.Tx) error {
		scopes, items := tx.Bucket(bucketScopes), tx.Bucket(bucketItems)
		flight, seen := tx.Bucket(bucketFlight), tx.Bucket(bucketSeen)
		for _, o := range round {
			o.dup = false
			var err error
			switch o.kind {
			case opAdd:
				if seen.Get(o.seen) != nil {
					o.dup = true
					continue
				}
				if o.id, err = scopeID(scopes, o.scope); err != nil {
					return err
				}
				if o.seq, err = items.NextSequence(); err != nil {
					return err
				}
				k := itemKey(o.id, o.seq)
				if err = items.Put(k[:], o.rec); err == nil {
					err = seen.Put(o.seen, []byte{})
				}
			case opFlight:
				err = flight.Put(o.key[:], []byte{})
			case opDone:
				if err = items.Delete(o.key[:]); err == nil {
					err = flight.Delete(o.key[:])
				}
			}
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		err = fmt.Errorf("frontier: writing %s: %w", st.path, err)
	}
	for _, o := range round {
		o.err = err
	}
}

func scopeID(scopes *bbolt.Bucket, key string) (uint64, error) {
	if v := scopes.Get([]byte(key)); len(v) == 8 {
		return binary.BigEndian.Uint64(v), nil
	} else if v != nil {
		return 0, fmt.Errorf("%w: scope %q has an id of %d bytes", ErrCorrupt, key, len(v))
	}
	id, err := scopes.NextSequence()
	if err != nil {
		return 0, err
	}
	var v [8]byte
	binary.BigEndian.PutUint64(v[:], id)
	return id, scopes.Put([]byte(key), v[:])
}

// loaded is what a file holds when it is opened.
type loaded struct {
	scopes   map[uint64]*sub // by id
	size     int
	requeued int
}

// openStore opens (or makes) the file at path and reads the queue it
// holds: per scope its count and its head, the requests that were in
// flight queued again where they were.
func openStore(path string, noSync bool) (st *store, l loaded, err error) {
	if err := precheck(path); err != nil {
		return nil, l, err
	}
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{Timeout: openTimeout, NoSync: noSync, FreelistType: bbolt.FreelistMapType})
	switch {
	case errors.Is(err, berrors.ErrTimeout):
		return nil, l, fmt.Errorf("%w: %s (gave up after %v)", ErrLocked, path, openTimeout)
	case err != nil:
		return nil, l, fmt.Errorf("%w: %s: %v", ErrCorrupt, path, err)
	}
	st = &store{db: db, path: path}
	st.drained = sync.NewCond(&st.mu)
	defer func() {
		if r := recover(); r != nil { // bbolt panics on a damaged page
			err = fmt.Errorf("%w: %s: %v", ErrCorrupt, path, r)
		}
		if err != nil {
			db.Close()
			st = nil
		}
	}()
	if err = checkFormat(db, path); err != nil {
		return nil, l, err
	}
	l, err = load(db, path)
	return st, l, err
}

// precheck reads the file's two bbolt meta pages before bbolt opens it:
// bbolt panics, holding the file, on a file cut short (its pages past the
// end) or a damaged free list, so those are told apart first.
func precheck(path string) error {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	} else if err != nil {
		return fmt.Errorf("frontier: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("frontier: %w", err)
	}
	if fi.Size() == 0 {
		return nil // a new queue
	}
	// bbolt's two meta pages: page 0, and page 1 one page size further
	// (page 0's, or bbolt's default when page 0 is damaged); the valid one
	// with the later transaction is in force
	const header, metaLen = 16, 64
	meta := func(off int64) boltMeta {
		var b [header + metaLen]byte
		if _, err := f.ReadAt(b[:], off); err != nil {
			return boltMeta{}
		}
		return parseMeta(b[header:])
	}
	var best *boltMeta
	off := int64(os.Getpagesize())
	if m0 := meta(0); m0.ok {
		best, off = &m0, int64(m0.pageSize)
	}
	if m1 := meta(off); m1.ok && (best == nil || m1.txid > best.txid) {
		best = &m1
	}
	if best == nil {
		return fmt.Errorf("%w: %s is not a bbolt file, or both its meta pages are damaged", ErrCorrupt, path)
	}
	if need := int64(best.pgid) * int64(best.pageSize); fi.Size() < need {
		return fmt.Errorf("%w: %s is truncated (%d bytes of %d)", ErrCorrupt, path, fi.Size(), need)
	}
	if best.freelist != ^uint64(0) {
		if best.freelist >= best.pgid || best.root >= best.pgid {
			return fmt.Errorf("%w: %s: its meta page points past its end", ErrCorrupt, path)
		}
		var h [16]byte
		if _, err := f.ReadAt(h[:], int64(best.freelist)*int64(best.pageSize)); err != nil || binary.LittleEndian.Uint16(h[8:10])&0x10 == 0 {
			return fmt.Errorf("%w: %s: its free list page is damaged", ErrCorrupt, path)
		}
	}
	return nil
}

// boltMeta is what precheck reads of a bbolt meta page (bbolt's layout,
// in the machine's byte order: little-endian where this runs).
type boltMeta struct {
	ok                         bool
	pageSize                   uint32
	root, freelist, pgid, txid uint64
}

func parseMeta(b []byte) boltMeta {
	const magic, version = 0xED0CDAED, 2
	le := binary.LittleEndian
	h := fnv.New64a()
	h.Write(b[:56])
	m := boltMeta{
		pageSize: le.Uint32(b[8:12]),
		root:     le.Uint64(b[16:24]),
		freelist: le.Uint64(b[32:40]),
		pgid:     le.Uint64(b[40:48]),
		txid:     le.Uint64(b[48:56]),
	}
	m.ok = le.Uint32(b[0:4]) == magic && le.Uint32(b[4:8]) == version && le.Uint64(b[56:64]) == h.Sum64() &&
		m.pageSize >= 512 && m.pageSize <= 1<<20
	return m
}

// checkFormat reads the version record, or writes it in a new file.
func checkFormat(db *bbolt.DB, path string) error {
	return db.Update(func(tx *bbolt.Tx) error {
		if fi, err := os.Stat(path); err == nil && fi.Size() < tx.Size() {
			return fmt.Errorf("%w: %s is truncated (%d bytes of %d)", ErrCorrupt, path, fi.Size(), tx.Size())
		}
		meta := tx.Bucket(bucketMeta)
		if meta == nil {
			empty := true
			_ = tx.ForEach(func([]byte, *bbolt.Bucket) error { empty = false; return nil })
			if !empty {
				return fmt.Errorf("%w: %s has no version record", ErrFormat, path)
			}
			for _, name := range [][]byte{bucketMeta, bucketScopes, bucketItems, bucketFlight, bucketSeen} {
				if _, err := tx.CreateBucket(name); err != nil {
					return err
				}
			}
			return tx.Bucket(bucketMeta).Put(keyFormat, []byte(fileFormat))
		}
		if v := meta.Get(keyFormat); string(v) != fileFormat {
			return fmt.Errorf("%w: %s holds %q, this version reads %q", ErrFormat, path, v, fileFormat)
		}
		for _, name := range [][]byte{bucketScopes, bucketItems, bucketFlight, bucketSeen} {
			if tx.Bucket(name) == nil {
				return fmt.Errorf("%w: %s has no %s bucket", ErrCorrupt, path, name)
			}
		}
		return nil
	})
}

// load reads the queue of a file whose format is known, and clears its
// in-flight marks: those requests are queued again, at their scope's head.
func load(db *bbolt.DB, path string) (loaded, error) {
	l := loaded{scopes: map[uint64]*sub{}}
	err := db.Update(func(tx *bbolt.Tx) error {
		flight := tx.Bucket(bucketFlight)
		l.requeued = flight.Stats().KeyN
		if l.requeued > 0 {
			if err := tx.DeleteBucket(bucketFlight); err != nil {
				return err
			}
			if _, err := tx.CreateBucket(bucketFlight); err != nil {
				return err
			}
		}
		err := tx.Bucket(bucketScopes).ForEach(func(k, v []byte) error {
			if len(v) != 8 {
				return fmt.Errorf("%w: %s: scope %q has an id of %d bytes", ErrCorrupt, path, k, len(v))
			}
			id := binary.BigEndian.Uint64(v)
			l.scopes[id] = &sub{key: string(k), id: id, idx: -1}
			return nil
		})
		if err != nil {
			return err
		}
		var s *sub
		return tx.Bucket(bucketItems).ForEach(func(k, v []byte) error {
			if len(k) != 16 {
				return fmt.Errorf("%w: %s: an item key of %d bytes", ErrCorrupt, path, len(k))
			}
			id, seq := binary.BigEndian.Uint64(k[:8]), binary.BigEndian.Uint64(k[8:])
			if s == nil || s.id != id {
				if s = l.scopes[id]; s == nil {
					return fmt.Errorf("%w: %s: an item of scope %d, which has no key", ErrCorrupt, path, id)
				}
			}
			l.size++
			if len(s.items) < window && s.disk == 0 {
				if _, err := decodeRecord(v); err != nil {
					return fmt.Errorf("%w: %s: %v", ErrCorrupt, path, err)
				}
				s.items = append(s.items, item{rec: bytes.Clone(v), key: itemKey(id, seq)})
				s.cursor = seq
			} else {
				s.disk++
			}
			return nil
		})
	})
	return l, err
}

// read returns, for each refill, up to n of its scope's requests after its
// seq, in order: one read transaction for them all.
func (st *store) read(refills []refill, n int) (out [][]item, err error) {
	defer func() {
		if r := recover(); r != nil { // bbolt panics on a page damaged since the file was opened
			out, err = nil, fmt.Errorf("%w: %s: %v", ErrCorrupt, st.path, r)
		}
	}()
	out = make([][]item, len(refills))
	err = st.db.View(func(tx *bbolt.Tx) error {
		c := tx.Bucket(bucketItems).Cursor()
		for i, r := range refills {
			from := itemKey(r.id, r.after+1)
			for k, v := c.Seek(from[:]); k != nil && len(out[i]) < n; k, v = c.Next() {
				if len(k) != 16 || binary.BigEndian.Uint64(k[:8]) != r.id {
					break
				}
				if err := checkRecord(v); err != nil {
					return fmt.Errorf("%w: %s: %v", ErrCorrupt, st.path, err)
				}
				it := item{rec: bytes.Clone(v)}
				copy(it.key[:], k)
				out[i] = append(out[i], it)
			}
		}
		return nil
	})
	if err != nil {
		out = nil
	}
	return out, err
}

func (st *store) close() error {
	st.flush()
	return st.db.Close()
}

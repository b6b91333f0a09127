package redisfrontier

import "github.com/redis/go-redis/v9"

// The scripts run on the server's clock (TIME, in ms) and one at a time, so
// each is atomic: a request is in exactly one place, its scope's list or
// the leases. Nothing from a request is ever part of a script's text:
// only KEYS and ARGV.
//
// KEYS, for every script: 1 the epoch (string: the queue's name, made once;
// a script that finds another, or none, answers LOST), 2 the requests seen
// (set of 16-byte keys), 3 the queued counts (hash: scope id -> count, the
// scopes with requests queued), 4 the scope names (hash: id -> scope), 5
// the leases (hash: lease -> scope id, 16 characters, then the entry), 6
// the leases' expiries (sorted set: lease -> ms), 7 the totals (hash: done,
// failed, returned), 8 the ended counts (hash: scope id -> count), 9 the
// keys not to hand out (set: requests that ended, or were held, before the
// queue was lost), 10 the pieces restored (set: owner:piece), 11 until
// when takes are held (string, ms) after a lost queue started again, 12
// the passes (set: keys of 9 whose request went back to its scope's list
// from a lease, which a take then hands out once). A
// scope's list is ARGV[2] .. its id, and an owner's list of ends ARGV[2]
// .. 'e:' .. the owner: keys a script builds, all under the same hash tag
// as the others (one slot).
//
// An entry, in a scope's list and in a lease, is its owner (16
// characters: the queue that added it), its key (16 bytes) and its record.
//
// What is stored is untrusted too: a list entry or a lease of the wrong
// shape is dropped, a count that is not a number reads as 0.

// endsLife is how long an owner's list of ends lives after its last end,
// ms: an owner gone for that long is not coming back for them.
const endsLife = "3600000"

// tell puts key on owner's list of ends (ARGV[2] is the list prefix):
// the owner forgets the request.
const tell = `
local function tell(owner, key)
  local ends = ARGV[2] .. 'e:' .. owner
  redis.call('RPUSH', ends, key)
  redis.call('PEXPIRE', ends, ` + endsLife + `)
end
`

// prelude checks the epoch, reads the clock and defines back, which puts
// a lease's request back at its scope's head, and reclaim, which does so
// for up to ARGV[3] requests whose lease expired (their process died, or
// stopped renewing).
const prelude = `
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return redis.error_reply('LOST the queue is gone') end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
-- back queues a lease's entry v (48 bytes or more) again. A key not to
-- hand out was leased when the queue was built again: its request has
-- not run, and gets a pass (any other copy of it is still dropped).
local function back(v)
  local sid = string.sub(v, 1, 16)
  redis.call('LPUSH', ARGV[2] .. sid, string.sub(v, 17))
  redis.call('HINCRBY', KEYS[3], sid, 1)
  if redis.call('SISMEMBER', KEYS[9], string.sub(v, 33, 48)) == 1 then
    redis.call('SADD', KEYS[12], string.sub(v, 33, 48))
  end
end
local function reclaim(n)
  if n <= 0 then return end
  local gone = redis.call('ZRANGEBYSCORE', KEYS[6], '-inf', now, 'LIMIT', 0, n)
  for _, l in ipairs(gone) do
    local v = redis.call('HGET', KEYS[5], l)
    if v and #v >= 48 then
      back(v)
      redis.call('HINCRBY', KEYS[7], 'returned', 1)
    end
    redis.call('HDEL', KEYS[5], l)
    redis.call('ZREM', KEYS[6], l)
  end
end
` + tell + `
-- held is how long takes are still held, ms
local function held()
  local h = tonumber(redis.call('GET', KEYS[11]) or '') or 0
  if h > now then return h - now end
  return 0
end
`

// addScript: ARGV 1 epoch, 2 list prefix, 3 the owner, then per item its
// scope id, scope, key and record. Returns 1 or 0 per item: added, or seen
// before.
var addScript = redis.NewScript(prelude + `
local out = {}
for i = 4, #ARGV - 3, 4 do
  local sid, scope, key, rec = ARGV[i], ARGV[i+1], ARGV[i+2], ARGV[i+3]
  if redis.call('SADD', KEYS[2], key) == 1 then
    redis.call('RPUSH', ARGV[2] .. sid, ARGV[3] .. key .. rec)
    redis.call('HINCRBY', KEYS[3], sid, 1)
    redis.call('HSETNX', KEYS[4], sid, scope)
    out[#out + 1] = 1
  else
    out[#out + 1] = 0
  end
end
return out
`)

// takeScript: ARGV 1 epoch, 2 list prefix, 3 how many expired leases to
// reclaim first, 4 the lease's life in ms, then per ask a scope id and a
// lease name. Returns per ask the key and record leased, or false (nil)
// for none, 0 for none because the scope has nothing queued; none at all
// while takes are held. A lease that exists already
// (a retry) returns its request, renewed. An entry whose key ended (or was
// held) before the queue was lost is dropped (it ran, or its holder has
// it), and its owner told, as of an end, unless the key has a pass, which
// the take uses.
var takeScript = redis.NewScript(prelude + `
reclaim(tonumber(ARGV[3]) or 0)
local ttl = tonumber(ARGV[4]) or 0
local hold = held() > 0
local tomb = redis.call('EXISTS', KEYS[9]) == 1
local out = {}
for i = 5, #ARGV - 1, 2 do
  local sid, lease = ARGV[i], ARGV[i+1]
  local v = redis.call('HGET', KEYS[5], lease)
  if v and #v >= 48 then
    redis.call('ZADD', KEYS[6], now + ttl, lease)
    out[#out + 1] = string.sub(v, 33)
  elseif hold then
    out[#out + 1] = false
  else
    local got = false
    for try = 1, 16 do
      local e = redis.call('LPOP', ARGV[2] .. sid)
      if not e then break end
      if redis.call('HINCRBY', KEYS[3], sid, -1) <= 0 then
        redis.call('HDEL', KEYS[3], sid)
        if redis.call('LLEN', ARGV[2] .. sid) > 0 then -- a count gone wrong: the list says
          redis.call('HSET', KEYS[3], sid, redis.call('LLEN', ARGV[2] .. sid))
        end
      end
      local k = string.sub(e, 17, 32)
      if #e >= 32 and not (tomb and redis.call('SISMEMBER', KEYS[9], k) == 1 and redis.call('SREM', KEYS[12], k) == 0) then
        redis.call('HSET', KEYS[5], lease, sid .. e)
        redis.call('ZADD', KEYS[6], now + ttl, lease)
        got = string.sub(e, 17)
        break
      end
      if #e >= 32 then tell(string.sub(e, 1, 16), k) end
    end
    if not got and redis.call('LLEN', ARGV[2] .. sid) == 0 then
      redis.call('HDEL', KEYS[3], sid)
      got = 0
    end
    out[#out + 1] = got
  end
end
return out
`)

// doneScript: ARGV 1 epoch, 2 list prefix, 3 (unused), then per end a
// lease and 1 (failed) or 0. A lease no longer held (reclaimed) is left:
// its request is queued again. An end is told to the request's owner (its
// list of ends, read by its next Counts).
var doneScript = redis.NewScript(prelude + `
for i = 4, #ARGV - 1, 2 do
  local lease = ARGV[i]
  local v = redis.call('HGET', KEYS[5], lease)
  if v and redis.call('ZREM', KEYS[6], lease) == 1 then
    redis.call('HDEL', KEYS[5], lease)
    if ARGV[i+1] == '1' then
      redis.call('HINCRBY', KEYS[7], 'failed', 1)
    else
      redis.call('HINCRBY', KEYS[7], 'done', 1)
    end
    redis.call('HINCRBY', KEYS[8], string.sub(v, 1, 16), 1)
    if #v >= 48 then tell(string.sub(v, 17, 32), string.sub(v, 33, 48)) end
  end
end
return 1
`)

// releaseScript: ARGV 1 epoch, 2 list prefix, 3 (unused), then the leases
// to give back: each still held goes back to its scope's head.
var releaseScript = redis.NewScript(prelude + `
for i = 4, #ARGV do
  local v = redis.call('HGET', KEYS[5], ARGV[i])
  if v and redis.call('ZREM', KEYS[6], ARGV[i]) == 1 then
    redis.call('HDEL', KEYS[5], ARGV[i])
    if #v >= 48 then back(v) end
  end
end
return 1
`)

// renewScript: ARGV 1 epoch, 2 list prefix, 3 (unused), 4 the lease's life
// in ms, then the leases. Only leases still held are renewed.
var renewScript = redis.NewScript(prelude + `
local ttl = tonumber(ARGV[4]) or 0
for i = 5, #ARGV do
  if redis.call('ZSCORE', KEYS[6], ARGV[i]) then
    redis.call('ZADD', KEYS[6], 'XX', now + ttl, ARGV[i])
  end
end
return 1
`)

// countsScript: ARGV 1 epoch, 2 list prefix, 3 how many expired leases
// to reclaim first, 4 the owner, 5 how many of its ends to read, 6 the
// cursor of the scopes' scan ('0': from the start), 7 about how many
// scopes to read. Returns {per scope read: name, count, ended...} (a count
// that is not a positive number, or a scope with no name, is deleted),
// done,
// failed, returned, leased, the owner's ends read (keys, then forgotten),
// how long takes are still held (ms), the scan's next cursor ('0': the
// scan is through), how many scopes have requests queued, how many
// requests were ever added (the set seen). The scopes are
// read a page at a time (HSCAN), so that a call costs the same whatever
// the queue holds: a scope present for a whole scan is read at least once
// in it.
var countsScript = redis.NewScript(prelude + `
reclaim(tonumber(ARGV[3]) or 0)
local sc = redis.call('HSCAN', KEYS[3], ARGV[6], 'COUNT', tonumber(ARGV[7]) or 1000)
local c = sc[2]
local out = {}
for i = 1, #c - 1, 2 do
  local name = redis.call('HGET', KEYS[4], c[i])
  if name and (tonumber(c[i + 1]) or 0) > 0 then
    out[#out + 1] = name
    out[#out + 1] = c[i + 1]
    out[#out + 1] = redis.call('HGET', KEYS[8], c[i]) or '0'
  else
    -- a count gone wrong, or a scope with no name that no take can ask
    -- for: not a scope with requests queued (HLEN counts those)
    redis.call('HDEL', KEYS[3], c[i])
  end
end
local st = redis.call('HMGET', KEYS[7], 'done', 'failed', 'returned')
local ends, n = ARGV[2] .. 'e:' .. ARGV[4], tonumber(ARGV[5]) or 0
local got = {}
if n > 0 then
  got = redis.call('LRANGE', ends, 0, n - 1)
  if #got > 0 then redis.call('LTRIM', ends, #got, -1) end
end
return {out, st[1] or '0', st[2] or '0', st[3] or '0', redis.call('ZCARD', KEYS[6]), got, held(), sc[1], redis.call('HLEN', KEYS[3]), redis.call('SCARD', KEYS[2])}
`)

// restoreScript builds a lost queue again from one piece of a process's
// part. ARGV 1: for the first piece, an epoch for the new queue if none is
// there yet (it is how a process joins the new queue); for the others,
// the epoch the first joined (another: LOST, lost again meanwhile, and
// the part starts again). 2 list prefix, 3 the
// owner, 4 the piece's number, 5 done, 6 failed (to add to the totals), 7
// how long takes are held from this piece (ms), 8 the leases' life (ms), 9
// how many keys seen, then those, then how many ended, those, how many
// leases, and per lease its name, scope id, scope, key and record, then
// per item its scope id, scope, key and record. Returns the queue's
// epoch. An item whose key the new queue has seen already is not queued:
// another process, restored first, added it again meanwhile, or holds it
// (its pieces put the items before the keys seen, so its own keys seen
// hide none of them). A lease is the owner's, its key seen and not to
// hand out (another process's copy, queued before or after, is dropped):
// only the lease puts its request back.
var restoreScript = redis.NewScript(tell + `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if ARGV[4] == '0' then
  redis.call('SET', KEYS[1], ARGV[1], 'NX')
elseif redis.call('GET', KEYS[1]) ~= ARGV[1] then
  -- lost again since the first piece: the part starts again
  return redis.error_reply('LOST the queue is gone')
end
local epoch = redis.call('GET', KEYS[1])
-- every piece holds the takes from now: the part is not all in yet
local h = now + (tonumber(ARGV[7]) or 0)
if (tonumber(redis.call('GET', KEYS[11]) or '') or 0) < h then redis.call('SET', KEYS[11], h) end
if redis.call('SADD', KEYS[10], ARGV[3] .. ':' .. ARGV[4]) == 0 then return epoch end
redis.call('HINCRBY', KEYS[7], 'done', tonumber(ARGV[5]) or 0)
redis.call('HINCRBY', KEYS[7], 'failed', tonumber(ARGV[6]) or 0)
local ttl = tonumber(ARGV[8]) or 0
local ns = tonumber(ARGV[9]) or 0
local ne = tonumber(ARGV[10 + ns]) or 0
local nl = tonumber(ARGV[11 + ns + ne]) or 0
local leases = 12 + ns + ne
local items = leases + 5 * nl
-- the items first: the keys seen hold theirs
for k = items, #ARGV - 3, 4 do
  local sid, scope, key, rec = ARGV[k], ARGV[k+1], ARGV[k+2], ARGV[k+3]
  if redis.call('SADD', KEYS[2], key) == 1 then
    redis.call('RPUSH', ARGV[2] .. sid, ARGV[3] .. key .. rec)
    redis.call('HINCRBY', KEYS[3], sid, 1)
    redis.call('HSETNX', KEYS[4], sid, scope)
  else
    -- re-added meanwhile by another process, now its owner: this one
    -- forgets it
    tell(ARGV[3], key)
  end
end
for k = 10, 9 + ns do redis.call('SADD', KEYS[2], ARGV[k]) end
for k = 11 + ns, 10 + ns + ne do redis.call('SADD', KEYS[9], ARGV[k]) end
for k = leases, items - 5, 5 do
  local lease, sid, scope, key, rec = ARGV[k], ARGV[k+1], ARGV[k+2], ARGV[k+3], ARGV[k+4]
  redis.call('SADD', KEYS[2], key)
  redis.call('SADD', KEYS[9], key)
  redis.call('HSETNX', KEYS[4], sid, scope)
  redis.call('HSET', KEYS[5], lease, sid .. ARGV[3] .. key .. rec)
  redis.call('ZADD', KEYS[6], now + ttl, lease)
end
return epoch
`)

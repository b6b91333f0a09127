package redisstore

import "github.com/redis/go-redis/v9"

// The scripts run on the server's clock (TIME, in microseconds: exact in
// Lua's doubles until the year 2255) and touch only one scope's keys, all
// hash-tagged alike, so they work on Redis Cluster as on one node. Nothing
// from a request is ever part of a script's text: only KEYS and ARGV.
//
// KEYS, for every script: 1 the schedule (hash: tat, pause, reason), 2 the
// law (hash: state, version), 3 the leases (sorted set: lease -> expiry),
// 4 the processes seen (sorted set: process -> expiry).
//
// What is stored is untrusted too (another program may write there): a key
// of the wrong type is dropped, a field that is not a number reads as
// absent. Both forget at most a schedule, a pause or a state, which the
// fleet rebuilds (a pause forgotten is one more throttle, answered again).
// A Redis out of memory (maxmemory, noeviction) refuses an acquisition,
// whose first write is one that may grow memory (ZADD): the fleet falls
// back to its shares. It still takes releases and renewals, which start by
// freeing (ZREM, ZREMRANGEBYSCORE) and then may write a few bytes: a lease
// is never stranded because Redis is full.
//
// Large numbers never go through Lua's tostring (14 digits): redis.call
// passes them exactly, and the pause message is built from ARGV.

// prelude reads the clock and repairs the keys.
const prelude = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local want = {'hash', 'hash', 'zset', 'zset'}
for i = 1, 4 do
  local ty = redis.call('TYPE', KEYS[i])['ok']
  if ty ~= 'none' and ty ~= want[i] then redis.call('DEL', KEYS[i]) end
end
local function num(v)
  local n = tonumber(v or '')
  if not n or n ~= n or n < 0 or n > 9007199254740992 then return 0 end
  return n
end
local function law()
  local l = redis.call('HMGET', KEYS[2], 'state', 'version')
  if not l[1] or not tonumber(l[2] or '') then return false, '0' end
  return l[1], l[2]
end
`

// acquireScript: ARGV 1 process, 2 interval (µs), 3 limit, 4 version the
// caller holds, 5 its state to seed with ("" for none), 6 lease TTL (µs),
// 7 lease name, 8 key TTL (ms). Returns {lease or "", wait µs, paused µs,
// reason, state or false, version, live, in use 0/1}.
var acquireScript = redis.NewScript(prelude + `
local interval = tonumber(ARGV[2])
local limit = tonumber(ARGV[3])
local version = ARGV[4]
local ttl = tonumber(ARGV[6])
local keyttl = tonumber(ARGV[8])

redis.call('ZADD', KEYS[4], now + 3 * ttl, ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[4], '-inf', now)
local live = redis.call('ZCARD', KEYS[4])

local state, ver = law()
if not state and ARGV[5] ~= '' then
  state, ver, version = ARGV[5], '1', '1'
  redis.call('HSET', KEYS[2], 'state', state, 'version', 1)
end
local out = false
if ver ~= version and state then out = state end

local sc = redis.call('HMGET', KEYS[1], 'tat', 'pause', 'reason')
local tat, pause, reason = num(sc[1]), num(sc[2]), num(sc[3])
local paused = 0
if pause > now then paused = pause - now else reason = 0 end

redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', now)
local lease, wait, inuse = '', math.max(paused, 10000), 0
local held = redis.call('ZCARD', KEYS[3])
if limit <= 0 or held < limit then
  redis.call('ZADD', KEYS[3], now + ttl, ARGV[7])
  local slot = math.max(tat, now, pause)
  redis.call('HSET', KEYS[1], 'tat', slot + interval)
  lease, wait = ARGV[7], slot - now
  if limit > 0 and held + 1 >= limit then inuse = 1 end
end
for i = 1, 4 do redis.call('PEXPIRE', KEYS[i], keyttl) end
return {lease, wait, paused, reason, out, ver, live, inuse}
`)

// releaseScript: ARGV 1 process, 2 lease ("" for none), 3 pause (µs, 0
// for none), 4 reason, 5 state to commit ("" for none), 6 version it
// derives from, 7 key TTL (ms), 8 the pause channel, 9 the scope, 10
// accepted 0/1. Returns {committed 0/1, state or false, version, paused
// µs, reason, accepted answers over the last second}. The accepted count
// is kept per eighth of a second in the schedule's hash (fields a0..a7,
// each with its tick in t0..t7).
var releaseScript = redis.NewScript(prelude + `
local keyttl = tonumber(ARGV[7])
if ARGV[2] ~= '' then redis.call('ZREM', KEYS[3], ARGV[2]) end

local sc = redis.call('HMGET', KEYS[1], 'pause', 'reason')
local pause, reason = num(sc[1]), num(sc[2])
local d = tonumber(ARGV[3])
if d > 0 and now + d > pause then
  pause, reason = now + d, tonumber(ARGV[4])
  redis.call('HSET', KEYS[1], 'pause', pause, 'reason', reason)
  redis.call('PUBLISH', ARGV[8], ARGV[9] .. '\n' .. ARGV[3] .. '\n' .. ARGV[4])
end
local paused = 0
if pause > now then paused = pause - now else reason = 0 end

local committed = 0
local state, ver = law()
if ARGV[5] ~= '' and ver == ARGV[6] then
  ver = tostring(tonumber(ARGV[6]) + 1)
  redis.call('HSET', KEYS[2], 'state', ARGV[5], 'version', ver)
  committed, state = 1, false
end
local tick = math.floor(now / 125000)
local slot = tick % 8
local f = {}
for i = 0, 7 do f[#f + 1] = 'a' .. i; f[#f + 1] = 't' .. i end
local ring = redis.call('HMGET', KEYS[1], unpack(f))
local acc = 0
for i = 0, 7 do
  local n, at = num(ring[2 * i + 1]), num(ring[2 * i + 2])
  if i == slot and at ~= tick then n = 0 end
  if i == slot and ARGV[10] == '1' then
    n = n + 1
    redis.call('HSET', KEYS[1], 'a' .. i, n, 't' .. i, tick)
  end
  if (i == slot) or (at > tick - 8 and at <= tick) then acc = acc + n end
end
for i = 1, 4 do redis.call('PEXPIRE', KEYS[i], keyttl) end
return {committed, state, ver, paused, reason, acc}
`)

// renewScript: ARGV 1 process, 2 lease TTL (µs), 3 key TTL (ms), 4... the
// leases. A lease that expired meanwhile is not brought back.
var renewScript = redis.NewScript(prelude + `
local ttl = tonumber(ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', now)
for i = 4, #ARGV do redis.call('ZADD', KEYS[3], 'XX', now + ttl, ARGV[i]) end
redis.call('ZADD', KEYS[4], now + 3 * ttl, ARGV[1])
for i = 3, 4 do redis.call('PEXPIRE', KEYS[i], tonumber(ARGV[3])) end
return 1
`)

package redisstore

import "github.com/redis/go-redis/v9"

// The scripts run on the server's clock (TIME, in microseconds: exact in
// Lua's doubles until the year 2255) and touch only one scope's keys, all
// hash-tagged alike, so they work on Redis Cluster as on one node. Nothing
// from a request is ever part of a script's text: only KEYS and ARGV.
//
// KEYS, for every script: 1 the schedule (hash: tat, pause, reason, the
// fleet's limits fl, the accepted ring acc, the queue q), 2 the law (hash:
// state, version), 3 the leases (sorted set: lease -> expiry; a lease is
// named "holder/name", the holder the process that took it: Store maps a
// caller's lease name to one, see member), 4 the processes seen (sorted
// set: process -> when it last asked, in ms, times 1000, plus its want,
// the sends it had waiting then, at most 999).
//
// What is stored is untrusted too (another program may write there): a key
// of the wrong type is dropped, a field that is not a number reads as
// absent, and so does a time more than a second in the server's future (a
// clock that went back, as after a failover to a node whose clock is
// behind): a process seen then is forgotten, a limit or ceiling asked then
// lapses. Each forgets at most a schedule, a pause, a state or a process
// seen, which the fleet rebuilds (a pause forgotten is one more throttle,
// answered again).
// A Redis out of memory (maxmemory, noeviction) refuses an acquisition,
// whose first write is one that may grow memory (ZADD): the fleet falls
// back to its shares. It still takes releases and renewals, which start by
// freeing (ZREM, ZREMRANGEBYSCORE) and then may write a few bytes: a lease
// is never stranded because Redis is full.
//
// Large numbers never go through Lua's tostring or '..' (14 digits):
// redis.call passes them exactly, what is written as text is formatted
// with string.format ('%.0f' for integers, '%.17g' for rates, which both
// round-trip), and the pause message is built from ARGV. A law version is
// a decimal integer below 2^53, compared as a string.

// prelude reads the clock. A key of the wrong type makes the script fail
// (WRONGTYPE) at the first command on it; Store then runs repairScript and
// the script once more (Store.run): checking every key's type in every
// script cost four commands of the twenty or so of a send's two.
// Whatever a script wrote before it failed is written again, or no longer
// needed, when it runs again, and has its life from repairScript: the
// process seen, a seed (read back as the fleet's state), a lease given
// back (the second run finds none, and announces no turn, which only a
// processes key of the wrong type can cause: the release reads the other
// keys before it writes).
const prelude = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local function num(v)
  local n = tonumber(v or '')
  if not n or n ~= n or n < 0 or n > 9007199254740992 then return 0 end
  return n
end
local function int(n) return string.format('%.0f', n) end
local nowms = math.floor(now / 1000)
local skew = 1000 -- ms: how far ahead of TIME a stored time may be
-- stamp reads a time stored in ms: 0 (absent) beyond the skew ahead
local function stamp(v)
  local n = num(v)
  if n > nowms + skew then return 0 end
  return n
end
-- sweep forgets the leases expired, the processes seen in the future
-- and, with ttl (the lease TTL, µs) above 0, those not seen for three
-- lease lives
local function sweep(ttl)
  redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', now)
  redis.call('ZREMRANGEBYSCORE', KEYS[4], (nowms + skew + 1) * 1000, '+inf')
  if ttl > 0 then
    redis.call('ZREMRANGEBYSCORE', KEYS[4], '-inf', (nowms - 3 * ttl / 1000) * 1000)
  end
end
-- touch gives a scope's keys their life (keyttl, ms) again at the end of
-- a call: all four when the schedule's is down to 7/8 of keyttl, or it
-- has none (the schedule was made by this call), and otherwise only those
-- the call may have made anew (made, a set of key numbers), as a key
-- emptied, deleted and written again is. Every key so lives at least 7/8
-- of keyttl after its last use, and at most keyttl; expiring each of
-- four keys in every call cost four commands of a send's twenty.
local function touch(keyttl, made)
  if redis.call('PTTL', KEYS[1]) < keyttl * 7 / 8 then
    for i = 1, 4 do redis.call('PEXPIRE', KEYS[i], keyttl) end
  else
    for i in pairs(made) do redis.call('PEXPIRE', KEYS[i], keyttl) end
  end
end
local function law()
  local l = redis.call('HMGET', KEYS[2], 'state', 'version')
  local v = l[2] or ''
  if not l[1] or not string.match(v, '^[1-9]%d*$') or num(v) == 0 or num(v) >= 9007199254740992 then
    return false, '0'
  end
  return l[1], v
end
`

// fair is the fleet's max-min share of its concurrency limit (shared by
// the acquire and the release scripts): each process that asked within
// fresh ms, or holds a lease, has a demand, its leases held plus its want
// (if fresh); no one is owed more than its demand, and what the smaller
// demands leave is shared equally among the larger ones. It returns the
// parts owed, the leases held, the wants and when they were asked (ms), by
// process, and the leases held in all. A lease's holder is its name up to
// the last '/'. It first sweeps (ttl as sweep's).
const fair = `
local function cap(part) return math.ceil(part - 1e-9) end
local function fair(limit, fresh, ttl)
  sweep(ttl)
  local held, total = {}, 0
  for _, l in ipairs(redis.call('ZRANGE', KEYS[3], 0, -1)) do
    local p = string.match(l, '^(.*)/[^/]*$') or l
    held[p] = (held[p] or 0) + 1
    total = total + 1
  end
  local want, seen, demand = {}, {}, {}
  local ps = redis.call('ZRANGE', KEYS[4], 0, -1, 'WITHSCORES')
  for i = 1, #ps, 2 do
    local sc = tonumber(ps[i + 1]) or 0
    local w = sc % 1000
    if math.floor(sc / 1000) > nowms - fresh then
      want[ps[i]], seen[ps[i]] = w, math.floor(sc / 1000)
    end
  end
  for p, n in pairs(held) do demand[#demand + 1] = {p, n + (want[p] or 0)} end
  for p, w in pairs(want) do
    if not held[p] and w > 0 then demand[#demand + 1] = {p, w} end
  end
  table.sort(demand, function(a, b) return a[2] < b[2] end)
  local owed, left = {}, limit
  for k, d in ipairs(demand) do
    local part = math.min(d[2], left / (#demand - k + 1))
    owed[d[1]] = part
    left = left - part
  end
  return owed, held, want, total, seen
end
-- queue reads the processes refused a lease while they wanted one, in the
-- order they were first refused (v, the schedule's field q, one per
-- line), keeps those that still want one (want, from fair) and no more
-- than 256.
local function queue(v, want)
  local q = {}
  for n in string.gmatch(v or '', '[^\n]+') do
    if (want[n] or 0) > 0 and #q < 256 then q[#q + 1] = n end
  end
  return q
end
-- setqueue writes the queue q where it was v (as read), if it changed.
local function setqueue(q, v)
  local n = table.concat(q, '\n')
  if n == (v or '') then return end
  if #q > 0 then redis.call('HSET', KEYS[1], 'q', n)
  else redis.call('HDEL', KEYS[1], 'q') end
end
`

// repairScript drops each of a scope's keys that has the wrong type: the
// schedule and the law hashes, the leases and the processes sorted sets;
// and gives the others their life (ARGV 1, ms), since the failed run may
// have made one and its second run may not know it did.
var repairScript = redis.NewScript(`
local want = {'hash', 'hash', 'zset', 'zset'}
for i = 1, 4 do
  local ty = redis.call('TYPE', KEYS[i])['ok']
  if ty ~= 'none' and ty ~= want[i] then redis.call('DEL', KEYS[i])
  else redis.call('PEXPIRE', KEYS[i], ARGV[1]) end
end
return 1
`)

// acquireScript: ARGV 1 process, 2 rate (req/s, 0 or a finite number
// above), 3 limit, 4 version the caller holds, 5 the state to seed an
// empty store with ("" for none), 6 lease TTL (µs, at least a second), 7
// lease name (its member: "holder/name"), 8 key TTL (ms), 9 want, 10 how
// long a want counts (ms), 11 the caller's configured ceiling (req/s, 0:
// none, or a finite number above), 12 the longest the caller waits for
// its slot (µs, 0: no bound; a slot further away is neither granted nor
// taken).
// Returns {lease or "", wait µs, paused µs, reason, state or false,
// version, live, in use 0/1, the fleet's ceiling as a string ("0": none),
// the leases held with this one (0: none granted)}.
// The fleet's limits are one field, fl: "lim limt ceil ceilt nonet", the
// highest concurrency limit asked within the want's life and when (ms),
// the highest configured ceiling of the live processes and when, and when
// a process last asked with no ceiling; each time in the server's future
// reads as absent, with what it stamps. A first state stored (a seed, or a
// commit on version 0) starts an epoch: its version is the server's clock
// in µs.
var acquireScript = redis.NewScript(prelude + fair + `
local rate = tonumber(ARGV[2]) or 0
local limit = tonumber(ARGV[3])
local version = ARGV[4]
local ttl = tonumber(ARGV[6])
local keyttl = tonumber(ARGV[8])
local want = math.max(math.min(tonumber(ARGV[9]) or 1, 999), 1)
local fresh = tonumber(ARGV[10])

local made = {}
if redis.call('ZADD', KEYS[4], nowms * 1000 + want, ARGV[1]) == 1 then made[4] = true end
local state, ver = law()
if not state and ARGV[5] ~= '' then
  -- an empty store takes the caller's view at a new epoch: a caller that
  -- held none has its own; one that held another gets it back
  state, ver = ARGV[5], int(now)
  redis.call('HSET', KEYS[2], 'state', state, 'version', ver)
  made[2] = true
  if version == '0' then version = ver end
end
local out = false
if ver ~= version and state then out = state end

local sc = redis.call('HMGET', KEYS[1], 'tat', 'pause', 'reason', 'fl', 'q')
local tat, pause, reason = num(sc[1]), num(sc[2]), num(sc[3])
local paused = 0
if pause > now then paused = pause - now else reason = 0 end
if reason < 0 or reason > 255 or reason ~= math.floor(reason) then reason = 0 end -- stored: untrusted
local fl, i = {0, 0, 0, 0, 0}, 1
for v in string.gmatch(sc[4] or '', '%S+') do
  if i <= 5 then fl[i] = num(v) end
  i = i + 1
end
local lim, limt, ceil, ceilt, nonet = fl[1], stamp(fl[2]), fl[3], stamp(fl[4]), stamp(fl[5])
if limt == 0 then lim = 0 end
if ceilt == 0 then ceil = 0 end
-- the fleet's ceiling: the highest asked lately, none if a process asked
-- with none
local mine = tonumber(ARGV[11]) or 0
local alive = 3 * ttl / 1000 -- ms: a process is live for three lease lives
if mine <= 0 then nonet = nowms
elseif mine >= ceil or ceilt <= nowms - alive then ceil, ceilt = mine, nowms end
local fleetceil = ceil
if nonet > nowms - alive then fleetceil = 0 end
if fleetceil > 0 and (rate <= 0 or fleetceil < rate) then rate = fleetceil end
local interval = 2147483647000 -- a rate of zero: a slot an age away
if rate > 0 then interval = math.max(math.floor(1000000 / rate), 1) end

local lease, wait, inuse = '', math.max(paused, 10000), 0
local grant = true
local slot = math.max(tat, now, pause)
local maxwait = tonumber(ARGV[12]) or 0
if maxwait > 0 and slot - now > maxwait then
  -- a slot further away than the caller waits: neither granted nor
  -- taken (each refused ask would push the schedule a slot further)
  grant, wait = false, slot - now
  sweep(ttl) -- (the live count below is read after a sweep, as the memory store's)
elseif limit > 0 then
  -- the fleet keeps to the highest limit asked lately
  if limit >= lim or limt <= nowms - fresh then lim, limt = limit, nowms end
  limit = lim
  local owed, held, wants, total, seen = fair(limit, fresh, ttl)
  -- a lease for this process if one is free, it holds less than its part
  -- (rounded up, so that fractional parts take turns), and no process
  -- queued before it, under its part, is left without one; refused, it
  -- joins the end of the queue, granted, it leaves it
  local q, ahead, queued, keep = queue(sc[5], wants), 0, false, {}
  for _, n in ipairs(q) do
    if n == ARGV[1] then queued = true
    else
      keep[#keep + 1] = n
      if not queued and (held[n] or 0) < cap(owed[n] or 0) then ahead = ahead + 1 end
    end
  end
  grant = limit - total > ahead and (held[ARGV[1]] or 0) < cap(owed[ARGV[1]] or 0)
  if not grant then
    if queued then keep = q
    else
      if #keep >= 256 then
        -- full: the process that asked least lately (the first of those)
        -- leaves its place, so that one refused now is not left out of
        -- the queue for as long as others keep it full
        local stalest = 1
        for k, n in ipairs(keep) do
          if (seen[n] or 0) < (seen[keep[stalest]] or 0) then stalest = k end
        end
        table.remove(keep, stalest)
      end
      keep[#keep + 1] = ARGV[1]
    end
  end
  setqueue(keep, sc[5])
else
  sweep(ttl)
end
local live = redis.call('ZCARD', KEYS[4])
local held = 0
if grant then
  redis.call('ZADD', KEYS[3], now + ttl, ARGV[7])
  held = redis.call('ZCARD', KEYS[3])
  if held == 1 then made[3] = true end
  redis.call('ZADD', KEYS[4], nowms * 1000 + want - 1, ARGV[1])
  redis.call('HSET', KEYS[1], 'tat', slot + interval)
  lease, wait = ARGV[7], slot - now
  if limit > 0 and held >= limit then inuse = 1 end
end
local nfl = string.format('%.0f %.0f %.17g %.0f %.0f', lim, limt, ceil, ceilt, nonet)
if nfl ~= sc[4] then redis.call('HSET', KEYS[1], 'fl', nfl) end
touch(keyttl, made)
return {lease, wait, paused, reason, out, ver, live, inuse, string.format('%.17g', fleetceil), held}
`)

// releaseScript: ARGV 1 process, 2 lease ("" for none), 3 pause (µs, 0
// for none), 4 reason, 5 state to commit ("" for none), 6 version it
// derives from, 7 key TTL (ms), 8 the notice channel, 9 the scope, 10
// accepted 0/1, 11 how long a want counts (ms).
// Returns {committed 0/1, state or false, version, paused µs, reason,
// accepted answers over the last second}. The accepted count is kept per
// eighth of a second in the schedule's hash, in one field, acc: the tick
// of its first count, the newest tick and the counts of the eight up to
// it; -1 while less than a second is counted. A lease given back while
// another process waits in the queue under its part is announced as the
// first such process's turn on the channel: "t", the process, the scope,
// one per line; a pause as "p", its length in µs, its reason, the scope.
var releaseScript = redis.NewScript(prelude + fair + `
local keyttl = tonumber(ARGV[7])
local sc = redis.call('HMGET', KEYS[1], 'fl', 'q', 'pause', 'reason', 'acc')
local state, ver = law()
local made = {}
-- a lease given back while a process is queued (q) may be its turn: the
-- fair pass tells, and is not made without a queue
if ARGV[2] ~= '' and redis.call('ZREM', KEYS[3], ARGV[2]) == 1 and sc[2] then
  local fl = sc[1] or ''
  local lim = num(string.match(fl, '^%S+'))
  if stamp(string.match(fl, '^%S+%s+(%S+)')) == 0 then lim = 0 end
  if lim > 0 then
    local owed, held, want, total = fair(lim, tonumber(ARGV[11]), 0)
    local q = queue(sc[2], want)
    setqueue(q, sc[2])
    if total < lim then
      for _, n in ipairs(q) do
        if n ~= ARGV[1] and (held[n] or 0) < cap(owed[n] or 0) then
          redis.call('PUBLISH', ARGV[8], 't\n' .. n .. '\n' .. ARGV[9])
          break
        end
      end
    end
  end
end

local pause, reason = num(sc[3]), num(sc[4])
local d = tonumber(ARGV[3])
if d > 0 and now + d > pause then
  pause, reason = now + d, tonumber(ARGV[4])
  redis.call('HSET', KEYS[1], 'pause', pause, 'reason', reason)
  redis.call('PUBLISH', ARGV[8], 'p\n' .. ARGV[3] .. '\n' .. ARGV[4] .. '\n' .. ARGV[9])
end
local paused = 0
if pause > now then paused = pause - now else reason = 0 end
if reason < 0 or reason > 255 or reason ~= math.floor(reason) then reason = 0 end -- stored: untrusted

local committed = 0
if ARGV[5] ~= '' and ver == ARGV[6] then
  -- the next version; a first state starts an epoch
  if ver == '0' then ver = int(now) else ver = int(tonumber(ver) + 1) end
  redis.call('HSET', KEYS[2], 'state', ARGV[5], 'version', ver)
  committed, state, made[2] = 1, false, true
end
-- the ring: "first newest n0 ... n7", the tick of its first count, the
-- newest tick and the counts of the eight ticks up to it, each in the slot
-- of its tick mod 8
local tick = math.floor(now / 125000)
local first, newest, ring, i = tick, 0, {0, 0, 0, 0, 0, 0, 0, 0}, -1
for v in string.gmatch(sc[5] or '', '%d+') do
  if i == -1 then first = num(v) elseif i == 0 then newest = num(v) elseif i <= 8 then ring[i] = math.min(num(v), 1000000) end
  i = i + 1
end
if newest > tick or first > tick then first, newest, ring = tick, tick, {0, 0, 0, 0, 0, 0, 0, 0} end
if tick > newest then
  for k = newest + 1, math.min(tick, newest + 8) do ring[k % 8 + 1] = 0 end
  newest = tick
end
-- the ring is written only for an accepted answer: the second counted
-- starts at the first one (first is this tick while acc is absent)
if ARGV[10] == '1' then
  ring[tick % 8 + 1] = ring[tick % 8 + 1] + 1
  redis.call('HSET', KEYS[1], 'acc', first .. ' ' .. newest .. ' ' .. table.concat(ring, ' '))
end
local acc = 0
for k = 1, 8 do acc = acc + ring[k] end
if tick - first < 8 then acc = -1 end -- less than a second counted
touch(keyttl, made)
return {committed, state, ver, paused, reason, acc}
`)

// renewScript: ARGV 1 process, 2 lease TTL (µs), 3 key TTL (ms), 4 how
// long a want counts (ms), 5... the leases (members). A lease that
// expired meanwhile is not brought back. The process stays live: one not
// seen, or whose want is stale, is seen now wanting nothing more (an old
// want does not come back); a fresh want is left as it was asked.
var renewScript = redis.NewScript(prelude + `
local ttl = tonumber(ARGV[2])
sweep(0)
for i = 5, #ARGV do redis.call('ZADD', KEYS[3], 'XX', now + ttl, ARGV[i]) end
local sc = tonumber(redis.call('ZSCORE', KEYS[4], ARGV[1]) or '')
if not sc or math.floor(sc / 1000) <= nowms - tonumber(ARGV[4]) then
  redis.call('ZADD', KEYS[4], nowms * 1000, ARGV[1])
end
for i = 3, 4 do redis.call('PEXPIRE', KEYS[i], tonumber(ARGV[3])) end
return 1
`)

-- ARGV: now, n, and in the variant for a sorted queue (lines ending "fair
-- only") MaxWait (ms, 0 for none). The whole queue at one instant, for an inspector: {now,
-- depth, the first n queued keys, leased count, the n longest leased keys
-- with when they were handed out and whether they are marked, delayed
-- count, the n first delayed keys with their ready times, adds, the
-- failure counts of every key listed, in the order listed, parked count,
-- the n keys parked longest with when they were parked, and the events
-- of each, encoded as in their state, the blocked count (see
-- GroupLimits)}.
local now, n, maxwait = clock(ARGV[1]), tonumber(ARGV[2]), 0
maxwait = tonumber(ARGV[3]) -- fair only
-- The queued keys in hand-out order: with MaxWait those queued longer
-- (aged), the longest first; then PRIO above 0, READY, PRIO at 0 (on a
-- sorted queue) and below.
local queued, aged, agedCount = {}, {}, 0
if maxwait > 0 and n > 0 then
  for _, key in ipairs(redis.call('ZRANGE', AGES, '-inf', now - maxwait, 'BYSCORE', 'LIMIT', 0, n)) do
    queued[#queued + 1], aged[key] = key, true
  end
  agedCount = #queued
end
local function ranked(min, max)
  if #queued >= n then return end
  -- As many more as there are aged keys, which are listed already.
  for _, member in ipairs(redis.call('ZRANGE', PRIO, min, max, 'BYSCORE', 'LIMIT', 0, n - #queued + agedCount)) do
    local key = string.sub(member, 17)
    if #queued < n and not aged[key] then queued[#queued + 1] = key end
  end
end
ranked('-inf', '(0')
if #queued < n then
  for _, key in ipairs(redis.call('LRANGE', READY, 0, n - #queued - 1)) do queued[#queued + 1] = key end
end
ranked('0', '+inf')
local leased = redis.call('ZRANGE', SINCE, 0, n - 1, 'WITHSCORES')
local marked = {}
for i = 1, #leased, 2 do
  marked[#marked + 1] = string.byte(redis.call('HGET', STATE, leased[i]) or '') == MARKED and 1 or 0
end
-- A parked key's deadline waits in DELAYED too: the delayed keys listed
-- and counted are the others, looked for in a bounded number of reads.
local delayed = {}
for from = 0, 15 * n, n do
  if n == 0 or #delayed >= 2 * n then break end
  local chunk = redis.call('ZRANGE', DELAYED, from, from + n - 1, 'WITHSCORES')
  if #chunk == 0 then break end
  local keys = {}
  for i = 1, #chunk, 2 do keys[#keys + 1] = chunk[i] end
  local states = redis.call('HMGET', STATE, unpack(keys))
  for i, key in ipairs(keys) do
    if #delayed < 2 * n and string.byte(states[i] or '') ~= WAITING then
      delayed[#delayed + 1], delayed[#delayed + 2] = key, chunk[2 * i]
    end
  end
end
local parked = {}
if n > 0 then parked = redis.call('ZRANGE', PARKED, 0, n - 1, 'WITHSCORES') end
local events = {}
for i = 1, #parked, 2 do
  local state = redis.call('HGET', STATE, parked[i]) or ''
  events[#events + 1] = string.sub(state, (string.find(state, '|', 18, true) or #state) + 1)
end
local listed = {}
for _, key in ipairs(queued) do listed[#listed + 1] = key end
for i = 1, #leased, 2 do listed[#listed + 1] = leased[i] end
for i = 1, #delayed, 2 do listed[#listed + 1] = delayed[i] end
for i = 1, #parked, 2 do listed[#listed + 1] = parked[i] end
local failures = {}
if #listed > 0 then failures = redis.call('HMGET', FAILS, unpack(listed)) end
local parks = parked_count()
return {now, depth(), queued, redis.call('ZCARD', LEASES), leased, marked,
  redis.call('ZCARD', DELAYED) - parks, delayed, tonumber(redis.call('GET', ADDS) or 0), failures,
  parks, parked, events, redis.call('ZCARD', BLOCKED)}

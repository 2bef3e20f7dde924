-- ARGV: now, n. The whole queue at one instant, for an inspector: {now,
-- depth, the first n queued keys, leased count, the n longest leased keys
-- with when they were handed out and whether they are marked, delayed
-- count, the n first delayed keys with their ready times, adds, and the
-- failure counts of every key listed, in the order listed}.
local now, n = clock(ARGV[1]), tonumber(ARGV[2])
-- The queued keys in hand-out order: PRIO above 0, READY, PRIO below.
local queued = {}
local function ranked(min, max)
  if #queued >= n then return end
  for _, member in ipairs(redis.call('ZRANGE', PRIO, min, max, 'BYSCORE', 'LIMIT', 0, n - #queued)) do
    queued[#queued + 1] = string.sub(member, 17)
  end
end
ranked('-inf', '(0')
if #queued < n then
  for _, key in ipairs(redis.call('LRANGE', READY, 0, n - #queued - 1)) do queued[#queued + 1] = key end
end
ranked('(0', '+inf')
local leased = redis.call('ZRANGE', SINCE, 0, n - 1, 'WITHSCORES')
local marked = {}
for i = 1, #leased, 2 do
  marked[#marked + 1] = string.byte(redis.call('HGET', STATE, leased[i]) or '') == MARKED and 1 or 0
end
local delayed = redis.call('ZRANGE', DELAYED, 0, n - 1, 'WITHSCORES')
local listed = {}
for _, key in ipairs(queued) do listed[#listed + 1] = key end
for i = 1, #leased, 2 do listed[#listed + 1] = leased[i] end
for i = 1, #delayed, 2 do listed[#listed + 1] = delayed[i] end
local failures = {}
if #listed > 0 then failures = redis.call('HMGET', FAILS, unpack(listed)) end
return {now, depth(), queued, redis.call('ZCARD', LEASES), leased, marked,
  redis.call('ZCARD', DELAYED), delayed, tonumber(redis.call('GET', ADDS) or 0), failures}

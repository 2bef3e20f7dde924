-- ARGV: now, n. The whole queue at one instant, for an inspector: {now,
-- depth, the first n queued keys, leased count, the n longest leased keys
-- with when they were handed out and whether they are marked, delayed
-- count, the n first delayed keys with their ready times, adds, and the
-- failure counts of every key listed, in the order listed}.
local now, n = clock(ARGV[1]), tonumber(ARGV[2])
local queued = redis.call('ZRANGE', READY, 0, n - 1)
for i, member in ipairs(queued) do queued[i] = string.sub(member, 17) end
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
return {now, redis.call('ZCARD', READY), queued, redis.call('ZCARD', LEASES), leased, marked,
  redis.call('ZCARD', DELAYED), delayed, tonumber(redis.call('GET', ADDS) or 0), failures}

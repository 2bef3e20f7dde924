-- KEYS: the keys of partition 0 that it binds, then the key of the
-- partition count.
-- ARGV: the caller's number of partitions. Records it for a new queue and
-- returns the queue's: a queue used before any handle recorded a number
-- (one made before partitions existed) has one.
local META = KEYS[#KEYS]
local n = redis.call('GET', META)
if n then return tonumber(n) end
if tonumber(ARGV[1]) ~= 1 and redis.call('EXISTS', READY, STATE, DELAYED, LEASES, FAILS, ADDS, PRIO) > 0 then
  return 1
end
redis.call('SET', META, ARGV[1])
return tonumber(ARGV[1])

-- ARGV: now, lease (ms), nonce. Hands out the first ready key under a new
-- lease with a fencing token: the next number of FENCE and the caller's
-- random nonce. The nonce keeps a token unique even if Redis restarts from
-- a file that lost the last INCRs (AOF everysec, or a replica promoted):
-- a holder from before the restart cannot end a lease granted after it.
-- Returns {1, key, token, queued for (ms), depth, reclaimed} or, when
-- nothing is ready, {0, wait, reclaimed}: wait is the time until the next
-- delayed key is due, at least 1 (more may be due than one promote moves),
-- or -1 if none waits. Lease expiry is no reason to wake: the heartbeat
-- finds expired leases, where every idle Get waking at each expiry time
-- would run this script about every two thirds of a lease.
local now, lease, nonce = clock(ARGV[1]), tonumber(ARGV[2]), ARGV[3]
-- This script ran already with this nonce and its reply was lost: the
-- same grant again, instead of a second lease nobody would hold.
local granted = redis.call('HGET', GRANTS, nonce)
if granted then
  local token = redis.call('HGET', TOKENS, granted)
  return {1, granted, token, 0, redis.call('LLEN', READY), 0}
end
local reclaimed = promote(now)
local key = redis.call('LPOP', READY)
if not key then
  local wait = -1
  local delayed = redis.call('ZRANGE', DELAYED, 0, 0, 'WITHSCORES')
  if delayed[2] then wait = math.max(math.ceil(tonumber(delayed[2]) - now), 1) end
  return {0, wait, reclaimed}
end
local since = tonumber(redis.call('HGET', STATE, key))
redis.call('HSET', STATE, key, 'p')
local token = redis.call('INCR', FENCE) .. ':' .. nonce
redis.call('HSET', TOKENS, key, token)
redis.call('HSET', GRANTS, nonce, key)
redis.call('ZADD', LEASES, now + lease, key)
redis.call('ZADD', SINCE, now, key)
local depth = redis.call('LLEN', READY)
if depth > 0 then signal() end
return {1, key, token, now - since, depth, reclaimed}

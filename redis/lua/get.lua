-- ARGV: now, lease (ms), then one nonce per waiting Get. Hands each Get the
-- next ready key, in order, under a lease of its own with a fencing token:
-- the next number of FENCE and that Get's random nonce. The nonce keeps a
-- token unique even if Redis restarts from a file that lost the last INCRs
-- (AOF everysec, or a replica promoted): a holder from before the restart
-- cannot end a lease granted after it.
-- Returns {depth, reclaimed, wait, grant of each Get}: a grant is {key,
-- token, queued for (ms)}, or 0 when nothing was ready for that Get. wait
-- is the time until the next delayed key is due, at least 1 (more may be
-- due than one promote moves), or -1 if none waits; it is 0 when every Get
-- got a key. Lease expiry is no reason to wake: the heartbeat finds expired
-- leases, where every idle Get waking at each expiry time would run this
-- script about every two thirds of a lease.
local now, lease = clock(ARGV[1]), tonumber(ARGV[2])
local reclaimed = promote(now)
local reply = {0, reclaimed, 0}
local empty = false
for i = 3, #ARGV do
  local nonce = ARGV[i]
  -- This script ran already with this nonce and its reply was lost: the
  -- same grant again, instead of a second lease nobody would hold.
  local granted = redis.call('HGET', GRANTS, nonce)
  local key = granted
  if not key and not empty then
    key = redis.call('LPOP', READY)
    empty = not key
  end
  if granted then
    reply[#reply + 1] = {granted, redis.call('HGET', TOKENS, granted), 0}
  elseif key then
    local since = tonumber(redis.call('HGET', STATE, key))
    redis.call('HSET', STATE, key, 'p')
    local token = redis.call('INCR', FENCE) .. ':' .. nonce
    redis.call('HSET', TOKENS, key, token)
    redis.call('HSET', GRANTS, nonce, key)
    redis.call('ZADD', LEASES, now + lease, key)
    redis.call('ZADD', SINCE, now, key)
    reply[#reply + 1] = {key, token, now - since}
  else
    reply[#reply + 1] = 0
  end
end
if empty then
  local wait = -1
  local delayed = redis.call('ZRANGE', DELAYED, 0, 0, 'WITHSCORES')
  if delayed[2] then wait = math.max(math.ceil(tonumber(delayed[2]) - now), 1) end
  reply[3] = wait
end
local depth = redis.call('LLEN', READY)
if depth > 0 then signal() end
reply[1] = depth
return reply

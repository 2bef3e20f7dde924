-- Every script starts with this prelude. All of a queue's keys share one
-- hash tag, so a script touches one slot on Redis Cluster too.
--
-- STATE maps each key that is queued or processing to its state:
--   a number  queued since then (ms), its place is in READY
--   "p"       handed out, leased until its score in LEASES
--   "d"       handed out, and added again since: queue it again at Done
-- A key in no state is idle. DELAYED holds keys waiting for their ready
-- time, independent of STATE, as the in-memory delaying queue's heap is.
-- GRANTS maps the nonce of each lease's token to its key, so that a get
-- script sent again after its reply was lost returns the same grant.
-- SINCE holds when each leased key was handed out, and ADDS counts the
-- adds that queued or marked a key, for snapshots.
local READY, STATE, DELAYED, LEASES, TOKENS, FENCE, SIGNAL, FAILS, BUCKET, GRANTS, SINCE, ADDS =
  KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8], KEYS[9], KEYS[10], KEYS[11], KEYS[12]

-- now: the caller's clock in ms, or Redis's own when the caller sends -1,
-- so that processes whose clocks disagree still agree on lease expiry.
local function clock(ms)
  ms = tonumber(ms)
  if ms >= 0 then return ms end
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- end_lease forgets key's lease: its token, expiry and grant.
local function end_lease(key)
  local token = redis.call('HGET', TOKENS, key)
  if token then
    redis.call('HDEL', GRANTS, string.sub(token, string.find(token, ':', 1, true) + 1))
    redis.call('HDEL', TOKENS, key)
  end
  redis.call('ZREM', LEASES, key)
  redis.call('ZREM', SINCE, key)
end

-- signal leaves one token in SIGNAL, where idle processes block with BLPOP.
-- One token is enough: a worker that takes a key and sees more ready passes
-- the token on, so an add wakes one process instead of all of them. Once a
-- script has left it, nothing can take it before the script ends: the
-- script's later signals need no command.
local signalled = false
local function signal()
  if signalled then return end
  signalled = true
  if redis.call('LLEN', SIGNAL) == 0 then redis.call('RPUSH', SIGNAL, 1) end
end

local function enqueue(key, now, front)
  if front then
    redis.call('LPUSH', READY, key)
  else
    redis.call('RPUSH', READY, key)
  end
  redis.call('HSET', STATE, key, now)
  signal()
end

-- add returns 1 if key was queued, 2 if it is being processed and is now
-- marked to be queued again at Done, 0 if it was already queued or marked.
local function add(key, now)
  local state = redis.call('HGET', STATE, key)
  if not state then
    enqueue(key, now, false)
    redis.call('INCR', ADDS)
    return 1
  end
  if state == 'p' then
    redis.call('HSET', STATE, key, 'd')
    redis.call('INCR', ADDS)
    return 2
  end
  return 0
end

-- promote adds the delayed keys that are due and queues again, at the front,
-- the keys whose lease expired (their holder died or lost Redis for longer
-- than the lease). Whichever process runs it first does it, once, because a
-- script runs alone. A bounded batch keeps one script short; what is left
-- is promoted by the next call. Returns how many leases were reclaimed.
local BATCH = 256
local function promote(now)
  local due = redis.call('ZRANGE', DELAYED, '-inf', now, 'BYSCORE', 'LIMIT', 0, BATCH)
  for _, key in ipairs(due) do
    redis.call('ZREM', DELAYED, key)
    add(key, now)
  end
  local expired = redis.call('ZRANGE', LEASES, '-inf', now, 'BYSCORE', 'LIMIT', 0, BATCH)
  for i = #expired, 1, -1 do
    local key = expired[i]
    end_lease(key)
    enqueue(key, now, true)
  end
  return #expired
end

-- ARGV: now, key, base, max (ms), interval (ms between tokens, 0: no
-- bucket), burst. AddRateLimited in one step: count the failure, take the
-- larger of the key's exponential backoff and the shared bucket's wait
-- (GCRA: BUCKET holds the theoretical arrival time), then add or delay.
-- Returns {outcome, depth, delay} with outcome as add.lua's.
local now, key = clock(ARGV[1]), ARGV[2]
local base, max = tonumber(ARGV[3]), tonumber(ARGV[4])
local interval, burst = tonumber(ARGV[5]), tonumber(ARGV[6])

local failures = redis.call('HINCRBY', FAILS, key, 1) - 1
local delay = 0
if base > 0 then
  -- 2^1024 is inf in Lua; a cap on the exponent keeps the arithmetic finite.
  delay = math.min(base * 2 ^ math.min(failures, 1000), max)
end
if interval > 0 then
  local tat = tonumber(redis.call('GET', BUCKET)) or now
  if tat < now then tat = now end
  tat = tat + interval
  local wait = tat - interval * burst - now
  if wait > delay then delay = wait end
  redis.call('SET', BUCKET, string.format('%.3f', tat), 'PX', math.ceil(tat - now) + 1)
end
delay = math.ceil(delay)

if delay <= 0 then
  local outcome = add(key, now)
  return {outcome, redis.call('LLEN', READY), 0}
end
redis.call('ZADD', DELAYED, 'LT', now + delay, key)
if redis.call('ZRANGE', DELAYED, 0, 0)[1] == key then signal() end
return {3, redis.call('LLEN', READY), delay}

-- ARGV: now, key, delay (ms). Add when delay <= 0, else AddAfter: the
-- earlier of two ready times wins. Returns {outcome, depth}: outcome as
-- add's, or 3 for a key put to wait.
local now, key, delay = clock(ARGV[1]), ARGV[2], tonumber(ARGV[3])
if delay <= 0 then
  local outcome = add(key, now)
  return {outcome, redis.call('LLEN', READY)}
end
redis.call('ZADD', DELAYED, 'LT', now + delay, key)
-- A new first ready time: wake an idle process so that it sleeps until
-- then instead of until its heartbeat.
if redis.call('ZRANGE', DELAYED, 0, 0)[1] == key then signal() end
return {3, redis.call('LLEN', READY)}

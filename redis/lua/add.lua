-- ARGV: now, then one key, delay (ms) pair per add, run in order. Add when
-- delay <= 0, else AddAfter: the earlier of two ready times wins. Returns
-- {depth, outcome of each add}: outcome as add's, or 3 for a key put to
-- wait.
local now = clock(ARGV[1])
local reply = {0}
for i = 2, #ARGV, 2 do
  local key, delay = ARGV[i], tonumber(ARGV[i + 1])
  if delay <= 0 then
    reply[#reply + 1] = add(key, now)
  else
    redis.call('ZADD', DELAYED, 'LT', now + delay, key)
    -- A new first ready time: wake an idle process so that it sleeps
    -- until then instead of until its heartbeat.
    if redis.call('ZRANGE', DELAYED, 0, 0)[1] == key then signal() end
    reply[#reply + 1] = 3
  end
end
reply[1] = redis.call('LLEN', READY)
return reply

-- ARGV: now, then one key, token pair per Done, run in order. Ends each
-- lease that its token still holds; a key marked while it was processed is
-- queued again at the back. Returns {depth, outcome of each Done}: 1
-- queued again, 0 idle, -1 the lease was lost (it expired and was
-- reclaimed): nothing changed for that key.
local now = clock(ARGV[1])
local reply = {0}
for i = 2, #ARGV, 2 do
  local key = ARGV[i]
  if redis.call('HGET', TOKENS, key) ~= ARGV[i + 1] then
    reply[#reply + 1] = -1
  else
    end_lease(key)
    if redis.call('HGET', STATE, key) == 'd' then
      enqueue(key, now, false)
      reply[#reply + 1] = 1
    else
      redis.call('HDEL', STATE, key)
      reply[#reply + 1] = 0
    end
  end
end
reply[1] = redis.call('LLEN', READY)
return reply

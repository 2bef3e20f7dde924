-- ARGV: now, key, token. Ends the lease if token still holds it; a key
-- marked while it was processed is queued again at the back. Returns
-- {outcome, depth}: 1 queued again, 0 idle, -1 the lease was lost (it
-- expired and was reclaimed): nothing changed.
local now, key = clock(ARGV[1]), ARGV[2]
if redis.call('HGET', TOKENS, key) ~= ARGV[3] then
  return {-1, redis.call('LLEN', READY)}
end
end_lease(key)
if redis.call('HGET', STATE, key) == 'd' then
  enqueue(key, now, false)
  return {1, redis.call('LLEN', READY)}
end
redis.call('HDEL', STATE, key)
return {0, redis.call('LLEN', READY)}

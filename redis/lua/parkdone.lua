-- ARGV: now, the longest park (ms), key, token. Done of a key whose
-- holder asked to park it: as done.lua's, except that a key whose park
-- still counts (see end_pending) is parked, until its events, an add, or
-- now plus the longest park, whose add waits in DELAYED. Returns {parked
-- count, outcome}: 1 queued again, 0 idle, 3 parked, -1 the lease was
-- lost: nothing changed.
local now, longest, key, token = clock(ARGV[1]), tonumber(ARGV[2]), ARGV[3], ARGV[4]
if redis.call('HGET', TOKENS, key) ~= token then return {parked_count(), -1} end
local state = redis.call('HGET', STATE, key)
local record = redis.call('HGET', PARKS, key)
local outcome = 0
if string.byte(state) == PROCESSING and record and pending_token(record) == token then
  redis.call('HDEL', PARKS, key)
  end_lease(key)
  local prio, deadline = state_priority(state), now + longest
  local events = string.sub(record, string.find(record, '|', 18, true) + 1)
  redis.call('HSET', STATE, key, 'w' .. string.sub(record, 2, 17) .. fmt(prio) .. '/' .. fmt(deadline) .. '|' .. events)
  redis.call('ZADD', PARKED, now, key)
  delay(key, deadline, prio)
  outcome = 3
else
  end_pending(key, nil, state, false)
  end_lease(key)
  if string.byte(state) == MARKED then
    rank(key, now, state_priority(state), false)
    outcome = 1
  else
    redis.call('HDEL', STATE, key)
    forget_flows({key}) -- fair only
  end
end
return {parked_count(), outcome}

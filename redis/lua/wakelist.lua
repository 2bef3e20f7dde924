-- ARGV: event. WakeFunc's first step: records the wake of event as
-- wake.lua does, and returns the parks that wait for it and count, in
-- park order: {number, key, number, key, ...}. wakekeys.lua ends those
-- the caller accepts.
local event = ARGV[1]
redis.call('HSET', FIRED, event, redis.call('GET', FENCE) or 0)
local prefix = fmt(#event) .. ':' .. event
local parks = {}
for _, member in ipairs(redis.call('ZRANGE', WAITERS, '[' .. prefix, '(' .. prefix .. '\255', 'BYLEX')) do
  local n, key = string.sub(member, #prefix + 1, #prefix + 16), string.sub(member, #prefix + 17)
  local state = redis.call('HGET', STATE, key)
  local counts = state and string.byte(state) == WAITING
  if not counts and state and string.byte(state) == PROCESSING then
    local record = redis.call('HGET', PARKS, key)
    counts = record and redis.call('HGET', TOKENS, key) == pending_token(record)
  end
  if counts then parks[#parks + 1], parks[#parks + 2] = n, key end
end
return parks

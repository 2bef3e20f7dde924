-- ARGV: key, token, then the events. Park: the holder of key's lease of
-- token asks that its Done park the key until one of the events; the
-- park replaces one it asked for before. Returns 1 if the park is
-- recorded (PARKS), to take effect at Done; 2 if one of the events was
-- woken since the lease was granted, which may have changed what the
-- holder read, so the key is marked to be queued again at Done instead;
-- 0 if the key was added since its Get, or an earlier park of it woken,
-- and is queued again at Done anyway; -1 if the lease is not token's.
local key, token = ARGV[1], ARGV[2]
if redis.call('HGET', TOKENS, key) ~= token then return -1 end
local state = redis.call('HGET', STATE, key)
if string.byte(state) ~= PROCESSING then return 0 end
end_pending(key, nil, state, false)
if #ARGV > 2 then
  -- The lease was granted when FENCE reached the token's number, so a
  -- wake that recorded that number or more came after the grant.
  local number = tonumber(string.sub(token, 1, string.find(token, ':', 1, true) - 1))
  for _, fired in ipairs(redis.call('HMGET', FIRED, unpack(ARGV, 3))) do
    if fired and tonumber(fired) >= number then
      redis.call('HSET', STATE, key, 'd' .. string.sub(state, 2))
      return 2
    end
  end
end
local n = string.format('%016d', redis.call('HINCRBY', SEQ, 'w', 1))
local events, scored = {}, {}
for i = 3, #ARGV do
  events[#events + 1] = fmt(#ARGV[i]) .. ':' .. ARGV[i]
  scored[#scored + 1], scored[#scored + 2] = 0, events[#events] .. n .. key
end
redis.call('HSET', PARKS, key, 'w' .. n .. '0/' .. token .. '|' .. table.concat(events))
if #scored > 0 then redis.call('ZADD', WAITERS, unpack(scored)) end
return 1

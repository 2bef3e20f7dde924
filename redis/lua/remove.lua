-- ARGV: key. Remove: forgets key's failures and takes back what the queue
-- holds of it: its waiting add, its place in the queue, its park, or its
-- mark to be queued again at Done or the park its holder asked for (it
-- stays leased to its holder), and its flow if it is left idle. Returns
-- {depth, 1 if it took anything, else 0}.
local key = ARGV[1]
redis.call('HDEL', FAILS, key)
local _, took = take_delayed(key)
local state = redis.call('HGET', STATE, key)
if state then
  local kind = string.byte(state)
  if kind == WAITING then
    unpark(key, state)
    redis.call('HDEL', STATE, key)
    took = true
  elseif kind == MARKED then
    redis.call('HSET', STATE, key, 'p' .. string.sub(state, 2))
    took = true
  elseif kind ~= PROCESSING then
    unqueue(key, state)
    redis.call('HDEL', STATE, key)
    took = true
  end
end
if end_pending(key, nil, state, false) then took = true end
if redis.call('HEXISTS', STATE, key) == 0 then forget_flows({key}) end -- fair only
return {depth(), took and 1 or 0}

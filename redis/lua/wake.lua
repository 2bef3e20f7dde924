-- ARGV: now, event. Wake: records the wake of event in FIRED, at FENCE's
-- value, and ends every park that waits for it, in park order (see
-- wake_park). Returns {parked count, parks ended}.
local now, event = clock(ARGV[1]), ARGV[2]
redis.call('HSET', FIRED, event, redis.call('GET', FENCE) or 0)
local prefix = fmt(#event) .. ':' .. event
local woken = 0
for _, member in ipairs(redis.call('ZRANGE', WAITERS, '[' .. prefix, '(' .. prefix .. '\255', 'BYLEX')) do
  if wake_park(string.sub(member, #prefix + 17), string.sub(member, #prefix + 1, #prefix + 16), now) then
    woken = woken + 1
  end
end
return {parked_count(), woken}

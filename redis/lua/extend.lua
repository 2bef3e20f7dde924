-- ARGV: now, lease (ms), then key, token pairs. Extends each lease that its
-- token still holds; returns the keys whose lease was lost.
local now, lease = clock(ARGV[1]), tonumber(ARGV[2])
local lost = {}
for i = 3, #ARGV, 2 do
  if redis.call('HGET', TOKENS, ARGV[i]) == ARGV[i + 1] then
    redis.call('ZADD', LEASES, 'XX', now + lease, ARGV[i])
  else
    lost[#lost + 1] = ARGV[i]
  end
end
return lost

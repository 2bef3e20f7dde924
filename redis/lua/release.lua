-- ARGV: now, key, token. Gives a lease back unused: the key goes to the
-- front of its priority, as a reclaimed one does, a mark to queue it again
-- included. For a Get that took a key its caller will never see. Returns 1
-- if the lease was still the token's, else 0.
local now, key = clock(ARGV[1]), ARGV[2]
if redis.call('HGET', TOKENS, key) ~= ARGV[3] then return 0 end
local state = redis.call('HGET', STATE, key)
end_lease(key)
rank(key, now, state and state_priority(state) or 0, true)
return 1

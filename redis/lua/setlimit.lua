-- ARGV: group, limit (0: none). SetGroupLimit: gives group the limit, over
-- the one its keys' adds gave it, for every handle, and puts back as many
-- of its blocked keys as that frees slots. Returns {depth}.
local group, limit = ARGV[1], tonumber(ARGV[2])
redis.call('HSET', LIMITS, group, fmt(limit))
fill_slots(group, limit)
return {depth()}

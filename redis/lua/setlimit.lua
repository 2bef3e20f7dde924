-- ARGV: group, limit (0: none), and how many of the group's blocked keys
-- this SetGroupLimit's earlier calls put back. SetGroupLimit: gives group
-- the limit, over the one its keys' adds gave it, for every handle, and
-- puts back as many of its blocked keys as that frees slots, less those
-- put back already, at most UNBLOCK_MAX a call. Returns {depth, the keys
-- put back, 1 if there may be more to put back (the call put back
-- UNBLOCK_MAX) else 0}.
local group, limit, put_back = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
redis.call('HSET', LIMITS, group, fmt(limit))
local put = fill_slots(group, limit, nil, put_back)
return {depth(), put, put == UNBLOCK_MAX and 1 or 0}

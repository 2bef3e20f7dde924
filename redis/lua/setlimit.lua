-- ARGV: group, limit (0: none), and room: "" on SetGroupLimit's first
-- call, else what the previous call returned. SetGroupLimit: the first
-- call gives group the limit, over the one its keys' adds gave it, for
-- every handle; each call puts back up to UNBLOCK_MAX of the group's
-- blocked keys, as many in all as the limit had free slots at the first
-- call (room, -1 for no limit), however many are leased meanwhile, so
-- that a concurrent Get taking a key put back does not shrink the room.
-- Returns {depth, 1 if the caller is to call again else 0, the room
-- left}.
local group, limit, room = ARGV[1], tonumber(ARGV[2]), ARGV[3]
if room == '' then
  redis.call('HSET', LIMITS, group, fmt(limit))
  room = -1
  if limit > 0 then room = math.max(limit - (tonumber(redis.call('HGET', INFLIGHT, group)) or 0), 0) end
else
  room = tonumber(room)
end
local put = 0
if room ~= 0 and redis.call('ZCARD', BLOCKED) > 0 then
  put = unblock(group, room > 0 and room or nil)
end
if room > 0 then room = room - put end
return {depth(), (put == UNBLOCK_MAX and room ~= 0) and 1 or 0, room}

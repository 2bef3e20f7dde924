-- ARGV: now, then one key, token pair per Done, run in order. Lines
-- ending "fair only" are in the script of a sorted queue alone (see
-- loadScript), so that the other defines none of the functions of PRIO.
-- Ends each lease that its token still holds, freeing its group's slot; a
-- key marked while it was processed is queued again at the back of the
-- priority of its mark (by fair_seq's rule with Fairness), and one left
-- idle loses its flow. Returns {depth, outcome of each Done}: 1
-- queued again, 0 idle, -1 the lease was lost (it expired and was
-- reclaimed, or an earlier Done of this script ended it): nothing changed
-- for that key.
--
-- The reads and the writes of all the Dones are gathered into one command
-- per hash and sorted set; ended keeps a key's second Done in one script
-- from reading what its first changed.
local now, fair = clock(ARGV[1]), false
fair = true -- fair only
local keys = {}
for i = 2, #ARGV, 2 do keys[#keys + 1] = ARGV[i] end
local tokens = redis.call('HMGET', TOKENS, unpack(keys))
local states = redis.call('HMGET', STATE, unpack(keys))
local reply = {0}
local ended, forget, grants, requeue, ranked, queued, idle = {}, {}, {}, {}, {}, {}, {}
local fairly = {} -- fair only
for i, key in ipairs(keys) do
  local token = ARGV[2 * i + 1]
  if ended[key] or tokens[i] ~= token then
    reply[#reply + 1] = -1
  else
    ended[key] = true
    forget[#forget + 1] = key
    free_slot(key) -- groups only
    grants[#grants + 1] = string.sub(token, string.find(token, ':', 1, true) + 1)
    if states[i] and string.byte(states[i]) == MARKED then
      local prio = state_priority(states[i])
      if fair then
        fairly[#fairly + 1] = {key, prio} -- fair only
      elseif prio == 0 then
        requeue[#requeue + 1] = key
        queued[#queued + 1], queued[#queued + 2] = key, now
      else
        local n = seq(false)
        ranked[#ranked + 1], ranked[#ranked + 2] = -prio, n .. key
        queued[#queued + 1], queued[#queued + 2] = key, 'q' .. n .. fmt(prio) .. '/' .. fmt(now)
      end
      reply[#reply + 1] = 1
    else
      idle[#idle + 1] = key
      reply[#reply + 1] = 0
    end
  end
end
if #forget > 0 then
  redis.call('HDEL', GRANTS, unpack(grants))
  redis.call('HDEL', TOKENS, unpack(forget))
  redis.call('ZREM', LEASES, unpack(forget))
  redis.call('ZREM', SINCE, unpack(forget))
end
if #requeue > 0 then redis.call('RPUSH', READY, unpack(requeue)) end
if #ranked > 0 then redis.call('ZADD', PRIO, unpack(ranked)) end
if #queued > 0 then
  redis.call('HSET', STATE, unpack(queued))
  signal()
end
for _, again in ipairs(fairly) do rank(again[1], now, again[2], false) end -- fair only
if #idle > 0 then redis.call('HDEL', STATE, unpack(idle)) end
if #idle > 0 then forget_flows(idle) end -- fair only
reply[1] = depth()
return reply

-- ARGV: now, then one key, delay (ms) pair per add at priority 0, run in
-- order: Add when delay <= 0, else AddAfter, the earlier of two ready
-- times winning. addopts.lua takes every other add; this one reaches none
-- of PRIO's functions, so that a queue that never uses priorities pays
-- for none, nor for parks. Returns {depth, outcome of each add}: as
-- add's, or 3 for a key put to wait; 4, for a parked key, is no add:
-- the caller adds it again with addopts.lua. Adds of more than one key
-- (an AddBatch's among them) are all 4 if one key is parked, and nothing
-- is changed, so that addopts.lua makes them take effect together.
local now = clock(ARGV[1])
local reply = {0}
if #ARGV > 3 then
  local keys = {}
  for i = 2, #ARGV, 2 do keys[#keys + 1] = ARGV[i] end
  for _, state in ipairs(redis.call('HMGET', STATE, unpack(keys))) do
    if state and string.byte(state) == WAITING then
      for i = 2, #ARGV, 2 do reply[#reply + 1] = 4 end
      reply[1] = depth()
      return reply
    end
  end
end
for i = 2, #ARGV, 2 do
  local key, wait = ARGV[i], tonumber(ARGV[i + 1])
  if wait <= 0 then
    reply[#reply + 1] = add(key, now)
  else
    delay(key, now + wait, 0)
    reply[#reply + 1] = 3
  end
end
reply[1] = depth()
return reply

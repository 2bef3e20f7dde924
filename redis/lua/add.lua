-- ARGV: now, then one key, delay (ms) pair per add at priority 0, run in
-- order: Add when delay <= 0, else AddAfter, the earlier of two ready
-- times winning. addopts.lua takes every other add; this one reaches none
-- of PRIO's functions, so that a queue that never uses priorities pays
-- for none. Returns {depth, outcome of each add}: as add's, or 3 for a
-- key put to wait.
local now = clock(ARGV[1])
local reply = {0}
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

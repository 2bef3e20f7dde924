-- ARGV: now, the rate limit (base and max in ms, interval in ms between
-- tokens or 0 for no bucket, burst), then four values per add, run in
-- order: key, delay (ms), priority and rule, and in the variant for a
-- sorted queue (lines ending "fair only") a fifth, sixth and seventh, the
-- key's "STEP FLOW" for FLOWS, "LIMIT GROUP" for GROUPS and "STEP NAME"
-- for INNER, "" for none. Rule 0 is Add and AddAfter:
-- added at once when delay <= 0, else after it, the earlier of two ready
-- times winning; rule 1 is AddWithOpts's add_once. Rule plus 2 counts a
-- failure first and delays by the shorter of the delay, when positive,
-- and rate_limit's; rule 1 plus 4 makes the delay replace the one the key
-- waits for (Reschedule). Returns {depth, outcome of each add}: as add's, or 3
-- for a key put to wait.
local now = clock(ARGV[1])
local base, max, interval, burst = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local reply = {0}
local stride = 4
stride = 7 -- fair only
note_flows(6, stride) -- fair only
for i = 6, #ARGV, stride do
  local key, wait, prio, rule = ARGV[i], tonumber(ARGV[i + 1]), tonumber(ARGV[i + 2]), tonumber(ARGV[i + 3])
  local rescheduled = rule >= 4
  if rescheduled then rule = rule - 4 end
  if rule >= 2 then
    rule = rule - 2
    local limited = rate_limit(key, now, base, max, interval, burst)
    if wait <= 0 or limited < wait then wait = limited end
  end
  if rule == 1 then
    reply[#reply + 1] = add_once(key, now, prio, wait, rescheduled)
  elseif wait <= 0 then
    reply[#reply + 1] = add_at(key, now, prio)
  else
    delay(key, now + wait, prio)
    reply[#reply + 1] = 3
  end
end
reply[1] = depth()
return reply

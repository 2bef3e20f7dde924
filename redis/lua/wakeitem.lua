-- ARGV: now, key. WakeItem: ends key's park, whichever it is (see
-- wake_park). Returns {parked count, 1 if it ended one, else 0}.
local now = clock(ARGV[1])
return {parked_count(), wake_park(ARGV[2], nil, now) and 1 or 0}

-- ARGV: now, then number, key pairs. WakeFunc's second step: ends each of
-- those parks that is still the one of that number (see wake_park).
-- Returns {parked count, parks ended}.
local now = clock(ARGV[1])
local woken = 0
for i = 2, #ARGV, 2 do
  if wake_park(ARGV[i + 1], ARGV[i], now) then woken = woken + 1 end
end
return {parked_count(), woken}

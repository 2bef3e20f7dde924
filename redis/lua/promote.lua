-- ARGV: now. Adds the delayed keys that are due, parked ones too, and
-- reclaims expired leases, as get.lua does (see promote); run when get.lua
-- found a due key parked, so that get.lua is sent none of the keys of
-- parks. Returns how many leases were reclaimed.
return promote(clock(ARGV[1]), unpark)

-- ARGV: now, lease (ms), in the variant for a sorted queue (lines ending
-- "fair only") MaxWait (ms, 0 for none), then one nonce per waiting Get. Hands each Get the next ready key (with MaxWait, the keys
-- queued for longer than it first, the longest first; then the highest
-- priority first, first in first out within one; with GroupLimits, of
-- a group with a free slot), under a lease of its own with a fencing
-- token: the next number of FENCE and that Get's random nonce. The nonce
-- keeps a token unique even if Redis restarts from a file that lost the
-- last INCRs (AOF everysec, or a replica promoted): a holder from before
-- the restart cannot end a lease granted after it.
-- Returns {depth (blocked keys included), reclaimed, wait, grant of each
-- Get}: a grant is {key, token, queued for (ms), priority}, or 0 when
-- nothing was ready for that Get. wait is the time until the next delayed key is due, at least 1
-- (more may be due than one promote moves), or -1 if none waits; it is 0
-- when every Get got a key. Lease expiry is no reason to wake: the
-- heartbeat finds expired leases, where every idle Get waking at each
-- expiry time would run this script about every two thirds of a lease.
-- Returns -1 instead, having changed nothing, when a delayed key that is
-- due is parked: promote.lua adds it, and the caller runs this script
-- again (see promote).
--
-- The keys popped are distinct (a key is queued once), so the writes of
-- all the grants are gathered into one command per hash and sorted set.
local now, lease, first = clock(ARGV[1]), tonumber(ARGV[2]), 3
local maxwait = tonumber(ARGV[3]) -- fair only
first = 4 -- fair only
local reclaimed = promote(now)
if not reclaimed then return -1 end
local nonces = {}
for i = first, #ARGV do nonces[#nonces + 1] = ARGV[i] end
-- A Get whose nonce has a grant already ran this script and lost the
-- reply: it gets the same grant again, instead of a second lease nobody
-- would hold. One whose nonce was cancelled gets nothing.
local granted = redis.call('HMGET', GRANTS, unpack(nonces))
local need = 0
for i = 1, #nonces do
  if not granted[i] then need = need + 1 end
end
-- ranked counts the keys in PRIO, so that the depth needs no second ZCARD.
local ranked = redis.call('ZCARD', PRIO)
-- popped are the keys taken, in hand-out order, prios their priorities:
-- with MaxWait those waiting longer (aged), then PRIO's above 0 (high),
-- READY's, then PRIO's below 0 (low). With GroupLimits, a key whose group
-- has no free slot is passed over (see admit), and more are popped in its
-- place, up to GROUP_SCAN in all.
local popped, prios = {}, {}
if need > 0 then
  -- left are the keys handed out from PRIO, {key, priority, number}, for
  -- the turns of their flows, gone those passed over, and places the
  -- numbers in PRIO of the keys popped (none for those of READY).
  local places, scan, wanted = {}, 0, need -- fair only
  repeat -- fair only
  local from, want, left, gone = #popped + 1, need - #popped, {}, {} -- fair only
  -- need is how many this round pops: with nested fairness one at a
  -- time, as the head that moves up may come before the others.
  local need = need
  need = #popped + 1 -- nested only
  if ranked > 0 then ranked = ranked - take_aged(now, maxwait, want, popped, prios, places) end -- fair only
  local taken = #popped
  if ranked > 0 and taken < need then
    local high = redis.call('ZRANGE', PRIO, '-inf', '(0', 'BYSCORE', 'LIMIT', 0, need - taken, 'WITHSCORES')
    for i = 1, #high, 2 do popped[#popped + 1], prios[#prios + 1] = high[i], -tonumber(high[i + 1]) end
    if #popped > taken then redis.call('ZREM', PRIO, unpack(popped, taken + 1)) end
  end
  for i = taken + 1, #popped do
    places[i] = string.sub(popped[i], 1, 16) -- fair only
    popped[i] = string.sub(popped[i], 17)
  end
  ranked = ranked - (#popped - taken)
  if #popped < need then
    for _, key in ipairs(redis.call('LPOP', READY, need - #popped) or {}) do
      popped[#popped + 1], prios[#prios + 1] = key, 0
    end
  end
  if ranked > 0 and #popped < need then
    local low = redis.call('ZPOPMIN', PRIO, need - #popped)
    for i = 1, #low, 2 do
      popped[#popped + 1], prios[#prios + 1] = string.sub(low[i], 17), -tonumber(low[i + 1])
      places[#popped] = string.sub(low[i], 1, 16) -- fair only
    end
    ranked = ranked - #low / 2
  end
  if maxwait > 0 and #popped > taken then redis.call('ZREM', AGES, unpack(popped, taken + 1)) end -- fair only
  local passed = admit_all(popped, prios, places, from, left, gone) -- fair only
  fair_left(left, true) -- fair only
  -- The heads of nested fairness keys that left PRIO make way for their
  -- next keys, which this script may hand out too.
  local heads = 0 -- fair only
  heads = nest_heads(left, true) + nest_heads(gone, false) -- nested only
  ranked = ranked + heads -- fair only
  scan = scan + passed -- fair only
  local more = false -- fair only
  more = #popped >= from and #popped < wanted -- nested only
  until #popped >= wanted or (passed == 0 and heads == 0 and not more) or scan >= GROUP_SCAN -- fair only
  take_slots() -- groups only
  sweep_fair() -- fair only
end
local since, fence = {}, 0
if #popped > 0 then
  since = redis.call('HMGET', STATE, unpack(popped))
  fence = redis.call('INCRBY', FENCE, #popped) - #popped
end
local reply = {0, reclaimed, 0}
local states, tokens, grants, leases, starts = {}, {}, {}, {}, {}
local j = 0
for i, nonce in ipairs(nonces) do
  if granted[i] then
    -- Its grant stands if the key's lease is still the nonce's: leased_to,
    -- written out, as defining it would cost every call of this script.
    local token = redis.call('HGET', TOKENS, granted[i])
    if token and string.sub(token, -#nonce - 1) == ':' .. nonce then
      local state = redis.call('HGET', STATE, granted[i])
      reply[#reply + 1] = {granted[i], token, 0, state and state_priority(state) or 0}
    else
      -- The Get was cancelled first (cancel.lua): it takes nothing.
      redis.call('HDEL', GRANTS, nonce)
      reply[#reply + 1] = 0
    end
  elseif j < #popped then
    j = j + 1
    local key, prio = popped[j], prios[j]
    local _, _, queued = queued_state(since[j])
    local token = (fence + j) .. ':' .. nonce
    states[#states + 1], states[#states + 2] = key, tagged('p', prio)
    tokens[#tokens + 1], tokens[#tokens + 2] = key, token
    grants[#grants + 1], grants[#grants + 2] = nonce, key
    leases[#leases + 1], leases[#leases + 2] = now + lease, key
    starts[#starts + 1], starts[#starts + 2] = now, key
    reply[#reply + 1] = {key, token, now - queued, prio}
  else
    reply[#reply + 1] = 0
  end
end
if j > 0 then
  redis.call('HSET', STATE, unpack(states))
  redis.call('HSET', TOKENS, unpack(tokens))
  redis.call('HSET', GRANTS, unpack(grants))
  redis.call('ZADD', LEASES, unpack(leases))
  redis.call('ZADD', SINCE, unpack(starts))
end
if j < need then
  local wait = -1
  local delayed = redis.call('ZRANGE', DELAYED, 0, 0, 'WITHSCORES')
  if delayed[2] then wait = math.max(math.ceil(tonumber(delayed[2]) - now), 1) end
  reply[3] = wait
end
local left = redis.call('LLEN', READY) + ranked
if left > 0 then signal() end
reply[1] = left
reply[1] = reply[1] + redis.call('ZCARD', BLOCKED) -- groups only
reply[1] = reply[1] + redis.call('ZCARD', NEST) -- nested only
return reply

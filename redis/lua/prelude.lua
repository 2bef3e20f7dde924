-- Every script starts with the statements of this prelude that it uses,
-- and is sent only the keys those bind (see loadScript): the server runs
-- every statement of a script on each call, each function definition
-- included, and reads every key sent, so a script carries only what it
-- can reach. All of a queue's keys share one hash tag, so a script touches
-- one slot on Redis Cluster too.
--
-- The queued keys are handed out from two places: first those of PRIO
-- with a priority above 0, then READY, then the rest of PRIO. READY is
-- the list of the keys queued at priority 0, first in, first out. PRIO is
-- a sorted set of the keys queued at any other priority, scored by the
-- priority negated, each member a 16-digit sequence number (see seq)
-- followed by the key, so that each priority is first in, first out too.
-- A queue that never uses priorities so runs a list's commands alone,
-- which cost the server less than a sorted set's, and its adds, through
-- add.lua, define none of PRIO's functions.
-- STATE maps each key that is queued or processing to its state:
--   SINCE              queued at priority 0 since then (ms), in READY
--   "qSEQ PRIO/SINCE"  queued at priority PRIO, in PRIO (SEQ the 16
--                      digits of its member)
--   "p" or "pPRIO"     handed out at priority 0 or PRIO, leased until its
--                      score in LEASES
--   "d" or "dPRIO"     handed out, and added again since: queue it again
--                      at Done, at priority 0 or PRIO
-- A key in no state is idle. DELAYED holds keys waiting for their ready
-- time, independent of STATE, as the in-memory delaying queue's heap is;
-- DPRIO holds the priority of those that are to be queued at one other
-- than 0 (every key of DPRIO is in DELAYED). SEQ holds the counters of
-- PRIO's sequence numbers: "b" those put at the back of their priority,
-- "f" at the front; and "w" that of parks.
-- GRANTS maps the nonce of each lease's token to its key, so that a get
-- script sent again after its reply was lost returns the same grant, and
-- the nonce of a Get cancelled before its get script ran to a mark that
-- makes that script grant it nothing (cancel.lua).
-- SINCE holds when each leased key was handed out, and ADDS counts the
-- adds that queued or marked a key, for snapshots.
--
-- Parks. A key parked since its Done has the state
--   "wNUM PRIO/DEADLINE|EVENTS"  (no spaces) parked by park number NUM (16
--                      digits), to be queued at priority PRIO, until
--                      DEADLINE (ms) at the latest
-- where EVENTS is each event it waits for as LENGTH:EVENT, one after
-- another. Its deadline waits in DELAYED as an add of the key at PRIO, so
-- that promote ends the park with that add and an idle Get wakes for it;
-- PARKED holds when each such key was parked. A park asked for while the
-- key is processed is in PARKS until Done: key -> "wNUM0/TOKEN|EVENTS",
-- the parked state with the lease's token in place of the deadline, and
-- counts only while the key's state is "p" or "pPRIO" and TOKEN its
-- lease's (an add, a wake or a lost lease ends it; the record is dropped
-- by the next script that reads it). WAITERS holds, at score 0, a member
-- LENGTH:EVENT NUM KEY for each event of each park of either kind, so
-- that the members of one event sort in park order. FIRED maps each event
-- woken to FENCE's value at its last wake: a lease whose token's number
-- is at most that was granted before the wake.
--
-- Fairness. FLOWS maps each key a queue with Fairness holds (queued,
-- delayed, processing) to "STEP FLOW": its fairness key and the step its
-- weight gives (see fair_seq); a key in FLOWS is queued by fair_seq
-- wherever it goes to the back of its priority, at 0 too, in PRIO. FAIR
-- holds, for each priority PRIO, "vPRIO": the sequence number at its head
-- when a key was last queued there, and "fPRIO FLOW": the number FLOW's
-- next key there starts from. A queue with MaxWait keeps a flow for each
-- key too ("" without Fairness), its STEP led by "a": AGES then holds each
-- such key queued in PRIO, scored by when it was queued.
--
-- Lines that end in "-- fair only" are in the scripts of a sorted queue
-- (with Fairness or MaxWait) alone (see loadScript).
--
-- One key a line, each bound to its name in keyParts (scripts.go): a
-- script is sent the keys it binds, in this order, numbered anew.
local READY = KEYS[1]
local STATE = KEYS[2]
local DELAYED = KEYS[3]
local LEASES = KEYS[4]
local TOKENS = KEYS[5]
local FENCE = KEYS[6]
local SIGNAL = KEYS[7]
local FAILS = KEYS[8]
local BUCKET = KEYS[9]
local GRANTS = KEYS[10]
local SINCE = KEYS[11]
local ADDS = KEYS[12]
local DPRIO = KEYS[13]
local SEQ = KEYS[14]
local PRIO = KEYS[15]
local PARKS = KEYS[16]
local WAITERS = KEYS[17]
local PARKED = KEYS[18]
local FIRED = KEYS[19]
local FLOWS = KEYS[20]
local FAIR = KEYS[21]
local AGES = KEYS[22]

-- now: the caller's clock in ms, or Redis's own when the caller sends -1,
-- so that processes whose clocks disagree still agree on lease expiry.
local function clock(ms)
  ms = tonumber(ms)
  if ms >= 0 then return ms end
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- The first byte of a state that is not queued at priority 0.
local QUEUED, PROCESSING, MARKED, WAITING = string.byte('q'), string.byte('p'), string.byte('d'), string.byte('w')

local function fmt(n) return string.format('%d', n) end

-- tagged returns a processing or marked state: tag, and prio unless 0.
local function tagged(tag, prio)
  if prio == 0 then return tag end
  return tag .. fmt(prio)
end

-- state_priority returns the priority of a processing or marked state.
local function state_priority(state)
  return tonumber(string.sub(state, 2)) or 0
end

-- queued_state returns the sequence number (nil at priority 0), priority
-- and queued time of a queued key's state.
local function queued_state(state)
  if string.byte(state) ~= QUEUED then return nil, 0, tonumber(state) end
  local slash = string.find(state, '/', 18, true)
  return string.sub(state, 2, 17), tonumber(string.sub(state, 18, slash - 1)), tonumber(string.sub(state, slash + 1))
end

-- seq returns the sequence number of a key put at the back of its
-- priority in PRIO, or at the front if front is set: ORIGIN plus or minus
-- a counter, as 16 digits, so that members sort in the order they were
-- put. Numbers for the back are reserved in blocks, one HINCRBY per script
-- mostly; the numbers a script leaves unused are skipped.
local ORIGIN, BLOCK = 1000000000000000, 64
local next_seq, last_seq = 1, 0
local function seq(front)
  if front then
    return string.format('%016d', ORIGIN - redis.call('HINCRBY', SEQ, 'f', 1))
  end
  if next_seq > last_seq then
    last_seq = redis.call('HINCRBY', SEQ, 'b', BLOCK)
    next_seq = last_seq - BLOCK + 1
  end
  next_seq = next_seq + 1
  return string.format('%016d', ORIGIN + next_seq - 1)
end

-- depth is the number of keys queued.
local function depth()
  return redis.call('LLEN', READY) + redis.call('ZCARD', PRIO)
end

-- end_lease forgets key's lease: its token, expiry and grant.
local function end_lease(key)
  local token = redis.call('HGET', TOKENS, key)
  if token then
    redis.call('HDEL', GRANTS, string.sub(token, string.find(token, ':', 1, true) + 1))
    redis.call('HDEL', TOKENS, key)
  end
  redis.call('ZREM', LEASES, key)
  redis.call('ZREM', SINCE, key)
end

-- leased_to reports whether key's lease is the one granted to nonce: its
-- token ends with the nonce. A GRANTS entry that fails it is a cancelled
-- Get's mark (see cancel.lua).
local function leased_to(key, nonce)
  local token = redis.call('HGET', TOKENS, key)
  return token ~= false and string.sub(token, -#nonce - 1) == ':' .. nonce
end

-- signal leaves one token in SIGNAL, where idle processes block with BLPOP.
-- One token is enough: a worker that takes a key and sees more ready passes
-- the token on, so an add wakes one process instead of all of them. Once a
-- script has left it, nothing can take it before the script ends: the
-- script's later signals need no command.
local signalled = false
local function signal()
  if signalled then return end
  signalled = true
  if redis.call('LLEN', SIGNAL) == 0 then redis.call('RPUSH', SIGNAL, 1) end
end

-- enqueue queues key at priority 0, queued since since, behind the keys
-- queued at 0, or before them if front is set.
local function enqueue(key, since, front)
  if front then
    redis.call('LPUSH', READY, key)
  else
    redis.call('RPUSH', READY, key)
  end
  redis.call('HSET', STATE, key, since)
  signal()
end

-- fair_seq returns the sequence number of key, of a queue with Fairness,
-- put at the back of priority prio, and whether it is aged (see AGES), or
-- nil if FLOWS has no flow for it: start-time fair queueing, where each
-- flow's keys get numbers a step apart, the step FAIR_UNIT over the
-- flow's weight. A flow with keys queued at prio goes on from its last
-- one; a flow with none starts from the number the priority's keys start
-- from, v (the later of the head and the last key handed out), or just
-- after its own last key handed out if that is later. So the flows take
-- turns, one key each per FAIR_UNIT (w keys for a weight of w), and a
-- flow's first key waits behind at most two keys of each other flow (one
-- per turn), however many they have queued, or removed. Keys put at the
-- front (numbers below ORIGIN) count for nothing. A priority found empty
-- starts a new epoch ("ePRIO"), whose numbers start afresh: a flow's
-- state of an earlier epoch counts for nothing. FAIR is emptied when PRIO
-- is, which bounds it by the flows queued since.
--
-- A flow's state at a priority, "fPRIO FLOW", is "EPOCH:NEXT:QUEUED:AFTER":
-- the number its next key gets if it has keys queued, how many it has
-- queued, and the number just after its last key handed out.
local FAIR_UNIT = 2520
-- flow_of holds the flows a script was sent (addopts.lua), so that it
-- does not read them back; fair_v and fair_e the number each priority's
-- keys start from and its epoch in this script, as no key is handed out
-- between two ranks of one script.
local flow_of, fair_v, fair_e = {}, {}, {}

-- fair_state returns a flow's stored state, as numbers: next, queued and
-- after, zero for a state of another epoch than e (any epoch if e is nil)
-- or none; and its epoch.
local function fair_state(stored, e)
  if not stored then return 0, 0, 0, e or 0 end
  local a = string.find(stored, ':', 1, true)
  local b = string.find(stored, ':', a + 1, true)
  local c = string.find(stored, ':', b + 1, true)
  local epoch = tonumber(string.sub(stored, 1, a - 1))
  if e and epoch ~= e then return 0, 0, 0, e end
  return tonumber(string.sub(stored, a + 1, b - 1)), tonumber(string.sub(stored, b + 1, c - 1)), tonumber(string.sub(stored, c + 1)), epoch
end

local function fair_store(field, e, nextn, queued, after)
  redis.call('HSET', FAIR, field, fmt(e) .. ':' .. fmt(nextn) .. ':' .. fmt(queued) .. ':' .. fmt(after))
end

-- flow_step returns a flow's step, fairness key and whether it is aged,
-- from its FLOWS value.
local function flow_step(flow)
  local space, aged = string.find(flow, ' ', 1, true), string.byte(flow) == 97 -- "a"
  return tonumber(string.sub(flow, aged and 2 or 1, space - 1)), string.sub(flow, space + 1), aged
end

local function fair_seq(key, prio)
  local flow = flow_of[key] or redis.call('HGET', FLOWS, key)
  if not flow then return nil end
  local step, name, aged = flow_step(flow)
  local field = 'f' .. fmt(prio) .. ' ' .. name
  local v, e = fair_v[prio], fair_e[prio]
  local stored
  if v then
    stored = redis.call('HGET', FAIR, field)
  else
    local head = redis.call('ZRANGE', PRIO, -prio, -prio, 'BYSCORE', 'LIMIT', 0, 1)[1]
    if not head then
      if redis.call('ZCARD', PRIO) == 0 then
        redis.call('DEL', FAIR)
        e = 0
      else
        e = redis.call('HINCRBY', FAIR, 'e' .. fmt(prio), 1)
      end
      v = ORIGIN
    else
      local known = redis.call('HMGET', FAIR, 'v' .. fmt(prio), field, 'e' .. fmt(prio))
      v, e, stored = tonumber(known[1]) or ORIGIN, tonumber(known[3]) or 0, known[2]
      local at = tonumber(string.sub(head, 1, 16))
      if at >= ORIGIN then v = math.max(v, at) end
    end
    fair_v[prio], fair_e[prio] = v, e
    redis.call('HSET', FAIR, 'v' .. fmt(prio), fmt(v))
  end
  local nextn, queued, after = fair_state(stored, e)
  local n = math.max(v, queued > 0 and nextn or after)
  fair_store(field, e, n + step, queued + 1, after)
  return string.format('%016d', n), aged
end

-- fair_left updates the states of the flows of keys that left PRIO, each
-- {key, priority, number}: handed out if handed is set, else taken back
-- (removed, or raised to another priority). A key put at the front, or
-- without a flow, counts for nothing.
local function fair_left(left, handed)
  local keys = {}
  for i, entry in ipairs(left) do keys[i] = entry[1] end
  if #keys == 0 then return end
  local flows = redis.call('HMGET', FLOWS, unpack(keys))
  for i, entry in ipairs(left) do
    local n = tonumber(entry[3])
    if flows[i] and n >= ORIGIN then
      local step, name = flow_step(flows[i])
      local prio = entry[2]
      local field = 'f' .. fmt(prio) .. ' ' .. name
      local nextn, queued, after, e = fair_state(redis.call('HGET', FAIR, field), nil)
      if handed then
        after = math.max(after, n + step)
        local v = tonumber(redis.call('HGET', FAIR, 'v' .. fmt(prio))) or ORIGIN
        if n > v then redis.call('HSET', FAIR, 'v' .. fmt(prio), fmt(n)) end
      end
      fair_store(field, e, nextn, math.max(queued - 1, 0), after)
    end
  end
end

-- note_flows writes the flows an add script was sent, each add's fifth
-- value from ARGV[from] on, to FLOWS and flow_of, before any add runs, so
-- that each is known wherever its key goes. A stride below 5 sends none.
local function note_flows(from, stride)
  if stride < 5 then return end
  local flows = {}
  for i = from, #ARGV, stride do
    flows[#flows + 1], flows[#flows + 2] = ARGV[i], ARGV[i + 4]
    flow_of[ARGV[i]] = ARGV[i + 4]
  end
  if #flows > 0 then redis.call('HSET', FLOWS, unpack(flows)) end
end

-- take_aged takes out of PRIO, for the get script, up to need keys queued
-- for longer than maxwait (ms) by now, the longest first, and appends
-- them and their priorities to popped and prios; it returns how many.
-- Only a key queued in PRIO is in AGES; the check of its state keeps a
-- stray entry from handing out a key that is not queued.
local function take_aged(now, maxwait, need, popped, prios)
  if maxwait <= 0 then return 0 end
  local aged = redis.call('ZRANGE', AGES, '-inf', now - maxwait, 'BYSCORE', 'LIMIT', 0, need)
  if #aged == 0 then return 0 end
  local members, states, left = {}, redis.call('HMGET', STATE, unpack(aged)), {}
  for i, key in ipairs(aged) do
    if states[i] and string.byte(states[i]) == QUEUED then
      local place, prio = queued_state(states[i])
      members[#members + 1], popped[#popped + 1], prios[#prios + 1] = place .. key, key, prio
      left[#left + 1] = {key, prio, place}
    end
  end
  if #members > 0 then redis.call('ZREM', PRIO, unpack(members)) end
  redis.call('ZREM', AGES, unpack(aged))
  fair_left(left, true)
  return #members
end

-- forget_flows drops the flows of keys, idle now, but those of keys that
-- wait in DELAYED still, whose flow promote needs.
local function forget_flows(keys)
  local delayed, gone = redis.call('ZMSCORE', DELAYED, unpack(keys)), {}
  for i, key in ipairs(keys) do
    if not delayed[i] then gone[#gone + 1] = key end
  end
  if #gone > 0 then redis.call('HDEL', FLOWS, unpack(gone)) end
end

-- rank is enqueue at priority prio, in PRIO unless prio is 0 and key has
-- no flow (see fair_seq).
local function rank(key, since, prio, front)
  local n, aged
  if not front then n, aged = fair_seq(key, prio) end -- fair only
  if not n then
    if prio == 0 then return enqueue(key, since, front) end
    n = seq(front)
  end
  redis.call('ZADD', PRIO, -prio, n .. key)
  if aged then redis.call('ZADD', AGES, since, key) end -- fair only
  redis.call('HSET', STATE, key, 'q' .. n .. fmt(prio) .. '/' .. fmt(since))
  signal()
end

-- unqueue takes key, queued with state, out of READY or PRIO.
local function unqueue(key, state)
  local place, prio = queued_state(state)
  if place then
    redis.call('ZREM', PRIO, place .. key)
    redis.call('ZREM', AGES, key) -- fair only
    fair_left({{key, prio, place}}, false) -- fair only
  else
    redis.call('LREM', READY, 1, key)
  end
end

-- unpark forgets key's park, park (a parked key's state, or a record of
-- PARKS), and returns the priority to queue it at; the caller sets its
-- state or drops the record. A parked key's deadline's add is taken back,
-- unless an earlier add waits in its place. It is one function, so that
-- the scripts of adds define one function more for parks.
local function unpark(key, park)
  local slash = string.find(park, '/', 18, true)
  local bar = string.find(park, '|', slash, true)
  local events, n, members, pos = string.sub(park, bar + 1), string.sub(park, 2, 17), {}, 1
  while pos <= #events do
    local colon = string.find(events, ':', pos, true)
    local stop = colon + tonumber(string.sub(events, pos, colon - 1))
    members[#members + 1] = string.sub(events, pos, stop) .. n .. key
    pos = stop + 1
  end
  if #members > 0 then redis.call('ZREM', WAITERS, unpack(members)) end
  redis.call('ZREM', PARKED, key)
  local deadline = tonumber(string.sub(park, slash + 1, bar - 1))
  if deadline and tonumber(redis.call('ZSCORE', DELAYED, key)) == deadline then
    redis.call('ZREM', DELAYED, key)
    redis.call('HDEL', DPRIO, key)
  end
  return tonumber(string.sub(park, 18, slash - 1))
end

-- add queues key at priority 0, and returns 1 if it was idle, 2 if it is
-- being processed and is now marked to be queued again at Done, 0 if it
-- was already queued or marked. A key queued or marked at a priority
-- below 0 is raised to 0: a queued one goes behind the keys queued at 0.
-- A parked key is left as it is, and add returns 4: add_at adds it (it
-- ends the park), in a script that is sent the keys of parks. add_at is
-- the same at any priority; add is apart so that add.lua, of priority 0
-- alone, defines none of PRIO's functions, nor unpark.
local function add(key, now)
  local state = redis.call('HGET', STATE, key)
  local kind = state and string.byte(state)
  if kind == WAITING then return 4 end
  if not state then
    enqueue(key, now, false)
    redis.call('INCR', ADDS)
    return 1
  end
  if kind == PROCESSING then
    redis.call('HSET', STATE, key, 'd')
    redis.call('INCR', ADDS)
    return 2
  end
  if kind == MARKED then
    if state_priority(state) < 0 then redis.call('HSET', STATE, key, 'd') end
    return 0
  end
  local place, prio, since = queued_state(state)
  if prio < 0 then
    redis.call('ZREM', PRIO, place .. key)
    enqueue(key, since, false)
  end
  return 0
end

-- queue_at is add at priority prio, of a key that is not parked, whose
-- state is state (false: none): a key queued or marked at a lower
-- priority is raised to prio, a queued one behind the keys queued at prio.
local function queue_at(key, now, prio, state)
  local kind = state and string.byte(state)
  if not state then
    rank(key, now, prio, false)
    redis.call('INCR', ADDS)
    return 1
  end
  if kind == PROCESSING then
    redis.call('HSET', STATE, key, tagged('d', prio))
    redis.call('INCR', ADDS)
    return 2
  end
  if kind == MARKED then
    if prio > state_priority(state) then redis.call('HSET', STATE, key, tagged('d', prio)) end
    return 0
  end
  local _, old, since = queued_state(state)
  if prio > old then
    unqueue(key, state)
    rank(key, since, prio, false)
  end
  return 0
end

-- add_at is add at priority prio, a parked key unparked and queued as an
-- idle one. known is key's state if the caller read it already (false:
-- none).
local function add_at(key, now, prio, known)
  local state = known
  if state == nil then state = redis.call('HGET', STATE, key) end
  if state and string.byte(state) == WAITING then
    unpark(key, state)
    state = false
  end
  return queue_at(key, now, prio, state)
end

-- delay puts key to wait until at, to be added at priority prio then. A
-- key already waiting keeps the earlier ready time and the higher
-- priority. It signals a new first ready time, so that an idle process
-- sleeps until then instead of until its heartbeat.
local function delay(key, at, prio)
  local waited = tonumber(redis.call('HGET', DPRIO, key))
  if waited then
    prio = math.max(prio, waited)
  elseif prio < 0 and redis.call('ZSCORE', DELAYED, key) then
    prio = 0 -- it waits already, at priority 0
  end
  redis.call('ZADD', DELAYED, 'LT', at, key)
  if prio ~= 0 then
    if prio ~= waited then redis.call('HSET', DPRIO, key, fmt(prio)) end
  elseif waited then
    redis.call('HDEL', DPRIO, key)
  end
  if redis.call('ZRANGE', DELAYED, 0, 0)[1] == key then signal() end
end

-- take_delayed takes key out of DELAYED, if it waits there, and returns
-- the priority it waited for (0 if it did not wait) and whether it did.
local function take_delayed(key)
  if redis.call('ZREM', DELAYED, key) == 0 then return 0, false end
  local prio = tonumber(redis.call('HGET', DPRIO, key) or 0)
  redis.call('HDEL', DPRIO, key)
  return prio, true
end

-- add_once is AddWithOpts's add, with the priority queue's rules: a key
-- is held once. A key queued, or marked to be queued again, is raised to
-- prio, whatever the delay; else with a delay it waits (as delay does);
-- without one it is added, its waiting add taken back and that add's
-- priority kept if higher. Returns add's outcomes, or 3 if it waits.
local function add_once(key, now, prio, wait)
  local state = redis.call('HGET', STATE, key)
  if state and string.byte(state) == WAITING then
    -- As if it was not parked: its deadline's add is no add of the caller.
    unpark(key, state)
    redis.call('HDEL', STATE, key)
    state = false
  end
  if wait > 0 then
    if state and string.byte(state) ~= PROCESSING then
      add_at(key, now, prio, state)
      return 0
    end
    delay(key, now + wait, prio)
    return 3
  end
  local waited, waits = take_delayed(key)
  if waits then prio = math.max(prio, waited) end
  return add_at(key, now, prio, state or false)
end

-- pending_token returns the token of the lease that asked for the park
-- record, a record of PARKS.
local function pending_token(record)
  local slash = string.find(record, '/', 18, true)
  return string.sub(record, slash + 1, string.find(record, '|', slash, true) - 1)
end

-- end_pending drops the park that key's holder asked for, numbered n (any
-- if n is nil), before its Done, and reports whether it still counted:
-- whether state, key's state, is processing and the park's lease is key's.
-- If it counted and mark is set, the key is marked to be queued again at
-- Done, at its priority.
local function end_pending(key, n, state, mark)
  local record = redis.call('HGET', PARKS, key)
  if not record or (n and string.sub(record, 2, 17) ~= n) then return false end
  unpark(key, record)
  redis.call('HDEL', PARKS, key)
  local live = state and string.byte(state) == PROCESSING and
    redis.call('HGET', TOKENS, key) == pending_token(record)
  if live and mark then redis.call('HSET', STATE, key, 'd' .. string.sub(state, 2)) end
  return live
end

-- wake_park ends key's park, if it is numbered n (any if n is nil), and
-- reports whether it did: a key parked since its Done is queued at the
-- back of its priority, and one still processed is marked to be queued
-- again at its Done.
local function wake_park(key, n, now)
  local state = redis.call('HGET', STATE, key)
  if state and string.byte(state) == WAITING then
    if n and string.sub(state, 2, 17) ~= n then return false end
    rank(key, now, unpark(key, state), false)
    return true
  end
  return end_pending(key, n, state, true)
end

-- parked_count is the number of keys parked since their Done.
local function parked_count()
  return redis.call('ZCARD', PARKED)
end

-- rate_limit counts a failure of key and returns the larger of its
-- exponential backoff, base * 2^failures capped at max, and the shared
-- bucket's wait (GCRA: BUCKET holds the theoretical arrival time), in ms:
-- base and max in ms, interval the ms between tokens (0: no bucket).
local function rate_limit(key, now, base, max, interval, burst)
  local failures = redis.call('HINCRBY', FAILS, key, 1) - 1
  local wait = 0
  if base > 0 then
    -- 2^1024 is inf in Lua; a cap on the exponent keeps the arithmetic finite.
    wait = math.min(base * 2 ^ math.min(failures, 1000), max)
  end
  if interval > 0 then
    local tat = tonumber(redis.call('GET', BUCKET)) or now
    if tat < now then tat = now end
    tat = tat + interval
    local bucket = tat - interval * burst - now
    if bucket > wait then wait = bucket end
    redis.call('SET', BUCKET, string.format('%.3f', tat), 'PX', math.ceil(tat - now) + 1)
  end
  return math.ceil(wait)
end

-- promote adds the delayed keys that are due and queues again, at the front
-- of their priority, the keys whose lease expired (their holder died or
-- lost Redis for longer than the lease). Whichever process runs it first
-- does it, once, because a script runs alone. A bounded batch keeps one
-- script short; what is left is promoted by the next call. Returns how
-- many leases were reclaimed. A due key that is parked (its deadline, or
-- an add after a delay) ends its park through unparks, unpark as
-- promote.lua passes it: without it promote returns nil at once, having
-- changed nothing, so that get.lua is sent none of the keys of parks.
local BATCH = 256
local function promote(now, unparks)
  local due = redis.call('ZRANGE', DELAYED, '-inf', now, 'BYSCORE', 'LIMIT', 0, BATCH)
  if #due > 0 then
    local states = redis.call('HMGET', STATE, unpack(due))
    for _, state in ipairs(states) do
      if not unparks and state and string.byte(state) == WAITING then return nil end
    end
    local prios = redis.call('HMGET', DPRIO, unpack(due))
    redis.call('ZREM', DELAYED, unpack(due))
    redis.call('HDEL', DPRIO, unpack(due))
    for i, key in ipairs(due) do
      local state = states[i]
      if state and string.byte(state) == WAITING then
        unparks(key, state)
        state = false
      end
      queue_at(key, now, tonumber(prios[i] or 0), state)
    end
  end
  local expired = redis.call('ZRANGE', LEASES, '-inf', now, 'BYSCORE', 'LIMIT', 0, BATCH)
  for i = #expired, 1, -1 do
    local key = expired[i]
    local state = redis.call('HGET', STATE, key)
    end_lease(key)
    rank(key, now, state and state_priority(state) or 0, true)
  end
  return #expired
end

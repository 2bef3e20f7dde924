#!lua name=workqueue_v6
-- The work queue's Redis Functions library: one function per operation,
-- registered as the library's name and its own (workqueue_v1_get, ...), each headed by its
-- arguments and reply, after the helpers they share. A queue's features
-- are arguments, not variants of the code.
--
-- The library's name carries the version of the layout of the keys and
-- of these functions' arguments: a release that changes either loads
-- another library, under a new name, beside this one, so that the
-- processes of two releases each call their own during a rolling upgrade.
-- Two libraries share the keys of a queue: a new version must read the
-- keys an older one wrote, or use other keys.

-- The queued keys are handed out from two places: first those of PRIO
-- with a priority above 0, then READY, then the rest of PRIO. READY is
-- the list of the keys queued at priority 0, first in, first out. PRIO is
-- a sorted set of the keys queued at any other priority, scored by the
-- priority negated, each member a 16-digit sequence number (see seq)
-- followed by the key, so that each priority is first in, first out too.
-- A queue that never uses priorities so runs a list's commands alone,
-- which cost the server less than a sorted set's.
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
-- get call sent again after its reply was lost returns the same grant, and
-- the nonce of a Get cancelled before its get call ran to a mark that
-- makes that call grant it nothing (see fn_cancel).
-- SINCE holds when each leased key was handed out, and ADDS counts the
-- adds that queued or marked a key, for snapshots.
--
-- Parks. A key parked since its Done has the state
--   "wNUM PRIO/DEADLINE/UNTIL|EVENTS"  (no spaces) parked by park number
--                      NUM (16 digits), to be queued at priority PRIO,
--                      until DEADLINE (ms) at the latest, and by a wake
--                      no sooner than UNTIL (ms), when its backoff ends
-- where EVENTS is each event it waits for as LENGTH:EVENT, one after
-- another (see park_fields). Its deadline waits in DELAYED as an add of
-- the key at PRIO, so that promote ends the park with that add and an
-- idle Get wakes for it; PARKED holds when each such key was parked. A
-- wake before UNTIL puts the key in DELAYED until then, as an add at
-- PRIO, instead of queuing it. A park asked for while the
-- key is processed is in PARKS until Done: key -> "wNUM0/TOKEN/UNTIL|EVENTS",
-- the parked state with the lease's token in place of the deadline, and
-- counts only while the key's state is "p" or "pPRIO" and TOKEN its
-- lease's (an add, a wake or a lost lease ends it; the record is dropped
-- by the next call that reads it). WAITERS holds, at score 0, a member
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
-- next key there starts from. A queue with MaxWait or GroupLimits keeps a
-- flow for each key too ("" without Fairness); with MaxWait its STEP is
-- led by "a": AGES then holds each such key queued in PRIO, scored by when
-- it was queued.
--
-- Group limits. GROUPS maps each key a queue with GroupLimits holds
-- (queued, delayed, processing, parked) whose item has a group to "LIMIT
-- GROUP": the group, and its limit as the add that last queued the key
-- had it. LIMITS maps a group to the limit SetGroupLimit gave it, which
-- overrides those ("0": none). INFLIGHT counts each group's leased keys.
-- A key popped for a Get while its group has no free slot goes to
-- BLOCKED instead, at score 0, as "LENGTH:GROUP " then RANK, NUMBER and
-- KEY (see blocked_member), so that each group's members sort together, in
-- hand-out order; its state stays queued, "qNUMBER PRIO/SINCE" (a key
-- popped from READY, put at the front, takes a number at the front). With
-- GroupLimits every key has a flow, so that each key has a number that
-- keeps its place in its priority while it is blocked. A lease that ends
-- frees its group's slot, and the group's first blocked keys go back, as
-- many as it has free slots, to where they were. So a Get passes over a
-- full group's keys once each, however long the group stays full.
--
-- Nested fairness. With a second level of fairness keys, FLOWS's STEP is
-- led by "n" too, and INNER maps each key to "STEP NAME": its key of the
-- second level and the step of that key's weight. PRIO then holds, of
-- each first-level key's keys at a priority, one alone (its head),
-- numbered by fair_seq among the first-level keys; a key put at the front
-- is apart and counts for nothing. The others wait in NEST, at score 0,
-- as "RANK LENGTH:FLOW " then NUMBER and KEY (RANK as in BLOCKED), where
-- their numbers come by fair_seq's rule among the second-level keys of
-- that first-level key and priority (a scope, "PRIO LENGTH:FLOW"), with
-- states in FAIR: "iSCOPE NAME" as "fPRIO FLOW" is, "uSCOPE" the number
-- the scope's keys start from, "jSCOPE" its epoch (from the counter
-- "E"), and "hSCOPE" how many of its keys are in PRIO. A head that
-- leaves PRIO (handed out, passed over for a slot, removed or raised)
-- makes the scope's first key in NEST the head. So the first-level keys
-- take turns, and within each its second-level keys.
--
-- Tracing. On a traced queue LINKS holds the links of the adds made with
-- a span: "n" .. KEY those of the key's next hand-out, "s" .. KEY those
-- of its hand-out being processed, each "COUNT DROPPED" then, for each
-- link, a newline and "TRACEPARENT TRACESTATE" (see links_merge). The
-- hand-out makes the next links the served ones; Done, Remove and a
-- release drop or move them; a retry (an add with a delay or a rate
-- limit) of a key being processed carries the served links to the next.
-- A queue that is not traced runs none of LINKS's commands.
--

-- The queue's keys, bound by begin at the start of each call, in this
-- order (keyParts in functions.go).
local READY, STATE, DELAYED, LEASES, TOKENS, FENCE, SIGNAL, FAILS, BUCKET, GRANTS, SINCE, ADDS, DPRIO, SEQ, PRIO, PARKS, WAITERS, PARKED, FIRED, FLOWS, FAIR, AGES, GROUPS, INFLIGHT, BLOCKED, LIMITS, INNER, NEST, LINKS
-- ARGV is the running function's arguments; SORTED, GROUPED, NESTED
-- and TRACED its queue's features, from ARGV[1] (see begin).
local ARGV
local SORTED, GROUPED, NESTED, TRACED = false, false, false, false

-- now: the caller's clock in ms, or Redis's own when the caller sends -1,
-- so that processes whose clocks disagree still agree on lease expiry.
local function clock(ms)
  ms = tonumber(ms)
  if ms >= 0 then return ms end
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- The first byte of a state that is not queued at priority 0.
-- ("q", "p", "d" and "w": the library's top level runs where string is
-- not defined.)
local QUEUED, PROCESSING, MARKED, WAITING = 113, 112, 100, 119

-- fmt returns the integer n as a string. The functions pass the numbers
-- of their hot paths to redis.call so: Redis 7.0 turns a Lua number into a
-- command's argument with snprintf's "%.17g", several times slower.
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
-- put. Numbers for the back are reserved in blocks, one HINCRBY per call
-- mostly; the numbers a call leaves unused are skipped.
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

-- due_at is the time up to which promote_due left due keys in DELAYED
-- this call (its batch was full), else false.
local due_at

-- due_waiting is the number of keys in DELAYED that are due but that
-- promote_due left there this call (0 if it left none): ZCOUNT, which
-- moves nothing, so that a depth counts every due key however many fell
-- due at once. It counts each of them, one whose add will find it queued
-- or processing too.
local function due_waiting()
  if not due_at then return 0 end
  return redis.call('ZCOUNT', DELAYED, '-inf', due_at)
end

-- depth is the number of keys queued, blocked ones included, and the due
-- keys promote_due left (see due_waiting).
local function depth()
  local n = redis.call('LLEN', READY) + redis.call('ZCARD', PRIO)
  if GROUPED then n = n + redis.call('ZCARD', BLOCKED) end
  if NESTED then n = n + redis.call('ZCARD', NEST) end
  return n + due_waiting()
end

-- leased_to reports whether key's lease is the one granted to nonce: its
-- token ends with the nonce. A GRANTS entry that fails it is a cancelled
-- Get's mark (see fn_cancel).
local function leased_to(key, nonce)
  local token = redis.call('HGET', TOKENS, key)
  return token ~= false and string.sub(token, -#nonce - 1) == ':' .. nonce
end

-- signal leaves one token in SIGNAL, where idle processes block with BLPOP.
-- One token is enough: a worker that takes a key and sees more ready passes
-- the token on, so an add wakes one process instead of all of them. Once a
-- call has left it, nothing can take it before the call ends: the call's
-- later signals need no command.
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

-- priority_rank returns the RANK of priority prio, 17 characters that
-- sort the highest priority first, with every priority of -2^53 to 2^53
-- exact: "a" and 2^53 minus the priority for one at or above 0, "b" and
-- minus the priority below.
local function priority_rank(prio)
  if prio >= 0 then return 'a' .. string.format('%016d', 9007199254740992 - prio) end
  return 'b' .. string.format('%016d', -prio)
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
-- is, which bounds it by the flows queued since, and swept (see
-- sweep_fair) on a queue that never empties.
--
-- A flow's state at a priority, "fPRIO FLOW", is "EPOCH:NEXT:QUEUED:AFTER":
-- the number its next key gets if it has keys queued, how many it has
-- queued, and the number just after its last key handed out.
local FAIR_UNIT = 2520
-- UNFAIR is the flow of every key of a queue with GroupLimits alone: its
-- keys are queued in PRIO, first in first out, with no turns to keep.
local UNFAIR = 's'
-- flow_of holds the flows a call was sent (addopts), so that it
-- does not read them back; fair_v and fair_e the number each priority's
-- keys start from and its epoch in this call, as no key is handed out
-- between two ranks of one call.
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

-- fair_number returns the number of a key queued at the back of a flow of
-- step step, whose state stored is kept in FAIR under field, in a scope of
-- epoch e whose keys start from v, and counts the key as queued: the
-- flow's next number, or with nothing queued the one after its last
-- handed out, but never before v. The rule is the same at both levels.
local function fair_number(field, stored, e, v, step)
  local nextn, queued, after = fair_state(stored, e)
  local n = math.max(v, queued > 0 and nextn or after)
  fair_store(field, e, n + step, queued + 1, after)
  return n
end

-- flow_left counts a key numbered n of a flow of step step, whose state is
-- kept in FAIR under field, out of the flow's queue: handed out if handed
-- is set, which moves the scope's start (FAIR's field start) up to n,
-- else taken back.
local function flow_left(field, start, n, step, handed)
  local nextn, queued, after, e = fair_state(redis.call('HGET', FAIR, field), nil)
  if handed then
    after = math.max(after, n + step)
    if n > (tonumber(redis.call('HGET', FAIR, start)) or ORIGIN) then redis.call('HSET', FAIR, start, fmt(n)) end
  end
  fair_store(field, e, nextn, math.max(queued - 1, 0), after)
end

-- flow_step returns a flow's step, fairness key, whether it is aged and
-- whether it is nested, from its FLOWS value.
local function flow_step(flow)
  local space, from, aged, nested = string.find(flow, ' ', 1, true), 1, false, false
  if string.byte(flow, from) == 97 then aged, from = true, from + 1 end -- "a"
  if string.byte(flow, from) == 110 then nested, from = true, from + 1 end -- "n"
  return tonumber(string.sub(flow, from, space - 1)), string.sub(flow, space + 1), aged, nested
end

local function fair_seq(key, prio)
  local flow = flow_of[key] or redis.call('HGET', FLOWS, key)
  if not flow then return nil end
  if flow == UNFAIR then return seq(false) end
  local step, name, aged = flow_step(flow)
  local field = 'f' .. fmt(prio) .. ' ' .. name
  local v, e = fair_v[prio], fair_e[prio]
  local stored
  if v then
    stored = redis.call('HGET', FAIR, field)
  else
    local head = redis.call('ZRANGE', PRIO, -prio, -prio, 'BYSCORE', 'LIMIT', 0, 1)[1]
    -- Keys waiting for a slot (see BLOCKED) keep their numbers: no epoch
    -- starts while they wait.
    local blocked = false
    if GROUPED then blocked = not head and redis.call('ZCARD', BLOCKED) > 0 end
    if not head and not blocked then
      local empty = redis.call('ZCARD', PRIO) == 0
      if NESTED then empty = empty and redis.call('ZCARD', NEST) == 0 end
      if empty then
        redis.call('DEL', FAIR)
        e = 0
      else
        e = redis.call('HINCRBY', FAIR, 'e' .. fmt(prio), 1)
      end
      v = ORIGIN
    else
      local known = redis.call('HMGET', FAIR, 'v' .. fmt(prio), field, 'e' .. fmt(prio))
      v, e, stored = tonumber(known[1]) or ORIGIN, tonumber(known[3]) or 0, known[2]
      local at = head and tonumber(string.sub(head, 1, 16)) or 0
      if at >= ORIGIN then v = math.max(v, at) end
    end
    fair_v[prio], fair_e[prio] = v, e
    redis.call('HSET', FAIR, 'v' .. fmt(prio), fmt(v))
  end
  return string.format('%016d', fair_number(field, stored, e, v, step)), aged
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
    flow_of[entry[1]] = flow_of[entry[1]] or flows[i] or nil
    local n = tonumber(entry[3])
    if flows[i] and flows[i] ~= UNFAIR and n >= ORIGIN then
      local step, name = flow_step(flows[i])
      local prio = entry[2]
      flow_left('f' .. fmt(prio) .. ' ' .. name, 'v' .. fmt(prio), n, step, handed)
      if handed then fair_v[prio] = nil end -- a head made later in this call starts after it
    end
  end
end

-- inner_of holds the second-level keys a call was sent (addopts).
local inner_of = {}

-- nested_flow returns the first-level key of a nested flow, a FLOWS
-- value, and whether it is aged; nil for another flow.
local function nested_flow(flow)
  if not flow or flow == UNFAIR then return nil end
  local _, outer, aged, nested = flow_step(flow)
  if nested then return outer, aged end
  return nil
end

-- split_inner returns the step and name of an INNER value.
local function split_inner(value)
  local space = string.find(value, ' ', 1, true)
  return tonumber(string.sub(value, 1, space - 1)), string.sub(value, space + 1)
end

-- nest_scope returns the scope in FAIR of first-level key outer at
-- priority prio, and the prefix of its keys in NEST.
local function nest_scope(prio, outer)
  local name = fmt(#outer) .. ':' .. outer
  return fmt(prio) .. ' ' .. name, priority_rank(prio) .. name .. ' '
end

-- nest_first returns the first key in NEST under prefix, and its number.
local function nest_first(prefix)
  local first = redis.call('ZRANGE', NEST, '[' .. prefix, '(' .. prefix .. '~', 'BYLEX', 'LIMIT', 0, 1)[1]
  if not first then return nil end
  return first, tonumber(string.sub(first, #prefix + 1, #prefix + 16))
end

-- nest_made returns the number in NEST and the key of the scope's head
-- made last, if it is still in PRIO ("kSCOPE").
local function nest_made(scope)
  local made = redis.call('HGET', FAIR, 'k' .. scope)
  if not made then return nil end
  return tonumber(string.sub(made, 1, 16)), string.sub(made, 18)
end

-- nest_seq returns the number in NEST of a key of second-level key inner,
-- of step step, queued at the back of scope: fair_seq's rule among the
-- scope's second-level keys, whose keys start from the later of the
-- scope's first key (its head, or its first in NEST) and its last handed
-- out. A scope that holds no key starts a new epoch.
local function nest_seq(scope, prefix, inner, step)
  local field = 'i' .. scope .. ' ' .. inner
  local known = redis.call('HMGET', FAIR, 'u' .. scope, 'j' .. scope, 'h' .. scope, field)
  local v, e, stored = tonumber(known[1]) or ORIGIN, tonumber(known[2]) or 0, known[4]
  local first, at = nest_first(prefix)
  local made = nest_made(scope)
  if first or made then
    v = math.max(v, made or at)
  elseif (tonumber(known[3]) or 0) == 0 then
    e, v = redis.call('HINCRBY', FAIR, 'E', 1), ORIGIN
    redis.call('HSET', FAIR, 'j' .. scope, fmt(e), 'u' .. scope, fmt(v))
  end
  return fair_number(field, stored, e, v, step)
end

-- nest_left updates the state of the second-level key of key, numbered n
-- in scope, which left it: handed out if handed is set, else taken back.
local function nest_left(key, scope, n, handed)
  local step, inner = split_inner(inner_of[key] or redis.call('HGET', INNER, key))
  flow_left('i' .. scope .. ' ' .. inner, 'u' .. scope, n, step, handed)
end

-- fair_next returns the number in PRIO of key, at priority prio, whose
-- flow goes on with it: the flow's next, from the last number handed out
-- rather than the head of the priority, which may be another flow's that
-- is ahead of this one's turn (a nested first-level key whose head left
-- PRIO, and whose next key moves up from NEST).
local function fair_next(key, prio)
  local step, name = flow_step(flow_of[key] or redis.call('HGET', FLOWS, key))
  local field = 'f' .. fmt(prio) .. ' ' .. name
  local known = redis.call('HMGET', FAIR, 'v' .. fmt(prio), field, 'e' .. fmt(prio))
  return string.format('%016d', fair_number(field, known[2], tonumber(known[3]) or 0, tonumber(known[1]) or ORIGIN, step))
end

-- nest_head makes the first key of first-level key outer in NEST at
-- priority prio its head, numbered in PRIO by fair_seq, or by fair_next
-- if goes_on is set (the first-level key's previous head just left PRIO),
-- if it has none in PRIO; it returns whether it did.
local function nest_head(prio, outer, goes_on)
  local scope, prefix = nest_scope(prio, outer)
  if (tonumber(redis.call('HGET', FAIR, 'h' .. scope)) or 0) > 0 then return false end
  local first, at = nest_first(prefix)
  if not first then return false end
  local key = string.sub(first, #prefix + 17)
  -- Numbered while still in NEST, so that fair_seq does not find the
  -- queue empty, which would drop every scope's turns.
  local n
  if goes_on then n = fair_next(key, prio) else n = fair_seq(key, prio) end
  redis.call('ZREM', NEST, first)
  redis.call('ZADD', PRIO, -prio, n .. key)
  redis.call('HINCRBY', FAIR, 'h' .. scope, 1)
  redis.call('HSET', FAIR, 'k' .. scope, string.format('%016d', at) .. ' ' .. key)
  local _, _, since = queued_state(redis.call('HGET', STATE, key))
  redis.call('HSET', STATE, key, 'q' .. n .. fmt(prio) .. '/' .. fmt(since))
  signal()
  return true
end

-- nest_gone records that key, queued at priority prio with number n,
-- left PRIO (handed out if handed is set): if it was its scope's head
-- made last, its second-level key's turn is counted (or given back), and
-- if it was its first-level key's last key there, the next of that key
-- becomes its head. It returns whether one did.
local function nest_gone(key, prio, n, handed)
  if tonumber(n) < ORIGIN then return false end
  local outer = nested_flow(flow_of[key] or redis.call('HGET', FLOWS, key))
  if not outer then return false end
  local scope = nest_scope(prio, outer)
  local made, head = nest_made(scope)
  if head == key then
    redis.call('HDEL', FAIR, 'k' .. scope)
    nest_left(key, scope, made, handed)
  end
  if redis.call('HINCRBY', FAIR, 'h' .. scope, -1) <= 0 then redis.call('HDEL', FAIR, 'h' .. scope) end
  return nest_head(prio, outer, true)
end

-- nest_heads is nest_gone for each of keys, {key, priority, number}, and
-- returns how many heads it made.
local function nest_heads(keys, handed)
  local made = 0
  for _, entry in ipairs(keys) do
    if nest_gone(entry[1], entry[2], entry[3], handed) then made = made + 1 end
  end
  return made
end

-- nest_rank queues key at the back of priority prio, queued since since,
-- if it has a nested flow, flow: in NEST, and as its first-level key's
-- head if that has none, or if its head made last has the same number
-- and a later key (which goes back to NEST), as the flat queue breaks
-- ties. It returns whether it did.
local function nest_rank(key, since, prio, flow)
  local outer, aged = nested_flow(flow)
  if not outer then return false end
  local scope, prefix = nest_scope(prio, outer)
  local step, inner = split_inner(inner_of[key] or redis.call('HGET', INNER, key))
  -- An empty queue starts every turn afresh, as fair_seq does for a flat
  -- one; fair_seq, which runs once the key is in NEST, does not see it.
  local empty = redis.call('ZCARD', PRIO) == 0 and redis.call('ZCARD', NEST) == 0
  if GROUPED then empty = empty and redis.call('ZCARD', BLOCKED) == 0 end
  if empty then
    redis.call('DEL', FAIR)
    fair_v, fair_e = {}, {}
  end
  local n = nest_seq(scope, prefix, inner, step)
  redis.call('ZADD', NEST, 0, prefix .. string.format('%016d', n) .. key)
  if aged then redis.call('ZADD', AGES, since, key) end
  redis.call('HSET', STATE, key, 'q' .. string.format('%016d', n) .. fmt(prio) .. '/' .. fmt(since))
  local made, head = nest_made(scope)
  local preempted = false
  if head and made == n and key < head then
    local state = redis.call('HGET', STATE, head)
    local place, _, queued = queued_state(state)
    if redis.call('ZREM', PRIO, place .. head) == 1 then
      fair_left({{head, prio, place}}, false)
      redis.call('ZADD', NEST, 0, prefix .. string.format('%016d', made) .. head)
      redis.call('HSET', STATE, head, 'q' .. string.format('%016d', made) .. fmt(prio) .. '/' .. fmt(queued))
      redis.call('HDEL', FAIR, 'k' .. scope)
      if redis.call('HINCRBY', FAIR, 'h' .. scope, -1) <= 0 then redis.call('HDEL', FAIR, 'h' .. scope) end
      preempted = true
    end
  end
  nest_head(prio, outer, preempted)
  signal()
  return true
end

-- nest_take takes key, queued at priority prio with number n, out of
-- NEST, and reports whether it was there: handed out if handed is set,
-- else taken back.
local function nest_take(key, prio, n, handed)
  local outer = nested_flow(redis.call('HGET', FLOWS, key))
  if not outer then return false end
  local scope, prefix = nest_scope(prio, outer)
  if redis.call('ZREM', NEST, prefix .. n .. key) == 0 then return false end
  nest_left(key, scope, tonumber(n), handed)
  return true
end

-- sweep_nested is sweep_fair for a field of the states of nested
-- fairness, of kind kind and value value: appends it to gone if it can
-- change no number (and a scope's start with its epoch once the scope
-- holds no key).
local function sweep_nested(field, kind, value, gone)
  if kind == 105 then -- "i": a second-level key's state in a scope
    local space = string.find(field, ' ', 2, true)
    local colon = string.find(field, ':', space + 1, true)
    local scope = string.sub(field, 2, colon + tonumber(string.sub(field, space + 1, colon - 1)))
    local known = redis.call('HMGET', FAIR, 'u' .. scope, 'j' .. scope)
    local _, queued, after, epoch = fair_state(value, nil)
    if epoch ~= (tonumber(known[2]) or 0) or (queued == 0 and after <= (tonumber(known[1]) or ORIGIN)) then gone[#gone + 1] = field end
  elseif kind == 106 then -- "j": a scope's epoch
    local scope = string.sub(field, 2)
    local space = string.find(scope, ' ', 1, true)
    local prefix = priority_rank(tonumber(string.sub(scope, 1, space - 1))) .. string.sub(scope, space + 1) .. ' '
    if not redis.call('HGET', FAIR, 'h' .. scope) and not nest_first(prefix) then
      gone[#gone + 1], gone[#gone + 2] = field, 'u' .. scope
    end
  end
end

-- FAIR_SWEEP_AT is the size of FAIR past which each get call sweeps a
-- page of it.
local FAIR_SWEEP_AT = 1024
-- sweep_fair drops, once FAIR holds more than FAIR_SWEEP_AT fields, the
-- states of the flows that can change no number (see fair_seq): those of
-- an epoch before their priority's, and those with nothing queued whose
-- AFTER is no later than the number their priority's keys start from. It
-- reads a page of 64 fields a call, from the cursor in the field "c", so
-- that a queue that never empties keeps FAIR to about FAIR_SWEEP_AT
-- fields or its flows with keys queued, whichever is more.
local function sweep_fair()
  if redis.call('HLEN', FAIR) <= FAIR_SWEEP_AT then return end
  local page = redis.call('HSCAN', FAIR, redis.call('HGET', FAIR, 'c') or '0', 'COUNT', 64)
  local fields, starts, gone = page[2], {}, {}
  for i = 1, #fields, 2 do
    local field, kind = fields[i], string.byte(fields[i])
    if kind == 102 then -- "f"
      local prio = string.sub(field, 2, string.find(field, ' ', 2, true) - 1)
      local start = starts[prio]
      if not start then
        local known = redis.call('HMGET', FAIR, 'v' .. prio, 'e' .. prio)
        start = {tonumber(known[1]) or ORIGIN, tonumber(known[2]) or 0}
        starts[prio] = start
      end
      local _, queued, after, epoch = fair_state(fields[i + 1], nil)
      if epoch ~= start[2] or (queued == 0 and after <= start[1]) then gone[#gone + 1] = field end
    end
    if NESTED then sweep_nested(field, kind, fields[i + 1], gone) end
  end
  if #gone > 0 then redis.call('HDEL', FAIR, unpack(gone)) end
  redis.call('HSET', FAIR, 'c', page[1])
end

-- GROUP_SCAN bounds the keys of groups without a free slot that one get
-- call passes over, in rounds of the keys it still needs; the rest is
-- left to the next (the call signals while keys are ready).
local GROUP_SCAN = 64

-- split_group returns the group and limit of a GROUPS value.
local function split_group(value)
  local space = string.find(value, ' ', 1, true)
  return string.sub(value, space + 1), tonumber(string.sub(value, 1, space - 1))
end

-- group_limit returns group's limit: SetGroupLimit's, else stored, the
-- one a key's add gave it.
local function group_limit(group, stored)
  return tonumber(redis.call('HGET', LIMITS, group)) or stored
end

-- blocked_prefix starts the members of group in BLOCKED; its length
-- keeps a group's name from being another's prefix.
local function blocked_prefix(group)
  return fmt(#group) .. ':' .. group .. ' '
end

-- blocked_member returns the member of BLOCKED of a key of group at
-- priority prio, whose member in PRIO (number and key) is member.
local function blocked_member(group, prio, member)
  return blocked_prefix(group) .. priority_rank(prio) .. member
end

-- blocked_priority returns the priority of a RANK.
local function blocked_priority(rank)
  local n = tonumber(string.sub(rank, 2))
  if string.byte(rank) == 97 then return 9007199254740992 - n end -- "a"
  return -n
end

-- UNBLOCK_MAX bounds the keys one call of unblock puts back, so that a
-- call stays short; those left are put back by the calls that the ends
-- of the leases of the keys put back make, or by SetGroupLimit's next
-- call.
local UNBLOCK_MAX = 256

-- unblock puts back in PRIO, where they were, up to room of group's
-- blocked keys (UNBLOCK_MAX if room is nil or more), the first ones; an
-- aged one (see AGES) goes back to AGES too, but for one put at the
-- front, which is not aged. It returns how many it put back.
local function unblock(group, room)
  if room and room <= 0 then return 0 end
  local prefix = blocked_prefix(group)
  local members = redis.call('ZRANGE', BLOCKED, '[' .. prefix, '(' .. prefix .. '~', 'BYLEX', 'LIMIT', 0, math.min(room or UNBLOCK_MAX, UNBLOCK_MAX))
  if #members == 0 then return 0 end
  local ranked = {}
  for _, blocked in ipairs(members) do
    local prio = blocked_priority(string.sub(blocked, #prefix + 1, #prefix + 17))
    local member = string.sub(blocked, #prefix + 18)
    local key = string.sub(member, 17)
    ranked[#ranked + 1], ranked[#ranked + 2] = -prio, member
    local flow = redis.call('HGET', FLOWS, key) or ''
    if tonumber(string.sub(member, 1, 16)) >= ORIGIN then
      if string.byte(flow) == 97 then -- "a": aged
        local _, _, since = queued_state(redis.call('HGET', STATE, key))
        redis.call('ZADD', AGES, since, key)
      end
      local outer = NESTED and nested_flow(flow)
      if outer then redis.call('HINCRBY', FAIR, 'h' .. nest_scope(prio, outer), 1) end
    end
  end
  redis.call('ZADD', PRIO, unpack(ranked))
  redis.call('ZREM', BLOCKED, unpack(members))
  signal()
  return #members
end

-- fill_slots puts back as many of group's blocked keys as it has free
-- slots: stored is the limit a key's add gave it, leased the group's
-- leased count if the caller knows it.
local function fill_slots(group, stored, leased)
  if redis.call('ZCARD', BLOCKED) == 0 then return end
  local limit = group_limit(group, stored)
  if limit <= 0 then return unblock(group, nil) end
  unblock(group, limit - (leased or tonumber(redis.call('HGET', INFLIGHT, group)) or 0))
end

-- free_slot frees the slot of key's group, whose lease ends, and fills
-- the group's free slots.
local function free_slot(key)
  local value = redis.call('HGET', GROUPS, key)
  if not value then return end
  local group, stored = split_group(value)
  local leased = redis.call('HINCRBY', INFLIGHT, group, -1)
  if leased <= 0 then
    redis.call('HDEL', INFLIGHT, group)
    leased = 0
  end
  fill_slots(group, stored, leased)
end

-- slots caches, for one get call, the limit, leased count and keys
-- granted of each group it met (see admit).
local slots = {}

-- admit reports whether key, popped for a Get at priority prio with
-- number place in PRIO (false if it came from READY) and GROUPS value
-- value, may be handed out: if it has no group, or its group a free slot,
-- which it then takes (take_slots counts it); else the key goes to
-- BLOCKED.
local function admit(key, prio, place, value)
  if not value then return true end
  local group, stored = split_group(value)
  local slot = slots[group]
  if not slot then
    slot = {limit = group_limit(group, stored), used = tonumber(redis.call('HGET', INFLIGHT, group)) or 0, taken = 0}
    slots[group] = slot
  end
  if slot.limit > 0 and slot.used + slot.taken >= slot.limit then
    if not place then -- from READY or NEST: put at the front
      place = seq(true)
      local _, _, since = queued_state(redis.call('HGET', STATE, key))
      redis.call('HSET', STATE, key, 'q' .. place .. fmt(prio) .. '/' .. fmt(since))
    end
    redis.call('ZADD', BLOCKED, 0, blocked_member(group, prio, place .. key))
    return false
  end
  slot.taken = slot.taken + 1
  return true
end

-- admit_all keeps, of the keys popped[from] on that a get call popped
-- (with their priorities, prios, and numbers in PRIO, places), those that
-- admit lets it hand out, in their order, and appends those of PRIO to
-- left, for fair_left, and those of PRIO it passes over to gone; it
-- returns how many it passed over.
local function admit_all(popped, prios, places, from, left, gone)
  local n = #popped
  if n < from then return 0 end
  local groups = {}
  if GROUPED then groups = redis.call('HMGET', GROUPS, unpack(popped, from, n)) end
  local kept, passed = from - 1, 0
  for i = from, n do
    local key, prio, place = popped[i], prios[i], places[i]
    popped[i], prios[i], places[i] = nil, nil, nil
    local admitted = true
    if GROUPED then admitted = admit(key, prio, place, groups[i - from + 1]) end
    if admitted then
      kept = kept + 1
      popped[kept], prios[kept], places[kept] = key, prio, place
      if place then left[#left + 1] = {key, prio, place} end
    else
      passed = passed + 1
      if place then gone[#gone + 1] = {key, prio, place} end
    end
  end
  return passed
end

-- take_slots counts in INFLIGHT the slots admit took.
local function take_slots()
  for group, slot in pairs(slots) do
    if slot.taken > 0 then redis.call('HINCRBY', INFLIGHT, group, slot.taken) end
  end
end

-- end_lease forgets key's lease: its token, expiry and grant, and
-- frees its group's slot.
local function end_lease(key)
  local token = redis.call('HGET', TOKENS, key)
  if token then
    redis.call('HDEL', GRANTS, string.sub(token, string.find(token, ':', 1, true) + 1))
    redis.call('HDEL', TOKENS, key)
  end
  if GROUPED then free_slot(key) end
  redis.call('ZREM', LEASES, key)
  redis.call('ZREM', SINCE, key)
end

-- note_flows writes the flows, groups and second-level fairness keys an
-- add call was sent, each add's fifth, sixth and seventh values from
-- ARGV[from] on ("" for no group or second level), to FLOWS (and
-- flow_of), GROUPS and INNER (and inner_of), before any add runs, so that
-- each is known wherever its key goes.
local function note_flows(from, stride)
  local flows, groups, inners = {}, {}, {}
  for i = from, #ARGV, stride do
    local key, group, inner = ARGV[i], ARGV[i + 5], ARGV[i + 6]
    flows[#flows + 1], flows[#flows + 2] = key, ARGV[i + 4]
    flow_of[key] = ARGV[i + 4]
    if group ~= '' then groups[#groups + 1], groups[#groups + 2] = key, group end
    if inner ~= '' then
      inners[#inners + 1], inners[#inners + 2] = key, inner
      inner_of[key] = inner
    end
  end
  if #flows > 0 then redis.call('HSET', FLOWS, unpack(flows)) end
  if GROUPED and #groups > 0 then redis.call('HSET', GROUPS, unpack(groups)) end
  if #inners > 0 then redis.call('HSET', INNER, unpack(inners)) end
end

-- take_aged takes out of PRIO or NEST, for the get call, up to need
-- keys queued for longer than maxwait (ms) by now, the longest first, and
-- appends them and their priorities to popped and prios, and sets the
-- numbers of those of PRIO at the same indexes of places; it returns how
-- many it took out of PRIO. Only a key queued in PRIO is in AGES; the
-- check of its state keeps a stray entry from handing out a key that is
-- not queued.
local function take_aged(now, maxwait, need, popped, prios, places)
  if maxwait <= 0 then return 0 end
  local aged = redis.call('ZRANGE', AGES, '-inf', now - maxwait, 'BYSCORE', 'LIMIT', 0, need)
  if #aged == 0 then return 0 end
  local states, taken = redis.call('HMGET', STATE, unpack(aged)), 0
  for i, key in ipairs(aged) do
    if states[i] and string.byte(states[i]) == QUEUED then
      local place, prio = queued_state(states[i])
      if redis.call('ZREM', PRIO, place .. key) == 1 then
        popped[#popped + 1], prios[#prios + 1], taken = key, prio, taken + 1
        places[#popped] = place
      elseif NESTED and nest_take(key, prio, place, true) then
        -- Out of NEST, it has no number in PRIO.
        popped[#popped + 1], prios[#prios + 1] = key, prio
      end
    end
  end
  redis.call('ZREM', AGES, unpack(aged))
  return taken
end

-- forget_flows drops the flows and groups of keys, idle now, but those of
-- keys that wait in DELAYED still, whose flow and group promote needs.
local function forget_flows(keys)
  local delayed, gone = redis.call('ZMSCORE', DELAYED, unpack(keys)), {}
  for i, key in ipairs(keys) do
    if not delayed[i] then gone[#gone + 1] = key end
  end
  if #gone > 0 then
    redis.call('HDEL', FLOWS, unpack(gone))
    if GROUPED then redis.call('HDEL', GROUPS, unpack(gone)) end
    if NESTED then redis.call('HDEL', INNER, unpack(gone)) end
  end
end

-- rank is enqueue at priority prio, in PRIO unless prio is 0 on a queue
-- that is not sorted.
local function rank(key, since, prio, front)
  local n, aged = nil, false
  if SORTED and not front then
    if NESTED then
      flow_of[key] = flow_of[key] or redis.call('HGET', FLOWS, key)
      if nest_rank(key, since, prio, flow_of[key]) then return end
    end
    n, aged = fair_seq(key, prio)
  end
  if not n then
    -- A sorted queue puts a key at the front of priority 0 in PRIO too,
    -- so that each queued key has a number: one blocked for a slot (see
    -- admit) keeps its place.
    if prio == 0 and not SORTED then return enqueue(key, since, front) end
    n = seq(front)
  end
  redis.call('ZADD', PRIO, -prio, n .. key)
  if aged then redis.call('ZADD', AGES, since, key) end
  redis.call('HSET', STATE, key, 'q' .. n .. fmt(prio) .. '/' .. fmt(since))
  signal()
end

-- unqueue_grouped takes key, queued at priority prio with number place,
-- out of BLOCKED, unless it was in PRIO (ranked): then it may have been
-- put back for a free slot, which it leaves to the group's blocked keys.
local function unqueue_grouped(key, prio, place, ranked)
  local value = redis.call('HGET', GROUPS, key)
  if not value then return end
  local group, stored = split_group(value)
  if ranked then
    fill_slots(group, stored)
  else
    redis.call('ZREM', BLOCKED, blocked_member(group, prio, place .. key))
  end
end

-- unqueue_sorted is unqueue's part on a sorted queue, of key, queued at
-- priority prio with number place, in PRIO if ranked is set, else in NEST
-- or BLOCKED.
local function unqueue_sorted(key, prio, place, ranked)
  redis.call('ZREM', AGES, key)
  if NESTED and not ranked and nest_take(key, prio, place, false) then return end
  if GROUPED then unqueue_grouped(key, prio, place, ranked) end
  fair_left({{key, prio, place}}, false)
  if NESTED and ranked then nest_gone(key, prio, place, false) end
end

-- unqueue takes key, queued with state, out of READY, PRIO, NEST or
-- BLOCKED.
local function unqueue(key, state)
  local place, prio = queued_state(state)
  if place then
    local ranked = redis.call('ZREM', PRIO, place .. key)
    if SORTED then unqueue_sorted(key, prio, place, ranked == 1) end
  else
    redis.call('LREM', READY, 1, key)
  end
end

-- park_fields splits park, a parked key's state or a record of PARKS,
-- "wNUM PRIO/MID/UNTIL|EVENTS": it returns NUM (16 digits), PRIO, MID (a
-- parked key's deadline, a record's token), UNTIL and EVENTS.
local function park_fields(park)
  local slash = string.find(park, '/', 18, true)
  local ends_at = string.find(park, '/', slash + 1, true)
  local bar = string.find(park, '|', ends_at, true)
  return string.sub(park, 2, 17), tonumber(string.sub(park, 18, slash - 1)),
    string.sub(park, slash + 1, ends_at - 1), tonumber(string.sub(park, ends_at + 1, bar - 1)),
    string.sub(park, bar + 1)
end

-- unpark forgets key's park, park (a parked key's state, or a record of
-- PARKS), and returns the priority to queue it at and when its backoff
-- ends; the caller sets its state or drops the record. A parked key's
-- deadline's add is taken back, unless an earlier add waits in its place.
local function unpark(key, park)
  local n, prio, mid, ends, events = park_fields(park)
  local members, pos = {}, 1
  while pos <= #events do
    local colon = string.find(events, ':', pos, true)
    local stop = colon + tonumber(string.sub(events, pos, colon - 1))
    members[#members + 1] = string.sub(events, pos, stop) .. n .. key
    pos = stop + 1
  end
  if #members > 0 then redis.call('ZREM', WAITERS, unpack(members)) end
  redis.call('ZREM', PARKED, key)
  local deadline = tonumber(mid)
  if deadline and tonumber(redis.call('ZSCORE', DELAYED, key)) == deadline then
    redis.call('ZREM', DELAYED, key)
    redis.call('HDEL', DPRIO, key)
  end
  return prio, ends
end

-- MAX_LINKS is how many links LINKS keeps for one hand-out of a key
-- (workqueue.MaxTraceLinks); the others are counted as dropped.
local MAX_LINKS = 8

-- links_merge returns the links value (see LINKS) that is value (false:
-- none) with the links of more (false: none) after its own, those beyond
-- MAX_LINKS counted as dropped.
local function links_merge(value, more)
  if not more then return value end
  if not value then value = '0 0' end
  local count, dropped, body = string.match(value, '^(%d+) (%d+)(.*)$')
  local _, more_dropped, more_body = string.match(more, '^(%d+) (%d+)(.*)$')
  count, dropped = tonumber(count), tonumber(dropped) + tonumber(more_dropped)
  for link in string.gmatch(more_body, '\n[^\n]*') do
    if count < MAX_LINKS then
      count, body = count + 1, body .. link
    else
      dropped = dropped + 1
    end
  end
  return fmt(count) .. ' ' .. fmt(dropped) .. body
end

-- note_link links an add of key, with link ("TRACEPARENT TRACESTATE"; ""
-- for none), to the key's next hand-out.
local function note_link(key, link)
  if link == '' then return end
  local field = 'n' .. key
  redis.call('HSET', LINKS, field, links_merge(redis.call('HGET', LINKS, field), '1 0\n' .. link))
end

-- carry_served carries the links of key's hand-out being processed to its
-- next hand-out, as a retry or a park does.
local function carry_served(key)
  local served = redis.call('HGET', LINKS, 's' .. key)
  if not served then return end
  local field = 'n' .. key
  redis.call('HSET', LINKS, field, links_merge(redis.call('HGET', LINKS, field), served))
  redis.call('HDEL', LINKS, 's' .. key)
end

-- being_processed reports whether state is that of a key handed out.
local function being_processed(state)
  local kind = state and string.byte(state)
  return kind == PROCESSING or kind == MARKED
end

-- add_all queues each key of added at priority 0, in order, given states,
-- their states as read before (false: none), none of them parked, and
-- returns an outcome for each, and READY's length if it pushed keys
-- there: outcome 1 if it was idle, 2 if it is being
-- processed and is now marked to be queued again at Done, 0 if it was
-- already queued or marked. A key queued or marked at a priority below 0
-- is raised to 0: a queued one goes behind the keys queued at 0. The
-- writes of all the adds are gathered into one command per key of the
-- queue, and the state each add leaves is kept for a later add of the
-- same key. A parked key is added by add_at (it ends the park), through
-- fn_addopts. add_at is the same at any priority; add_all is apart so
-- that fn_add, of priority 0 alone on a queue that is not sorted, runs
-- none of PRIO's commands.
local function add_all(added, states, now)
  local outcomes, pushed, written, left, adds = {}, {}, {}, {}, 0
  local at = fmt(now)
  for i, key in ipairs(added) do
    local state = left[key]
    if state == nil then state = states[i] end
    local kind = state and string.byte(state)
    local outcome = 0
    if not state then
      pushed[#pushed + 1] = key
      written[#written + 1], written[#written + 2] = key, at
      left[key] = at
      adds, outcome = adds + 1, 1
    elseif kind == PROCESSING then
      written[#written + 1], written[#written + 2] = key, 'd'
      left[key] = 'd'
      adds, outcome = adds + 1, 2
    elseif kind == MARKED then
      if state_priority(state) < 0 then
        written[#written + 1], written[#written + 2] = key, 'd'
        left[key] = 'd'
      end
    else
      local place, prio, since = queued_state(state)
      if prio < 0 then
        redis.call('ZREM', PRIO, place .. key)
        pushed[#pushed + 1] = key
        written[#written + 1], written[#written + 2] = key, since
        left[key] = fmt(since)
      end
    end
    outcomes[i] = outcome
  end
  local length
  if #pushed > 0 then
    length = redis.call('RPUSH', READY, unpack(pushed))
    signal()
  end
  if #written > 0 then redis.call('HSET', STATE, unpack(written)) end
  if adds > 0 then redis.call('INCRBY', ADDS, fmt(adds)) end
  return outcomes, length
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
-- key already waiting keeps the earlier ready time, or takes at if
-- rescheduled is set, and the higher priority. It signals a new first
-- ready time, so that an idle process sleeps until then instead of until
-- its heartbeat.
local function delay(key, at, prio, rescheduled)
  local waited = tonumber(redis.call('HGET', DPRIO, key))
  if waited then
    prio = math.max(prio, waited)
  elseif prio < 0 and redis.call('ZSCORE', DELAYED, key) then
    prio = 0 -- it waits already, at priority 0
  end
  if rescheduled then
    redis.call('ZADD', DELAYED, at, key)
  else
    redis.call('ZADD', DELAYED, 'LT', at, key)
  end
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
-- prio, whatever the delay; else with a delay it waits (as delay does,
-- rescheduled if set); without one it is added, its waiting add taken
-- back and that add's priority kept if higher. Returns add's outcomes, or
-- 3 if it waits.
local function add_once(key, now, prio, wait, rescheduled)
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
    delay(key, now + wait, prio, rescheduled)
    return 3
  end
  local waited, waits = take_delayed(key)
  if waits then prio = math.max(prio, waited) end
  return add_at(key, now, prio, state or false)
end

-- pending_token returns the token of the lease that asked for the park
-- record, a record of PARKS.
local function pending_token(record)
  local _, _, token = park_fields(record)
  return token
end

-- end_pending drops the park that key's holder asked for, numbered n (any
-- if n is nil), before its Done, and reports whether it still counted:
-- whether state, key's state, is processing and the park's lease is key's.
-- If it counted and mark is set, the key is marked to be queued again at
-- Done, at its priority; or, if backoff is set and the park's backoff
-- ends after now, it waits in DELAYED until then.
local function end_pending(key, n, state, mark, backoff, now)
  local record = redis.call('HGET', PARKS, key)
  if not record or (n and string.sub(record, 2, 17) ~= n) then return false end
  local _, ends = unpark(key, record)
  redis.call('HDEL', PARKS, key)
  local live = state and string.byte(state) == PROCESSING and
    redis.call('HGET', TOKENS, key) == pending_token(record)
  if live and mark then
    if backoff and ends > now then
      delay(key, ends, state_priority(state))
    else
      redis.call('HSET', STATE, key, 'd' .. string.sub(state, 2))
    end
  end
  return live
end

-- wake_park ends key's park, if it is numbered n (any if n is nil), and
-- reports whether it did: a key parked since its Done is queued at the
-- back of its priority, and one still processed is marked to be queued
-- again at its Done; with backoff set, a park whose backoff ends after
-- now has the key wait in DELAYED until then instead.
local function wake_park(key, n, now, backoff)
  local state = redis.call('HGET', STATE, key)
  if state and string.byte(state) == WAITING then
    if n and string.sub(state, 2, 17) ~= n then return false end
    local prio, ends = unpark(key, state)
    if backoff and ends > now then
      redis.call('HDEL', STATE, key)
      delay(key, ends, prio)
    else
      rank(key, now, prio, false)
    end
    return true
  end
  return end_pending(key, n, state, true, backoff, now)
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

-- promote_due adds the delayed keys that are due, so that every depth a
-- function reports, and Len, counts them as queued. Whichever process
-- runs it first does it, once, because a function runs alone. A bounded
-- batch keeps one call short; what is left is promoted by the next call,
-- and counted by the depth of this one (see due_waiting). Returns whether
-- it left some (its batch was full). A due key that is parked (its
-- deadline, or an add after a delay) ends its park.
local BATCH, BATCH_ARG = 256, '256'
local function promote_due(now)
  local due = redis.call('ZRANGE', DELAYED, '-inf', fmt(now), 'BYSCORE', 'LIMIT', '0', BATCH_ARG)
  if #due > 0 then
    local states = redis.call('HMGET', STATE, unpack(due))
    local prios = redis.call('HMGET', DPRIO, unpack(due))
    redis.call('ZREM', DELAYED, unpack(due))
    redis.call('HDEL', DPRIO, unpack(due))
    for i, key in ipairs(due) do
      local state = states[i]
      if state and string.byte(state) == WAITING then
        unpark(key, state)
        state = false
      end
      queue_at(key, now, tonumber(prios[i] or 0), state)
    end
  end
  if #due == BATCH then due_at = now end
  return #due == BATCH
end

-- promote is promote_due, then queues again, at the front of their
-- priority, the keys whose lease expired (their holder died or lost Redis
-- for longer than the lease), a bounded batch of them too. Returns how
-- many leases were reclaimed.
local function promote(now)
  promote_due(now)
  local expired = redis.call('ZRANGE', LEASES, '-inf', fmt(now), 'BYSCORE', 'LIMIT', '0', BATCH_ARG)
  for i = #expired, 1, -1 do
    local key = expired[i]
    local state = redis.call('HGET', STATE, key)
    end_lease(key)
    rank(key, now, state and state_priority(state) or 0, true)
  end
  return #expired
end

-- begin binds the keys and arguments of a call, and starts the state
-- that helpers keep for one call afresh: a library's locals outlive the
-- call, unlike those of a script run by EVAL. Each key is the call's one
-- KEYS, the prefix of the queue's keys, and its name in lower case. The
-- prefix holds the queue's hash tag, so every key is in its slot, the one
-- the call is routed to on a cluster: a call is sent one key rather than
-- the 29, each of which costs the server about as much as a redis.call.
-- prefix is the prefix whose keys are bound: a call on the same queue as
-- the last one binds none anew.
local prefix
local function begin(keys, args)
  local p = keys[1]
  if p ~= prefix then
    prefix = p
    READY, STATE, DELAYED, LEASES, TOKENS, FENCE, SIGNAL =
      p .. 'ready', p .. 'state', p .. 'delayed', p .. 'leases', p .. 'tokens', p .. 'fence', p .. 'signal'
    FAILS, BUCKET, GRANTS, SINCE, ADDS, DPRIO, SEQ =
      p .. 'fails', p .. 'bucket', p .. 'grants', p .. 'since', p .. 'adds', p .. 'dprio', p .. 'seq'
    PRIO, PARKS, WAITERS, PARKED, FIRED, FLOWS, FAIR =
      p .. 'prio', p .. 'parks', p .. 'waiters', p .. 'parked', p .. 'fired', p .. 'flows', p .. 'fair'
    AGES, GROUPS, INFLIGHT, BLOCKED, LIMITS, INNER, NEST =
      p .. 'ages', p .. 'groups', p .. 'inflight', p .. 'blocked', p .. 'limits', p .. 'inner', p .. 'nest'
    LINKS =
      p .. 'links'
  end
  ARGV = args
  local features = tonumber(args[1])
  SORTED, GROUPED, NESTED = features % 2 == 1, features % 4 >= 2, features % 8 >= 4
  TRACED = features % 16 >= 8
  next_seq, last_seq, signalled, due_at = 1, 0, false, false
  -- Only the helpers of a sorted queue read these.
  if SORTED then flow_of, fair_v, fair_e, inner_of, slots = {}, {}, {}, {}, {} end
end

-- Every function below is called with one key, the prefix of the keys
-- of one queue (or one partition of it), and the queue's features as
-- ARGV[1]: 1 sorted (Fairness, MaxWait or GroupLimits: every key in
-- PRIO with a flow), plus 2 with GroupLimits, plus 4 with two Fairness
-- levels, plus 8 traced (see LINKS). Its header says what follows.

-- add: ARGV[2] now, then one key, delay (ms) pair per add at priority 0
-- (on a traced queue a triple: key, delay and link, see note_link),
-- run in order after promoting the due keys (see promote_due): Add when delay <= 0, else AddAfter, the earlier of two
-- ready times winning. For a queue that is not sorted, whose adds at
-- priority 0 need none of PRIO's work; addopts takes every other add.
-- Reply: {depth, outcome of each add}: as add_all's, or 3 for a key put
-- to wait; 4, for a parked key, is no add: the caller adds it again with
-- addopts. The adds are all 4 if one key is parked, and nothing is
-- changed, so that addopts makes them take effect together.
local function fn_add(keys, args)
  begin(keys, args)
  local now = clock(ARGV[2])
  promote_due(now)
  local reply = {0}
  local added = {}
  local stride = TRACED and 3 or 2
  for i = 3, #ARGV, stride do added[#added + 1] = ARGV[i] end
  local states = redis.call('HMGET', STATE, unpack(added))
  for _, state in ipairs(states) do
    if state and string.byte(state) == WAITING then
      for i = 3, #ARGV, stride do reply[#reply + 1] = 4 end
      reply[1] = depth()
      return reply
    end
  end
  -- The adds without a delay, gathered (add_all), and the delayed ones
  -- apart: delay touches neither the states nor READY.
  local now_keys, now_states, now_at, m = {}, {}, {}, 0
  for i = 3, #ARGV, stride do
    local n = (i - 3) / stride + 1
    if tonumber(ARGV[i + 1]) <= 0 then
      m = m + 1
      now_keys[m], now_states[m], now_at[m] = ARGV[i], states[n], n
    else
      delay(ARGV[i], now + tonumber(ARGV[i + 1]), 0)
      reply[n + 1] = 3
    end
  end
  local length
  if m > 0 then
    local outcomes
    outcomes, length = add_all(now_keys, now_states, now)
    for i, outcome in ipairs(outcomes) do reply[now_at[i] + 1] = outcome end
  end
  if TRACED then
    for i = 3, #ARGV, 3 do
      local n = (i - 3) / 3 + 1
      if tonumber(ARGV[i + 1]) > 0 and being_processed(states[n]) then carry_served(ARGV[i]) end
      note_link(ARGV[i], ARGV[i + 2])
    end
  end
  -- A queue that is not sorted has no blocked or nested keys to count.
  if length then reply[1] = length + redis.call('ZCARD', PRIO) + due_waiting() else reply[1] = depth() end
  return reply
end

-- addopts: ARGV[2] now, ARGV[3..6] the rate limit (base and max in ms,
-- interval in ms between tokens or 0 for no bucket, burst), then per add,
-- run in order after promoting the due keys (see promote_due): key,
-- delay (ms), priority and rule, and on a sorted queue
-- three more, the key's "STEP FLOW" for FLOWS, "LIMIT GROUP" for GROUPS
-- and "STEP NAME" for INNER ("" for none), and on a traced queue one
-- more, the link (see note_link). Rule 0 is Add and AddAfter:
-- added at once when delay <= 0, else after it, the earlier of two ready
-- times winning; rule 1 is AddWithOpts's add_once. Rule plus 2 counts a
-- failure first and delays by the shorter of the delay, when positive,
-- and rate_limit's; rule 1 plus 4 makes the delay replace the one the key
-- waits for (Reschedule).
-- Reply: {depth, outcome of each add}: as add's, or 3 for a key put to
-- wait.
local function fn_addopts(keys, args)
  begin(keys, args)
  local now = clock(ARGV[2])
  promote_due(now)
  local base, max, interval, burst = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
  local reply = {0}
  local stride = 4
  if SORTED then stride = 7 end
  if TRACED then stride = stride + 1 end
  if SORTED then note_flows(7, stride) end
  for i = 7, #ARGV, stride do
    local key, wait, prio, rule = ARGV[i], tonumber(ARGV[i + 1]), tonumber(ARGV[i + 2]), tonumber(ARGV[i + 3])
    if TRACED then
      if (wait > 0 or rule % 4 >= 2) and being_processed(redis.call('HGET', STATE, key)) then carry_served(key) end
      note_link(key, ARGV[i + stride - 1])
    end
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
end

-- get: ARGV[2] now, ARGV[3] lease (ms), ARGV[4] MaxWait (ms, 0 for none),
-- then one nonce per waiting Get. First promotes (see promote). Hands
-- each Get the next ready key (with MaxWait, the keys queued for longer
-- than it first, the longest first; then the highest priority first,
-- first in first out within one; with GroupLimits, of a group with a free
-- slot), under a lease of its own with a fencing token: the next number
-- of FENCE and that Get's random nonce. The nonce keeps a token unique
-- even if Redis restarts from a file that lost the last INCRs (AOF
-- everysec, or a replica promoted): a holder from before the restart
-- cannot end a lease granted after it.
-- Reply: {depth (blocked keys included), reclaimed, wait, grant of each
-- Get}: a grant is {key, token, queued for (ms), priority}, and on a
-- traced queue its links (see LINKS; "" for none), or 0 when
-- nothing was ready for that Get. wait is the time until the next delayed
-- key is due, at least 1 (more may be due than one promote moves), or -1
-- if none waits; it is 0 when every Get got a key. Lease expiry is no
-- reason to wake: the heartbeat finds expired leases, where every idle
-- Get waking at each expiry time would run this function about every two
-- thirds of a lease.
--
-- The keys popped are distinct (a key is queued once), so the writes of
-- all the grants are gathered into one command per hash and sorted set.
local function fn_get(keys, args)
  begin(keys, args)
  local now, lease, maxwait = clock(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
  local reclaimed = promote(now)
  local nonces = {}
  for i = 5, #ARGV do nonces[#nonces + 1] = ARGV[i] end
  -- A Get whose nonce has a grant already ran this function and lost the
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
  -- READY's, then PRIO's below 0 (low). With GroupLimits, a key whose
  -- group has no free slot is passed over (see admit), and more are popped
  -- in its place, up to GROUP_SCAN in all; with two Fairness levels one is
  -- popped a round, as the head that moves up may come before the others.
  -- A queue that is not sorted pops in one round.
  local popped, prios = {}, {}
  if need > 0 then
    -- left are the keys handed out from PRIO, {key, priority, number}, for
    -- the turns of their flows, gone those passed over, and places the
    -- numbers in PRIO of the keys popped (none for those of READY).
    local places, scan, wanted = {}, 0, need
    repeat
      local from, want, left, gone = #popped + 1, need - #popped, {}, {}
      -- round is how many keys are to be popped once this round ends.
      local round = need
      if NESTED then round = #popped + 1 end
      if SORTED and ranked > 0 then ranked = ranked - take_aged(now, maxwait, want, popped, prios, places) end
      local taken = #popped
      if ranked > 0 and taken < round then
        local high = redis.call('ZRANGE', PRIO, '-inf', '(0', 'BYSCORE', 'LIMIT', 0, round - taken, 'WITHSCORES')
        for i = 1, #high, 2 do popped[#popped + 1], prios[#prios + 1] = high[i], -tonumber(high[i + 1]) end
        if #popped > taken then redis.call('ZREM', PRIO, unpack(popped, taken + 1)) end
      end
      for i = taken + 1, #popped do
        places[i] = string.sub(popped[i], 1, 16)
        popped[i] = string.sub(popped[i], 17)
      end
      ranked = ranked - (#popped - taken)
      if #popped < round then
        for _, key in ipairs(redis.call('LPOP', READY, fmt(round - #popped)) or {}) do
          popped[#popped + 1], prios[#prios + 1] = key, 0
        end
      end
      if ranked > 0 and #popped < round then
        local low = redis.call('ZPOPMIN', PRIO, round - #popped)
        for i = 1, #low, 2 do
          popped[#popped + 1], prios[#prios + 1] = string.sub(low[i], 17), -tonumber(low[i + 1])
          places[#popped] = string.sub(low[i], 1, 16)
        end
        ranked = ranked - #low / 2
      end
      local passed, heads, more = 0, 0, false
      if SORTED then
        if maxwait > 0 and #popped > taken then redis.call('ZREM', AGES, unpack(popped, taken + 1)) end
        passed = admit_all(popped, prios, places, from, left, gone)
        fair_left(left, true)
        -- The heads of nested fairness keys that left PRIO make way for
        -- their next keys, which this call may hand out too.
        if NESTED then
          heads = nest_heads(left, true) + nest_heads(gone, false)
          more = #popped >= from and #popped < wanted
        end
        ranked = ranked + heads
        scan = scan + passed
      end
    until #popped >= wanted or (passed == 0 and heads == 0 and not more) or scan >= GROUP_SCAN
    if GROUPED then take_slots() end
    if SORTED then sweep_fair() end
  end
  local since, fence = {}, 0
  if #popped > 0 then
    since = redis.call('HMGET', STATE, unpack(popped))
    fence = redis.call('INCRBY', FENCE, fmt(#popped)) - #popped
  end
  local reply = {0, reclaimed, 0}
  local states, tokens, grants, leases, starts, handed = {}, {}, {}, {}, {}, {}
  local j, at, expiry = 0, fmt(now), fmt(now + lease)
  for i, nonce in ipairs(nonces) do
    if granted[i] then
      -- Its grant stands if the key's lease is still the nonce's (see
      -- leased_to, whose token this needs too).
      local token = redis.call('HGET', TOKENS, granted[i])
      if token and string.sub(token, -#nonce - 1) == ':' .. nonce then
        local state = redis.call('HGET', STATE, granted[i])
        reply[#reply + 1] = {granted[i], token, 0, state and state_priority(state) or 0}
        if TRACED then reply[#reply][5] = redis.call('HGET', LINKS, 's' .. granted[i]) or '' end
      else
        -- The Get was cancelled first (see cancel): it takes nothing.
        redis.call('HDEL', GRANTS, nonce)
        reply[#reply + 1] = 0
      end
    elseif j < #popped then
      j = j + 1
      local key, prio = popped[j], prios[j]
      local _, _, queued = queued_state(since[j])
      local token = fmt(fence + j) .. ':' .. nonce
      states[#states + 1], states[#states + 2] = key, tagged('p', prio)
      tokens[#tokens + 1], tokens[#tokens + 2] = key, token
      grants[#grants + 1], grants[#grants + 2] = nonce, key
      leases[#leases + 1], leases[#leases + 2] = expiry, key
      starts[#starts + 1], starts[#starts + 2] = at, key
      reply[#reply + 1] = {key, token, now - queued, prio}
      if TRACED then handed[j] = reply[#reply] end
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
    if TRACED then
      -- The next links become those of the hand-out; a key without any
      -- drops those of an earlier hand-out whose lease expired.
      local fields = {}
      for i = 1, j do fields[2 * i - 1], fields[2 * i] = 'n' .. popped[i], 's' .. popped[i] end
      local links = redis.call('HMGET', LINKS, unpack(fields))
      local served, gone = {}, {}
      for i = 1, j do
        local nextl, stale = links[2 * i - 1], links[2 * i]
        if nextl then
          gone[#gone + 1] = fields[2 * i - 1]
          served[#served + 1], served[#served + 2] = fields[2 * i], nextl
        elseif stale then
          gone[#gone + 1] = fields[2 * i]
        end
        handed[i][5] = nextl or ''
      end
      if #gone > 0 then redis.call('HDEL', LINKS, unpack(gone)) end
      if #served > 0 then redis.call('HSET', LINKS, unpack(served)) end
    end
  end
  if j < need then
    local wait = -1
    local delayed = redis.call('ZRANGE', DELAYED, '0', '0', 'WITHSCORES')
    if delayed[2] then wait = math.max(math.ceil(tonumber(delayed[2]) - now), 1) end
    reply[3] = wait
  end
  local left = redis.call('LLEN', READY) + ranked
  if left > 0 then signal() end
  if GROUPED then left = left + redis.call('ZCARD', BLOCKED) end
  if NESTED then left = left + redis.call('ZCARD', NEST) end
  reply[1] = left + due_waiting()
  return reply
end

-- done: ARGV[2] now, then one key, token pair per Done, run in order.
-- Ends each lease that its token still holds, freeing its group's slot; a
-- key marked while it was processed is queued again at the back of the
-- priority of its mark (by fair_seq's rule on a sorted queue), and one
-- left idle loses its flow.
-- Reply: {-1, outcome of each Done}: 1 queued again, 0 idle, -1 the
-- lease was lost (it expired and was reclaimed, or an earlier Done of
-- this call ended it): nothing changed for that key. The -1 stands for a
-- depth it does not report, which would cost it two commands and a
-- promote_due: the worker's next Get reports one.
--
-- The reads and the writes of all the Dones are gathered into one command
-- per hash and sorted set; ended keeps a key's second Done in one call
-- from reading what its first changed.
local function fn_done(keys, args)
  begin(keys, args)
  local now = clock(ARGV[2])
  local dones = {}
  for i = 3, #ARGV, 2 do dones[#dones + 1] = ARGV[i] end
  local tokens = redis.call('HMGET', TOKENS, unpack(dones))
  local states = redis.call('HMGET', STATE, unpack(dones))
  local reply = {0}
  local ended, forget, grants, requeue, ranked, queued, idle, fairly = {}, {}, {}, {}, {}, {}, {}, {}
  for i, key in ipairs(dones) do
    local token = ARGV[2 * i + 2]
    if ended[key] or tokens[i] ~= token then
      reply[#reply + 1] = -1
    else
      ended[key] = true
      forget[#forget + 1] = key
      if GROUPED then free_slot(key) end
      grants[#grants + 1] = string.sub(token, string.find(token, ':', 1, true) + 1)
      if states[i] and string.byte(states[i]) == MARKED then
        local prio = state_priority(states[i])
        if SORTED then
          fairly[#fairly + 1] = {key, prio}
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
    if TRACED then
      local served = {}
      for i, key in ipairs(forget) do served[i] = 's' .. key end
      redis.call('HDEL', LINKS, unpack(served))
    end
  end
  if #requeue > 0 then redis.call('RPUSH', READY, unpack(requeue)) end
  if #ranked > 0 then redis.call('ZADD', PRIO, unpack(ranked)) end
  if #queued > 0 then
    redis.call('HSET', STATE, unpack(queued))
    signal()
  end
  for _, again in ipairs(fairly) do rank(again[1], now, again[2], false) end
  if #idle > 0 then
    redis.call('HDEL', STATE, unpack(idle))
    if SORTED then forget_flows(idle) end
  end
  reply[1] = -1
  return reply
end

-- step: ARGV[2] now, ARGV[3] lease (ms), ARGV[4] MaxWait (ms, 0 for
-- none), ARGV[5] the number n of Dones, then n key, token pairs, as
-- done's, then one nonce per waiting Get (at least one), as get's. Runs
-- the Dones as done does, then the Gets as get does, at one now: a
-- handle's concurrent Dones and Gets share one call, and a Get may be
-- handed a key that a Done of the call queued again.
-- Reply: get's reply, then one outcome per Done, as done's.
local function fn_step(keys, args)
  local now = clock(args[2])
  local n = tonumber(args[5])
  local dones = {args[1], now}
  for i = 6, 5 + 2 * n do dones[#dones + 1] = args[i] end
  local outcomes = fn_done(keys, dones)
  local gets = {args[1], now, args[3], args[4]}
  for i = 6 + 2 * n, #args do gets[#gets + 1] = args[i] end
  local reply = fn_get(keys, gets)
  for i = 2, #outcomes do reply[#reply + 1] = outcomes[i] end
  return reply
end

-- extend: ARGV[2] now, ARGV[3] lease (ms), then key, token pairs.
-- Promotes the due keys (see promote_due), so that the depth it reports
-- counts them while every worker is busy and no Get looks, and extends
-- each lease that its token still holds.
-- Reply: {depth, the keys whose lease was lost, ...}.
local function fn_extend(keys, args)
  begin(keys, args)
  local now, lease = clock(ARGV[2]), tonumber(ARGV[3])
  promote_due(now)
  local lost = {0}
  for i = 4, #ARGV, 2 do
    if redis.call('HGET', TOKENS, ARGV[i]) == ARGV[i + 1] then
      redis.call('ZADD', LEASES, 'XX', now + lease, ARGV[i])
    else
      lost[#lost + 1] = ARGV[i]
    end
  end
  lost[1] = depth()
  return lost
end

-- signal: no more ARGV. Puts back a wakeup token that a process took
-- while none of its workers was waiting any more, so that another
-- process's worker gets it.
-- Reply: 1.
local function fn_signal(keys, args)
  begin(keys, args)
  signal()
  return 1
end

-- release: ARGV[2] now, ARGV[3] key, ARGV[4] token. Gives a lease back
-- unused: the key goes to the front of its priority, as a reclaimed one
-- does, a mark to queue it again included. For a Get that took a key its
-- caller will never see.
-- Reply: 1 if the lease was still the token's, else 0.
local function fn_release(keys, args)
  begin(keys, args)
  local now, key = clock(ARGV[2]), ARGV[3]
  if redis.call('HGET', TOKENS, key) ~= ARGV[4] then return 0 end
  local state = redis.call('HGET', STATE, key)
  end_lease(key)
  rank(key, now, state and state_priority(state) or 0, true)
  if TRACED then carry_served(key) end
  return 1
end

-- cancel: ARGV[2] nonce. For a Get whose context ended while its get
-- call, sent with nonce, had not answered: whichever of the two runs
-- first wins. If get ran and leased a key for nonce, the Get is to hand
-- it out; else nonce is marked in GRANTS with a value no lease of nonce
-- has, so that get grants nothing to it when it runs.
-- Reply: {key} if get leased key to nonce, else 0.
local function fn_cancel(keys, args)
  begin(keys, args)
  local nonce = ARGV[2]
  local key = redis.call('HGET', GRANTS, nonce)
  if key then
    if leased_to(key, nonce) then return {key} end
    return 0
  end
  redis.call('HSET', GRANTS, nonce, '')
  return 0
end

-- remove: ARGV[2] key, ARGV[3] now. First promotes the due keys (see
-- promote_due). Remove: forgets key's failures and takes back what
-- the queue holds of it: its waiting add, its place in the queue, its
-- park, or its mark to be queued again at Done or the park its holder
-- asked for (it stays leased to its holder), and its flow if it is left
-- idle.
-- Reply: {depth, 1 if it took anything, else 0}.
local function fn_remove(keys, args)
  begin(keys, args)
  local key = ARGV[2]
  promote_due(clock(ARGV[3]))
  redis.call('HDEL', FAILS, key)
  local _, took = take_delayed(key)
  local state = redis.call('HGET', STATE, key)
  if state then
    local kind = string.byte(state)
    if kind == WAITING then
      unpark(key, state)
      redis.call('HDEL', STATE, key)
      took = true
    elseif kind == MARKED then
      redis.call('HSET', STATE, key, 'p' .. string.sub(state, 2))
      took = true
    elseif kind ~= PROCESSING then
      unqueue(key, state)
      redis.call('HDEL', STATE, key)
      took = true
    end
  end
  if end_pending(key, nil, state, false) then took = true end
  if SORTED and redis.call('HEXISTS', STATE, key) == 0 then forget_flows({key}) end
  if TRACED then
    redis.call('HDEL', LINKS, 'n' .. key)
    if not being_processed(state) then redis.call('HDEL', LINKS, 's' .. key) end
  end
  return {depth(), took and 1 or 0}
end

-- snapshot: ARGV[2] now, ARGV[3] n, ARGV[4] MaxWait (ms, 0 for none). The
-- whole queue at one instant, for an inspector, after promoting the due
-- keys (see promote_due).
-- Reply: {now, depth, the first n queued keys, leased count, the n
-- longest leased keys with when they were handed out and whether they
-- are marked, delayed count, the n first delayed keys with their ready
-- times, adds, the failure counts of every key listed, in the order
-- listed, parked count, the n keys parked longest with when they were
-- parked, and the events of each, encoded as in their state, the blocked
-- count (see GroupLimits)}.
local function fn_snapshot(keys, args)
  begin(keys, args)
  local now, n, maxwait = clock(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
  promote_due(now)
  -- The due keys left are in the delayed count: the depth leaves them out.
  due_at = false
  -- The queued keys in hand-out order: with MaxWait those queued longer
  -- (aged), the longest first; then PRIO above 0, READY, PRIO at 0 (on a
  -- sorted queue) and below.
  local queued, aged, agedCount = {}, {}, 0
  if maxwait > 0 and n > 0 then
    for _, key in ipairs(redis.call('ZRANGE', AGES, '-inf', now - maxwait, 'BYSCORE', 'LIMIT', 0, n)) do
      queued[#queued + 1], aged[key] = key, true
    end
    agedCount = #queued
  end
  local function ranked(min, max)
    if #queued >= n then return end
    -- As many more as there are aged keys, which are listed already.
    for _, member in ipairs(redis.call('ZRANGE', PRIO, min, max, 'BYSCORE', 'LIMIT', 0, n - #queued + agedCount)) do
      local key = string.sub(member, 17)
      if #queued < n and not aged[key] then queued[#queued + 1] = key end
    end
  end
  ranked('-inf', '(0')
  if #queued < n then
    for _, key in ipairs(redis.call('LRANGE', READY, 0, n - #queued - 1)) do queued[#queued + 1] = key end
  end
  ranked('0', '+inf')
  local leased = redis.call('ZRANGE', SINCE, 0, n - 1, 'WITHSCORES')
  local marked = {}
  for i = 1, #leased, 2 do
    marked[#marked + 1] = string.byte(redis.call('HGET', STATE, leased[i]) or '') == MARKED and 1 or 0
  end
  -- A parked key's deadline waits in DELAYED too: the delayed keys listed
  -- and counted are the others, looked for in a bounded number of reads.
  local delayed = {}
  for from = 0, 15 * n, n do
    if n == 0 or #delayed >= 2 * n then break end
    local chunk = redis.call('ZRANGE', DELAYED, from, from + n - 1, 'WITHSCORES')
    if #chunk == 0 then break end
    local chunkKeys = {}
    for i = 1, #chunk, 2 do chunkKeys[#chunkKeys + 1] = chunk[i] end
    local states = redis.call('HMGET', STATE, unpack(chunkKeys))
    for i, key in ipairs(chunkKeys) do
      if #delayed < 2 * n and string.byte(states[i] or '') ~= WAITING then
        delayed[#delayed + 1], delayed[#delayed + 2] = key, chunk[2 * i]
      end
    end
  end
  local parked = {}
  if n > 0 then parked = redis.call('ZRANGE', PARKED, 0, n - 1, 'WITHSCORES') end
  local events = {}
  for i = 1, #parked, 2 do
    local state = redis.call('HGET', STATE, parked[i]) or ''
    events[#events + 1] = string.sub(state, (string.find(state, '|', 18, true) or #state) + 1)
  end
  local listed = {}
  for _, key in ipairs(queued) do listed[#listed + 1] = key end
  for i = 1, #leased, 2 do listed[#listed + 1] = leased[i] end
  for i = 1, #delayed, 2 do listed[#listed + 1] = delayed[i] end
  for i = 1, #parked, 2 do listed[#listed + 1] = parked[i] end
  local failures = {}
  if #listed > 0 then failures = redis.call('HMGET', FAILS, unpack(listed)) end
  local parks = parked_count()
  return {now, depth(), queued, redis.call('ZCARD', LEASES), leased, marked,
    redis.call('ZCARD', DELAYED) - parks, delayed, tonumber(redis.call('GET', ADDS) or 0), failures,
    parks, parked, events, redis.call('ZCARD', BLOCKED)}
end

-- partitions: called on partition 0's prefix; ARGV[2] the caller's
-- number of partitions. Records it for a
-- new queue. A queue used before any handle recorded a number (one made
-- before partitions existed) has one.
-- Reply: the queue's number of partitions.
local function fn_partitions(keys, args)
  begin(keys, args)
  local META = keys[1] .. 'partitions'
  local n = redis.call('GET', META)
  if n then return tonumber(n) end
  if tonumber(ARGV[2]) ~= 1 and redis.call('EXISTS', READY, STATE, DELAYED, LEASES, FAILS, ADDS, PRIO) > 0 then
    return 1
  end
  redis.call('SET', META, ARGV[2])
  return tonumber(ARGV[2])
end

-- park: ARGV[2] key, ARGV[3] token, ARGV[4] now, ARGV[5] the park's
-- backoff (ms), then the events. Park: the holder of key's lease of token
-- asks that its Done park the key until one of the events, and that a
-- wake queue it no sooner than the backoff after now; the park replaces
-- one it asked for before.
-- Reply: 1 if the park is recorded (PARKS), to take effect at Done; 2 if
-- one of the events was woken since the lease was granted, which may have
-- changed what the holder read, so the key is marked to be queued again
-- at Done instead (or, with a backoff, waits in DELAYED until it ends); 0
-- if the key was added since its Get, or an earlier park of it woken, and
-- is queued again at Done anyway; -1 if the lease is not token's.
local function fn_park(keys, args)
  begin(keys, args)
  local key, token = ARGV[2], ARGV[3]
  if redis.call('HGET', TOKENS, key) ~= token then return -1 end
  local state = redis.call('HGET', STATE, key)
  if string.byte(state) ~= PROCESSING then
    if TRACED then carry_served(key) end
    return 0
  end
  end_pending(key, nil, state, false)
  local now = clock(ARGV[4])
  local ends = now + math.ceil(tonumber(ARGV[5]))
  if #ARGV > 5 then
    -- The lease was granted when FENCE reached the token's number, so a
    -- wake that recorded that number or more came after the grant.
    local number = tonumber(string.sub(token, 1, string.find(token, ':', 1, true) - 1))
    for _, fired in ipairs(redis.call('HMGET', FIRED, unpack(ARGV, 6))) do
      if fired and tonumber(fired) >= number then
        if ends > now then
          delay(key, ends, state_priority(state))
        else
          redis.call('HSET', STATE, key, 'd' .. string.sub(state, 2))
        end
        if TRACED then carry_served(key) end
        return 2
      end
    end
  end
  local n = string.format('%016d', redis.call('HINCRBY', SEQ, 'w', 1))
  local events, scored = {}, {}
  for i = 6, #ARGV do
    events[#events + 1] = fmt(#ARGV[i]) .. ':' .. ARGV[i]
    scored[#scored + 1], scored[#scored + 2] = 0, events[#events] .. n .. key
  end
  redis.call('HSET', PARKS, key, 'w' .. n .. '0/' .. token .. '/' .. fmt(ends) .. '|' .. table.concat(events))
  if #scored > 0 then redis.call('ZADD', WAITERS, unpack(scored)) end
  return 1
end

-- parkdone: ARGV[2] now, ARGV[3] the longest park (ms), ARGV[4] key,
-- ARGV[5] token. Done of a key whose holder asked to park it: as done's,
-- except that a key whose park still counts (see end_pending) is parked,
-- until its events, an add, or now plus the longest park, whose add waits
-- in DELAYED (or the end of its backoff, if later).
-- Reply: {parked count, outcome}: 1 queued again, 0 idle, 3 parked, -1
-- the lease was lost: nothing changed.
local function fn_parkdone(keys, args)
  begin(keys, args)
  local now, longest, key, token = clock(ARGV[2]), tonumber(ARGV[3]), ARGV[4], ARGV[5]
  if redis.call('HGET', TOKENS, key) ~= token then return {parked_count(), -1} end
  local state = redis.call('HGET', STATE, key)
  local record = redis.call('HGET', PARKS, key)
  local outcome = 0
  if string.byte(state) == PROCESSING and record and pending_token(record) == token then
    redis.call('HDEL', PARKS, key)
    end_lease(key)
    local n, _, _, ends, events = park_fields(record)
    local prio, deadline = state_priority(state), math.max(now + longest, ends)
    redis.call('HSET', STATE, key, 'w' .. n .. fmt(prio) .. '/' .. fmt(deadline) .. '/' .. fmt(ends) .. '|' .. events)
    redis.call('ZADD', PARKED, now, key)
    delay(key, deadline, prio)
    if TRACED then carry_served(key) end
    outcome = 3
  else
    if TRACED then redis.call('HDEL', LINKS, 's' .. key) end
    end_pending(key, nil, state, false)
    end_lease(key)
    if string.byte(state) == MARKED then
      rank(key, now, state_priority(state), false)
      outcome = 1
    else
      redis.call('HDEL', STATE, key)
      if SORTED then forget_flows({key}) end
    end
  end
  return {parked_count(), outcome}
end

-- record_wake records the wake of event in FIRED, at FENCE's value, and
-- returns the prefix of its members in WAITERS.
local function record_wake(event)
  redis.call('HSET', FIRED, event, redis.call('GET', FENCE) or 0)
  return fmt(#event) .. ':' .. event
end

-- wake: ARGV[2] now, ARGV[3] event. Wake: records the wake of event and
-- ends every park that waits for it, in park order (see wake_park).
-- Reply: {parked count, parks ended}.
local function fn_wake(keys, args)
  begin(keys, args)
  local now = clock(ARGV[2])
  local prefix = record_wake(ARGV[3])
  local woken = 0
  for _, member in ipairs(redis.call('ZRANGE', WAITERS, '[' .. prefix, '(' .. prefix .. '\255', 'BYLEX')) do
    if wake_park(string.sub(member, #prefix + 17), string.sub(member, #prefix + 1, #prefix + 16), now, true) then
      woken = woken + 1
    end
  end
  return {parked_count(), woken}
end

-- wakelist: ARGV[2] event. WakeFunc's first step: records the wake of
-- event as wake does, and lists the parks that wait for it and count, in
-- park order; wakekeys ends those the caller accepts.
-- Reply: {number, key, number, key, ...}.
local function fn_wakelist(keys, args)
  begin(keys, args)
  local prefix = record_wake(ARGV[2])
  local parks = {}
  for _, member in ipairs(redis.call('ZRANGE', WAITERS, '[' .. prefix, '(' .. prefix .. '\255', 'BYLEX')) do
    local n, key = string.sub(member, #prefix + 1, #prefix + 16), string.sub(member, #prefix + 17)
    local state = redis.call('HGET', STATE, key)
    local counts = state and string.byte(state) == WAITING
    if not counts and state and string.byte(state) == PROCESSING then
      local record = redis.call('HGET', PARKS, key)
      counts = record and redis.call('HGET', TOKENS, key) == pending_token(record)
    end
    if counts then parks[#parks + 1], parks[#parks + 2] = n, key end
  end
  return parks
end

-- wakekeys: ARGV[2] now, then number, key pairs. WakeFunc's second step:
-- ends each of those parks that is still the one of that number (see
-- wake_park).
-- Reply: {parked count, parks ended}.
local function fn_wakekeys(keys, args)
  begin(keys, args)
  local now = clock(ARGV[2])
  local woken = 0
  for i = 3, #ARGV, 2 do
    if wake_park(ARGV[i + 1], ARGV[i], now, true) then woken = woken + 1 end
  end
  return {parked_count(), woken}
end

-- wakeitem: ARGV[2] now, ARGV[3] key. WakeItem: ends key's park,
-- whichever it is, and queues key without waiting for its backoff (see
-- wake_park).
-- Reply: {parked count, 1 if it ended one, else 0}.
local function fn_wakeitem(keys, args)
  begin(keys, args)
  local now = clock(ARGV[2])
  return {parked_count(), wake_park(ARGV[3], nil, now) and 1 or 0}
end

-- setlimit: ARGV[2] group, ARGV[3] limit (0: none), ARGV[4] room: "" on
-- SetGroupLimit's first call, else what the previous call returned,
-- ARGV[5] now. First promotes the due keys (see promote_due).
-- SetGroupLimit: the first call gives group the limit, over the one its
-- keys' adds gave it, for every handle; each call puts back up to
-- UNBLOCK_MAX of the group's blocked keys, as many in all as the limit
-- had free slots at the first call (room, -1 for no limit), however many
-- are leased meanwhile, so that a concurrent Get taking a key put back
-- does not shrink the room.
-- Reply: {depth, 1 if the caller is to call again else 0, the room left}.
local function fn_setlimit(keys, args)
  begin(keys, args)
  local group, limit, room = ARGV[2], tonumber(ARGV[3]), ARGV[4]
  promote_due(clock(ARGV[5]))
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
end

-- len: ARGV[2] now. Promotes a batch of the due keys (see promote_due).
-- Reply: {depth, 1 if due keys are left to promote, else 0}: the caller
-- calls again until none is left, and then has the depth with every due
-- key counted.
local function fn_len(keys, args)
  begin(keys, args)
  local left = promote_due(clock(ARGV[2]))
  return {depth(), left and 1 or 0}
end

-- Each function is registered under the library's name and its own, so
-- that two versions of the library can be loaded side by side.
redis.register_function('workqueue_v6_add', fn_add)
redis.register_function('workqueue_v6_addopts', fn_addopts)
redis.register_function('workqueue_v6_get', fn_get)
redis.register_function('workqueue_v6_done', fn_done)
redis.register_function('workqueue_v6_extend', fn_extend)
redis.register_function('workqueue_v6_signal', fn_signal)
redis.register_function('workqueue_v6_release', fn_release)
redis.register_function('workqueue_v6_cancel', fn_cancel)
redis.register_function('workqueue_v6_remove', fn_remove)
redis.register_function('workqueue_v6_snapshot', fn_snapshot)
redis.register_function('workqueue_v6_partitions', fn_partitions)
redis.register_function('workqueue_v6_park', fn_park)
redis.register_function('workqueue_v6_parkdone', fn_parkdone)
redis.register_function('workqueue_v6_wake', fn_wake)
redis.register_function('workqueue_v6_wakelist', fn_wakelist)
redis.register_function('workqueue_v6_wakekeys', fn_wakekeys)
redis.register_function('workqueue_v6_wakeitem', fn_wakeitem)
redis.register_function('workqueue_v6_setlimit', fn_setlimit)
redis.register_function('workqueue_v6_len', fn_len)
redis.register_function('workqueue_v6_step', fn_step)

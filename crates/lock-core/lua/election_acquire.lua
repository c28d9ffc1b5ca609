-- election_acquire.lua: a candidate's campaign: take the election's lead (a reentrant
-- lock Hash, `leasehold_election:{NAME}`, field = owner, value = hold count), exactly
-- as acquire.lua takes a lock (fragments/queued_acquire.lua: the same wait queue,
-- keep-alive, waiter flag and hand-over by election_release.lua), and, when the lead is
-- taken fresh, issue the new leader's term, record who leads with its value, and tell
-- the followers, in the same script: no reader ever sees a lead without its term and
-- value, or a term without its lead.
--
-- Leasehold only: Redisson ignores every key and channel here.
--
-- KEYS[1]  lead key "leasehold_election:{NAME}" (a Hash, the RLock layout)
-- KEYS[2]  wait queue "leasehold_lock_queue:leasehold_election:{NAME}" (List)
-- KEYS[3]  waiter entries "leasehold_lock_waiters:leasehold_election:{NAME}" (Hash)
-- KEYS[4]  queue channel "leasehold_lock__queue:leasehold_election:{NAME}"
-- KEYS[5]  term counter "leasehold_election_term:{NAME}" (a String integer: the last
--          term issued)
-- KEYS[6]  leader record "leasehold_election_leader:{NAME}" (a Hash: owner, term, value)
-- KEYS[7]  change channel "leasehold_election__channel:{NAME}"
-- ARGV[1]  lease in milliseconds (> 0)
-- ARGV[2]  owner field (the candidate)
-- ARGV[3]  the owner's hold count after this acquire (1: a candidate holds once)
-- ARGV[4]  keep-alive in ms of a queue entry (> 0): a waiting call (a campaign); "0": a
--          single try (try_campaign), which never reads or writes the queue
-- ARGV[5]  the publish command, "publish" or "spublish"
-- ARGV[6]  TTL in ms given to the term counter with each term (the leader record has
--          none: it must outlive the longest lead; a resign or force deletes it, the
--          next lead overwrites a crashed leader's)
-- ARGV[7]  the value the new leader proclaims (bytes; may be empty)
-- KEYS[8]  waiting candidates "leasehold_election_candidates:{NAME}" (Hash owner ->
--          "TICKET VALUE"): a queued campaign registers its value here, so that a resign
--          grants it the lead in one step (election_release.lua)
-- ARGV[8]  the call's ticket (the owner's turn number): a grant names it back
--
-- Replies (fenced_acquire.lua's, the token being the term):
--   {1, 1, term}        took the lead (fresh, or claimed a lead election_release.lua
--                       handed to this candidate): a new term, larger than every term
--                       issued before for NAME; the record is (owner, term, ARGV[7]),
--                       and "L <term> <ARGV[1]> <ARGV[7]>" is published on KEYS[7]
--   {1, N, term}        re-entered (N > 1), or claimed a lead election_release.lua
--                       granted this candidate (its record, term and "L" written by the
--                       grant: a call after a lost grant message): the lead's term, the
--                       record unchanged
--   {0, pttl}           single try, another candidate leads; pttl = the lead's TTL
--   {0, wait, position} a campaign, not the leader: queued at `position` (0 = head)
-- Errors:
--   WRONGTYPE  a key of another type; nothing written
--   a script error when KEYS[5] holds a String that is not an integer; nothing written
--
-- Terms are fencing tokens (fragments/token.lua): max(counter, server time in µs) + 1,
-- so they strictly increase while the counter lives, and start above every earlier
-- term from the server's clock when it is lost (docs/architecture/fencing.md).

-- Issues the next token; returns it as a decimal string (Lua numbers print as 1.7e+15).
local function next_token(counter, ttl_ms)
  local now = redis.call('time')
  local now_us = now[1] .. string.format('%06d', tonumber(now[2]))
  local last = redis.call('get', counter)
  if last == false or tonumber(last) < tonumber(now_us) then
    redis.call('set', counter, now_us)
  end
  redis.call('incr', counter)
  redis.call('pexpire', counter, ttl_ms)
  return redis.call('get', counter)
end

-- Reads first: a counter or record of another type (WRONGTYPE), or a counter that is
-- not an integer, fails the call before anything is written (the candidates Hash too).
local counter = redis.call('get', KEYS[5])
if counter and not string.match(counter, '^-?%d+$') then
  return redis.error_reply('ERR the term counter ' .. KEYS[5] .. ' is not an integer')
end
local holder = redis.call('hget', KEYS[6], 'owner')
if ARGV[4] ~= '0' then
  redis.call('hlen', KEYS[8])
end
-- The record is this candidate's and it holds the lead: a re-entry, or the claim of a
-- lead granted with its term (election_release.lua): no new term.
local leading = holder == ARGV[2] and redis.call('hexists', KEYS[1], ARGV[2]) == 1

-- queue_purge.lua's forget hook: a dead candidate purged from the queue has no grant
-- due any more; its registered value goes with it.
local function forget_candidate(owner)
  redis.call('hdel', KEYS[8], owner)
end

-- acquire.lua's steps; their replies are this script's, before the term.
local function acquire()
  local queueing = ARGV[4] ~= '0'
  -- A single try ignores the queue. A waiting call on a free lock with nobody queued takes
  -- it just as a try does: one EXISTS counts both keys, so an uncontended lock() costs
  -- what try_lock() costs (the queue cannot matter: nobody is ahead).
  local free, unqueued
  if queueing then
    local present = redis.call('exists', KEYS[1], KEYS[2])
    unqueued = present == 0
    free = unqueued or (present == 1 and redis.call('exists', KEYS[1]) == 0)
  else
    free = redis.call('exists', KEYS[1]) == 0
    unqueued = true
  end
  if free and unqueued then
    redis.call('hset', KEYS[1], ARGV[2], 1)
    redis.call('pexpire', KEYS[1], ARGV[1])
    return {1, 1}
  end
  -- HGET fails on a key of another type before anything is written.
  if not free and redis.call('hget', KEYS[1], ARGV[2]) then
    -- A re-entry (or the claim of a lock handed to this owner): never queued.
    redis.call('hset', KEYS[1], ARGV[2], ARGV[3])
    -- A nested hold with a shorter lease must not cut the outer holds short.
    if redis.call('pttl', KEYS[1]) < tonumber(ARGV[1]) then
      redis.call('pexpire', KEYS[1], ARGV[1])
    end
    return {1, tonumber(ARGV[3])}
  end
  if not queueing then
    return {0, redis.call('pttl', KEYS[1])}
  end

  -- A waiting call. Reads first: each raises WRONGTYPE before any write.
  redis.call('lindex', KEYS[2], 0)
  redis.call('hget', KEYS[3], ARGV[2])

  local t = redis.call('time')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

  -- The first live entry; dead heads (deadline passed, or entry gone) are purged.
  local purged = false
  local head, head_deadline
  while true do
    head = redis.call('lindex', KEYS[2], 0)
    if not head then break end
    local entry = redis.call('hget', KEYS[3], head)
    head_deadline = entry and tonumber(string.match(entry, '^(%d+)'))
    if head_deadline and head_deadline > now then break end
    redis.call('lpop', KEYS[2])
    redis.call('hdel', KEYS[3], head)
    forget_candidate(head)
    purged = true
  end

  if free and (not head or head == ARGV[2]) then
    local next
    if head then
      redis.call('lpop', KEYS[2])
      redis.call('hdel', KEYS[3], head)
      next = redis.call('lindex', KEYS[2], 0)
      if next then
        -- The next waiter is first now; the lock is held for ARGV[1].
        redis.call(ARGV[5], KEYS[4], '- ' .. next .. ' ' .. ARGV[1])
      end
    end
    redis.call('hset', KEYS[1], ARGV[2], 1)
    if next then
      -- Waiters remain behind this owner: its release must wake them.
      redis.call('hset', KEYS[1], ARGV[2] .. ':w', 1)
    end
    redis.call('pexpire', KEYS[1], ARGV[1])
    return {1, 1}
  end

  -- Queue up, or refresh the entry (HSET answers 1 only for a new field: a refresh moves
  -- the deadline, not the place).
  local keepalive = tonumber(ARGV[4])
  if redis.call('hset', KEYS[3], ARGV[2], string.format('%d %s', now + keepalive, ARGV[1])) == 1 then
    redis.call('rpush', KEYS[2], ARGV[2])
  end
  -- The queue's keys live as long as their longest-lived entry: waiters may have
  -- different keep-alives (clients configured apart), and a call with a shorter one must
  -- never cut the TTL that a longer-lived entry needs. Raised, never lowered (a key
  -- without an expiry, PTTL -1, gets one).
  for _, key in ipairs({KEYS[2], KEYS[3]}) do
    if redis.call('pttl', key) < keepalive then
      redis.call('pexpire', key, keepalive)
    end
  end
  local position = redis.call('lpos', KEYS[2], ARGV[2])

  if not free then
    -- Flag every holder (one, unless Redisson and leasehold disagree) as waited for: see
    -- "The waiter flag" above.
    for _, field in ipairs(redis.call('hkeys', KEYS[1])) do
      if string.sub(field, -2) ~= ':w' then
        redis.call('hset', KEYS[1], field .. ':w', 1)
      end
    end
    return {0, redis.call('pttl', KEYS[1]), position}
  end
  -- Free, and another live waiter is first.
  if purged then
    -- The purge made that waiter first: it may take the lock now.
    redis.call(ARGV[5], KEYS[4], '- ' .. head .. ' 0')
  end
  return {0, math.max(head_deadline - now, 1), position}
end

local reply = acquire()
if reply[1] ~= 1 then
  if reply[3] then
    -- Queued (or refreshed): register the value a grant makes this candidate lead
    -- with, for as long as its queue entry can live (raised, never lowered).
    redis.call('hset', KEYS[8], ARGV[2], ARGV[8] .. ' ' .. ARGV[7])
    if redis.call('pttl', KEYS[8]) < tonumber(ARGV[4]) then
      redis.call('pexpire', KEYS[8], ARGV[4])
    end
  end
  return reply
end
if ARGV[4] ~= '0' then
  -- Leading: no grant is due to this candidate any more.
  redis.call('hdel', KEYS[8], ARGV[2])
end
local term
if leading then
  term = redis.call('hget', KEYS[6], 'term')
end
if not term then
  term = next_token(KEYS[5], ARGV[6])
  redis.call('del', KEYS[6])
  redis.call('hset', KEYS[6], 'owner', ARGV[2], 'term', term, 'value', ARGV[7])
  redis.call(ARGV[5], KEYS[7], 'L ' .. term .. ' ' .. ARGV[1] .. ' ' .. ARGV[7])
end
return {1, reply[2], tonumber(term)}

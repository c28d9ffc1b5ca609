-- fenced_acquire.lua: take or re-enter a reentrant lock and hand out a fencing token
-- (Redisson's RLock layout, plus RFencedLock's counter "redisson_lock_token:{NAME}"),
-- and queue a waiting owner in leasehold's wait queue, exactly as acquire.lua does: the
-- steps are acquire.lua's own (fragments/queued_acquire.lua: the same queue keys,
-- keep-alive, waiter flag, and the hand-over by release.lua), run in a function whose
-- replies get the token. So fenced waiters get the lock in arrival order across every
-- client and process, and a release hands the lock to the queue's head (acquire.lua's
-- header describes the queue and "The waiter flag").
--
-- The hand-over issues the token: release.lua makes the queue's head the owner (count
-- 1), and the waiter claims the lock with this script, which issues a new token for
-- every first hold of an owner (ARGV[3] = 1), the claim of a handed-over lock included.
-- Only a re-entry of a live hold (ARGV[3] > 1) keeps the outer hold's token. The claim,
-- not release.lua, issues it, so a hand-over by any release (a plain Lock's on the same
-- name, a force release, a wait's clean-up) gives the new owner a token above every
-- earlier one, and no owner ever holds with an older owner's token.
--
-- KEYS[1]  lock key: a Hash, field = owner "CLIENT_UUID:N", value = hold count (and
--          the owner's waiter flag "CLIENT_UUID:N:w" while a waiter waits; the last
--          release removes the key)
-- KEYS[2]  wait queue "leasehold_lock_queue:{NAME}" (List of owner fields, head first)
-- KEYS[3]  waiter entries "leasehold_lock_waiters:{NAME}" (Hash owner -> "DEADLINE LEASE")
-- KEYS[4]  queue channel "leasehold_lock__queue:{NAME}" (see release.lua)
-- KEYS[5]  fencing counter "redisson_lock_token:{NAME}": a String integer, the last
--          token issued for NAME
-- ARGV[1]  lease in milliseconds (> 0); a re-entry only raises the key's TTL to it
-- ARGV[2]  owner field
-- ARGV[3]  the owner's hold count after this acquire: its accounted holds + 1 (>= 1)
-- ARGV[4]  keep-alive in ms of a queue entry (> 0): a waiting call, which queues up (or
--          refreshes its entry) when not acquired and flags the holder; "0": a single
--          try, which never reads or writes the queue
-- ARGV[5]  the publish command, "publish" or "spublish" (a single try publishes nothing)
-- ARGV[6]  fencing counter TTL in milliseconds (> 0), set again whenever a token is issued
--
-- Replies (acquire.lua's, with the token after the count when acquired):
--   {1, 1, token}        acquired fresh, or claimed a lock release.lua handed to this
--                        owner, or re-acquired by an owner whose holds were gone: a new
--                        token
--   {1, ARGV[3], token}  re-entered a live hold (ARGV[3] > 1); token = the outer hold's:
--                        the counter's value, which no one else can move while this
--                        owner holds the lock (a new one only if the counter is gone,
--                        e.g. a failover lost it)
--   {0, pttl}            single try, held by another owner; pttl = the key's TTL in ms,
--                        -1 if none
--   {0, wait, position}  waiting call, not acquired: queued at `position` (0 = head);
--                        `wait` as in acquire.lua
-- Errors:
--   WRONGTYPE  KEYS[1] is not a Hash, KEYS[5] not a String (or, for a waiting call,
--              KEYS[2] not a List or KEYS[3] not a Hash); nothing was written
--   a script error when KEYS[5] holds a String that is not an integer; nothing written
--
-- Tokens: every new token is max(counter, server time in microseconds) + 1, and the
-- counter is set to it. While the counter exists tokens strictly increase whatever the
-- clocks do. When it is missing (a restart without persistence, a failover to a replica
-- that lacks it, an expired counter) or behind (a promoted replica that missed the last
-- tokens), the next token comes from the server's clock, above every earlier token as
-- long as the clock now reads later than the issuing server's clock did at the last
-- token (docs/architecture/fencing.md).

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

-- Reads first: a counter of another type (WRONGTYPE) or a String that is not an integer
-- fails the call before anything is written.
local counter = redis.call('get', KEYS[5])
if counter and not string.match(counter, '^-?%d+$') then
  return redis.error_reply('ERR the fencing counter ' .. KEYS[5] .. ' is not an integer')
end

-- acquire.lua's steps; their replies are this script's, before the token.
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
  return reply
end
local token
if reply[2] > 1 then
  -- A re-entry keeps the outer hold's token (as Hazelcast and bsm/redislock do; Redisson
  -- issues a new one): every guard of one hold writes with the same fence.
  token = redis.call('get', KEYS[5])
end
if not token then
  token = next_token(KEYS[5], ARGV[6])
end
return {1, reply[2], tonumber(token)}

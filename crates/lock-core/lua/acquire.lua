-- acquire.lua: take or re-enter a reentrant lock (Redisson's RLock layout), and queue a
-- waiting owner in leasehold's own wait queue, so that releases hand the lock to waiters
-- in arrival order across every client and process.
--
-- The client is the authority on how many holds its owner has: its acquires and
-- releases take turns, so it always knows how many live guards it has. It sends the
-- count it wants to end up with, and the script sets it. A replayed or retried call
-- sets the same count again, so it counts once, with no per-request state on the
-- server (no latch key to write, expire or leave behind).
--
-- The wait queue is leasehold's own (Redisson ignores both keys): KEYS[2] lists the
-- waiting owners in arrival order, KEYS[3] maps each to "DEADLINE LEASE": the server
-- time (ms, TIME) until which its entry lives without a refresh, and the lease the lock
-- gets when release.lua hands it over. A live waiter refreshes its entry with every
-- call (at least every keep-alive / 3); a dead one stops blocking the queue once its
-- deadline passes. A single try (ARGV[4] = "0", `try_lock`) never reads or writes the
-- queue: the flash-sale path stays three commands.
--
-- KEYS[1]  lock key: a Hash, field = owner "CLIENT_UUID:N", value = hold count
-- KEYS[2]  wait queue "leasehold_lock_queue:{NAME}" (List of owner fields, head first)
-- KEYS[3]  waiter entries "leasehold_lock_waiters:{NAME}" (Hash owner -> "DEADLINE LEASE")
-- KEYS[4]  queue channel "leasehold_lock__queue:{NAME}": "GRANTED NEXT WAIT_MS" tells
--          a new queue head it is first (see release.lua)
-- ARGV[1]  lease in milliseconds (> 0; checked by the caller). A re-entry never
--          shortens the key's TTL: it only raises it to ARGV[1]
-- ARGV[2]  owner field
-- ARGV[3]  the owner's hold count after this acquire: its live guards + 1 (>= 1)
-- ARGV[4]  keep-alive in ms of a queue entry (> 0): queue up or refresh the entry when
--          not acquired, and honour the queue when the lock is free; "0": a single try
-- ARGV[5]  a waiting call only: the publish command, "publish" (classic pub/sub) or
--          "spublish" (sharded, in a cluster); a single try publishes nothing
--
-- The waiter flag: a waiting call that finds the lock held by another owner writes the
-- field "HOLDER:w" (value 1) next to the holder's field, in the same Hash; so does the
-- owner that takes a free lock from the queue's head while others wait behind it.
-- release.lua removes the owner's field and its flag in one HDEL, whose count tells it
-- whether any leasehold waiter is there to be woken: a release nobody waits for then
-- needs no PUBLISH (with `redisson_waiters(false)`, see release.lua). A flag exists
-- only while its holder's field does: both go in the same HDEL, the same DEL (Redisson's
-- unlock, a forced release) or the key's expiry. Redisson ignores the extra field (it
-- reads its own field and EXISTS only).
--
-- Replies:
--   {1, 1}       acquired fresh: the key did not exist (and, for a waiting call, no
--                live waiter was ahead), or this owner's field was gone; count = 1.
--                The owner's queue entry, if any, is removed
--   {1, ARGV[3]} re-entered: the owner's field existed; its count is now ARGV[3]
--                (also how a waiter claims a lock release.lua handed to it)
--   {0, pttl}    single try: held by another owner; pttl = the key's remaining TTL in
--                ms, -1 when the key has no expiry
--   {0, wait, position}
--                waiting call, not acquired: queued at `position` (0 = head). `wait`
--                is the key's PTTL (-1: no expiry) while the lock is held, else (free,
--                another live waiter is first) the ms until that waiter's entry
--                expires (at least 1)
-- Errors:
--   WRONGTYPE   KEYS[1] exists and is not a Hash (or, for a waiting call that finds the
--               lock held or a queue present, KEYS[2] is not a List or KEYS[3] not a
--               Hash); nothing was written
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

-- fair_acquire.lua: take or re-enter a fair lock, strictly in queue order, or queue up
-- (Redisson's RFairLock layout: the lock Hash, the List "redisson_lock_queue:{NAME}" of
-- waiting owner fields, head first, and the sorted set "redisson_lock_timeout:{NAME}" of
-- owner field -> deadline in ms since the epoch).
--
-- Unlike Redisson, a queued entry's deadline is a keep-alive, measured on this server's
-- clock (TIME), not the client's: a live waiter refreshes it with every call (at least
-- every keep-alive / 3), so a waiter that died stops blocking the queue one keep-alive
-- after its last call. Hold counts are absolute, as in acquire.lua; keep the two in step.
--
-- KEYS[1]  lock key: a Hash, field = owner "CLIENT_UUID:N", value = hold count
-- KEYS[2]  wait queue "redisson_lock_queue:{NAME}" (List of owner fields)
-- KEYS[3]  deadlines "redisson_lock_timeout:{NAME}" (ZSet owner field -> deadline ms)
-- KEYS[4]  release channel "redisson_lock__channel:{NAME}"; a waiter's own channel is
--          KEYS[4] .. ':' .. its owner field
-- ARGV[1]  lease in milliseconds (> 0); a re-entry only raises the key's TTL to it
-- ARGV[2]  owner field
-- ARGV[3]  the owner's hold count after this acquire: its accounted holds + 1 (>= 1)
-- ARGV[4]  keep-alive in milliseconds (> 0): a queued entry's deadline is now + ARGV[4]
-- ARGV[5]  "1": queue up (or refresh the entry) when not acquired; "0": do not (try_lock)
-- ARGV[6]  unlock message ("0"), published to a new queue head this call uncovered
--          (by purging dead heads, or by taking the lock as the head)
-- ARGV[7]  the publish command: "publish" (classic pub/sub) or "spublish" (sharded;
--          a waiter's channel has the lock key's hash tag, so it is in the script's slot)
--
-- Replies:
--   {1, 1}        acquired fresh (the key was absent and the queue empty or headed by
--                 this owner); the owner's queue entry, if any, is removed, and the
--                 next waiter, now the head, is told (ARGV[6] on its channel)
--   {1, ARGV[3]}  re-entered: the owner's field existed; its count is now ARGV[3]
--   {0, wait}     not acquired; wait = the key's PTTL in ms (-1: no expiry) while the
--                 lock is held, else (free, another waiter is first) the ms until that
--                 waiter's entry expires (at least 1)
-- Errors:
--   WRONGTYPE  KEYS[1] is not a Hash, KEYS[2] not a List or KEYS[3] not a ZSet; nothing
--              was written

-- Reads first: each raises WRONGTYPE on a key of another type before any write.
local mine = redis.call('hget', KEYS[1], ARGV[2])
redis.call('lindex', KEYS[2], 0)
redis.call('zscore', KEYS[3], ARGV[2])

--#include fragments/time.lua

-- Every call purges the dead heads first: an entry whose deadline passed (or that lost
-- its deadline) no longer blocks the waiters behind it.
--#include fragments/fair_purge.lua flag=purged

if mine then
  --#include fragments/reentry.lua
end

local head = redis.call('lindex', KEYS[2], 0)
local free = redis.call('exists', KEYS[1]) == 0
if free and (not head or head == ARGV[2]) then
  if head then
    redis.call('lpop', KEYS[2])
    -- Tell the waiter now first: it learns this hold's PTTL with one call and retries
    -- when it ends. A lease that runs out publishes nothing, and a waiter behind the
    -- head that tried while the lock was free (the head not in yet) was told to wait
    -- for the head's deadline: without this it would sleep until its refresh.
    local next = redis.call('lindex', KEYS[2], 0)
    if next then
      redis.call(ARGV[7], KEYS[4] .. ':' .. next, ARGV[6])
    end
  end
  redis.call('zrem', KEYS[3], ARGV[2])
  redis.call('hset', KEYS[1], ARGV[2], 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  return {1, 1}
end

if ARGV[5] == '1' then
  -- ZADD answers 1 only for a new member: a refresh moves the deadline, not the place.
  local deadline = string.format('%d', now + tonumber(ARGV[4]))
  if redis.call('zadd', KEYS[3], deadline, ARGV[2]) == 1 then
    redis.call('rpush', KEYS[2], ARGV[2])
  end
end

local wait = redis.call('pttl', KEYS[1])
if free then
  head = redis.call('lindex', KEYS[2], 0)
  if purged and head ~= ARGV[2] then
    -- The purge made someone else first while the lock is free: wake it.
    redis.call(ARGV[7], KEYS[4] .. ':' .. head, ARGV[6])
  end
  local deadline = redis.call('zscore', KEYS[3], head)
  wait = 1
  if deadline then
    wait = math.max(tonumber(deadline) - now, 1)
  end
end
return {0, wait}

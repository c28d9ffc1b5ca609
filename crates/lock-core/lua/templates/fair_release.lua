-- fair_release.lua: release.lua for a fair lock. Sets the owner's hold count to what its
-- remaining guards account for; at 0 removes the owner and publishes the unlock message
-- to the queue head's own channel only (as Redisson's RFairLock does; nothing on the
-- release channel itself). Also removes the owner's own queue entry, so the same call
-- undoes an abandoned acquire and cleans up a cancelled or timed-out wait (the client
-- sends its accounted holds, which leaves a live hold as it is).
--
-- KEYS[1]  lock key (Hash)
-- KEYS[2]  wait queue "redisson_lock_queue:{NAME}" (List)
-- KEYS[3]  deadlines "redisson_lock_timeout:{NAME}" (ZSet, ms since the epoch)
-- KEYS[4]  release channel "redisson_lock__channel:{NAME}"; the head's channel is
--          KEYS[4] .. ':' .. head
-- ARGV[1]  owner field
-- ARGV[2]  the owner's hold count after this release (>= 0); 0 = give it all back
-- ARGV[3]  TTL in ms the remaining holds need, or 0 (raised to it, never lowered)
-- ARGV[4]  unlock message ("0")
-- ARGV[5]  the publish command: "publish" (classic pub/sub) or "spublish" (sharded)
--
-- Replies:
--   -1  the owner holds nothing on KEYS[1]: the hold count untouched (its queue entry,
--       if any, removed)
--    0  released: the owner's field removed (the key with it); ARGV[4] published to the
--       queue head's channel, if anyone is queued
--    N  N = ARGV[2] > 0 holds remain; the key's TTL is at least ARGV[3]
--   Whenever the lock is free afterwards and this call changed the queue head (its own
--   entry removed, dead heads purged) or released the lock, the head is told.
-- Errors:
--   WRONGTYPE  KEYS[1] is not a Hash, KEYS[2] not a List or KEYS[3] not a ZSet; nothing
--              was written

-- Reads first: each raises WRONGTYPE on a key of another type before any write.
local held = redis.call('hexists', KEYS[1], ARGV[1])
redis.call('lindex', KEYS[2], 0)
redis.call('zscore', KEYS[3], ARGV[1])

--#include fragments/time.lua

--#include fragments/fair_purge.lua flag=changed
-- The owner's own entry: only scanned for when it has a deadline (the two are kept in
-- step), so a release by an owner that is not queued stays O(1) in the queue length.
if redis.call('zrem', KEYS[3], ARGV[1]) == 1 then
  redis.call('lrem', KEYS[2], 0, ARGV[1])
  changed = true
end

local reply
local target = tonumber(ARGV[2])
if held == 0 then
  reply = -1
elseif target == 0 then
  redis.call('hdel', KEYS[1], ARGV[1])
  reply = 0
  changed = true
else
  redis.call('hset', KEYS[1], ARGV[1], ARGV[2])
  local need = tonumber(ARGV[3])
  if need > 0 and redis.call('pttl', KEYS[1]) < need then
    redis.call('pexpire', KEYS[1], need)
  end
  reply = target
end

if changed and redis.call('exists', KEYS[1]) == 0 then
  local head = redis.call('lindex', KEYS[2], 0)
  if head then
    redis.call(ARGV[5], KEYS[4] .. ':' .. head, ARGV[4])
  end
end
return reply

-- write_release.lua: set the writer's write hold count of a read/write lock to what
-- its remaining write guards account for (see read_acquire.lua for the layout); at 0
-- remove its field and publish Redisson's write-unlock message "1" on
-- "redisson_rwlock:{NAME}", which wakes every waiting reader and a writer. If the
-- owner still holds reads (a downgrade), the lock stays in read mode for them.
--
-- Replay-safe as release.lua (the client sends the count it wants).
--
-- Phase-fair (leasehold's): when the last write hold ends (or a downgrade), every live
-- reader registered in KEYS[4] (see read_acquire.lua) is granted its read hold in the
-- same call (rw_admit.lua: Redisson's field and timeout key, with the lease it asked
-- for) and named on the grant channel ARGV[8], before any waiting writer can take the
-- lock: the readers waiting at a write release get in before the next writer, and none
-- of them runs a script to get in. "1" is published on Redisson's channel as before
-- (Java waiters, and leasehold readers not registered, retry on it).
--
-- Better than Redisson: a downgrade publishes too (Redisson publishes nothing, and
-- waiting readers sleep up to a PTTL), and the Hash's TTL then becomes the longest
-- live read hold's; dead reader fields are pruned (only the writer's own reads can be
-- there: the prune is as short as the Hash).
--
-- KEYS[1]  lock key NAME (Hash)
-- KEYS[2]  channel "redisson_rwlock:{NAME}"
-- KEYS[3]  waiting writers "leasehold_rwlock_writers:{NAME}" (see write_acquire.lua)
-- KEYS[4]  waiting readers "leasehold_rwlock_readers:{NAME}" (see read_acquire.lua)
-- KEYS[5]  the waiting writers' order "leasehold_rwlock_writers:order:{NAME}" (see
--          write_acquire.lua): a wait's clean-up (ARGV[7]) removes the writer from it
-- ARGV[1]  writer field "CLIENT_UUID:N:write"
-- ARGV[2]  the owner's write hold count after this release (>= 0)
-- ARGV[3]  TTL in ms the remaining holds need, or 0: while holds remain the Hash's
--          TTL is raised to it, never lowered
-- ARGV[4]  the key prefix of every reader's timeout keys: "{NAME}", or NAME when it
--          contains "{"
-- ARGV[5]  the publish command: "publish" or "spublish" (sharded, in a cluster)
-- ARGV[6]  write-unlock message ("1", Redisson's READ_UNLOCK_MESSAGE: wakes all)
-- ARGV[7]  "1": also remove the writer's entry from KEYS[3] (a wait that ended without
--          the lock) and, if it was there, let in the readers it held back: when no
--          write is held and no other live writer waits, the registered readers are
--          granted as above; ARGV[6] is published either way; else "0"
-- ARGV[8]  grant channel "leasehold_rwlock__grants:{NAME}" (NAME's hash tag; a channel,
--          never a key)
--
-- Replies:
--   -1  the owner holds no write on KEYS[1] (or KEYS[1] is not write-locked): nothing
--       written, nothing published
--    0  released: the writer's field removed, the registered readers granted (named on
--       ARGV[8]), ARGV[6] published; the lock deleted, or left in read mode for the
--       owner's own live reads and the granted readers
--    N  N = ARGV[2] > 0 write holds remain; the Hash's TTL is at least ARGV[3]
-- Errors:
--   WRONGTYPE   KEYS[1] holds another type; nothing written
--#include fragments/rw_admit.lua
if ARGV[7] == '1' then
  -- The writer's place in line goes too (even if its deadline entry was purged).
  redis.call('lrem', KEYS[5], 0, ARGV[1])
end
if ARGV[7] == '1' and redis.call('zrem', KEYS[3], ARGV[1]) == 1 then
  local mode = redis.call('hget', KEYS[1], 'mode')
  if mode == 'read' or (mode == false and redis.call('exists', KEYS[1]) == 0) then
--#include fragments/time.lua
    redis.call('zremrangebyscore', KEYS[3], '-inf', now)
    if redis.call('zcard', KEYS[3]) == 0 then
      local granted, longest = admit_readers(KEYS[4], ARGV[4], ARGV[8], ARGV[5], nil)
      if granted > 0 and redis.call('pttl', KEYS[1]) < longest then
        redis.call('pexpire', KEYS[1], longest)
      end
    end
  end
  redis.call(ARGV[5], KEYS[2], ARGV[6])
end
if redis.call('hget', KEYS[1], 'mode') ~= 'write' then
  return -1
end
if redis.call('hexists', KEYS[1], ARGV[1]) == 0 then
  return -1
end
local target = tonumber(ARGV[2])
if target > 0 then
  redis.call('hset', KEYS[1], ARGV[1], target)
  local need = tonumber(ARGV[3])
  if need > 0 and redis.call('pttl', KEYS[1]) < need then
    redis.call('pexpire', KEYS[1], need)
  end
  return target
end
redis.call('hdel', KEYS[1], ARGV[1])
--#include fragments/rw_prune.lua
local live, longest, present = prune_readers(ARGV[4])
-- Phase-fair: the readers waiting now get in before any writer can.
local granted, granted_lease = admit_readers(KEYS[4], ARGV[4], ARGV[8], ARGV[5], present)
if live > 0 or granted > 0 then
  -- A downgrade (the owner's reads remain) and the granted readers: read mode
  -- (admit_readers set it when it granted).
  if granted == 0 then
    redis.call('hset', KEYS[1], 'mode', 'read')
  end
  longest = math.max(longest, granted_lease)
  if longest > 0 then
    redis.call('pexpire', KEYS[1], longest)
  end
else
  redis.call('del', KEYS[1])
end
redis.call(ARGV[5], KEYS[2], ARGV[6])
return 0

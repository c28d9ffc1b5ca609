-- write_release.lua: set the writer's write hold count of a read/write lock to what
-- its remaining write guards account for (see read_acquire.lua for the layout); at 0
-- remove its field and publish Redisson's write-unlock message "1" on
-- "redisson_rwlock:{NAME}", which wakes every waiting reader and a writer. If the
-- owner still holds reads (a downgrade), the lock stays in read mode for them.
--
-- Replay-safe as release.lua (the client sends the count it wants).
--
-- Better than Redisson: a downgrade publishes too (Redisson publishes nothing, and
-- waiting readers sleep up to a PTTL), and the Hash's TTL then becomes the longest
-- live read hold's; dead reader fields are pruned.
--
-- KEYS[1]  lock key NAME (Hash)
-- KEYS[2]  channel "redisson_rwlock:{NAME}"
-- KEYS[3]  waiting writers "leasehold_rwlock_writers:{NAME}" (see write_acquire.lua)
-- ARGV[1]  writer field "CLIENT_UUID:N:write"
-- ARGV[2]  the owner's write hold count after this release (>= 0)
-- ARGV[3]  TTL in ms the remaining holds need, or 0: while holds remain the Hash's
--          TTL is raised to it, never lowered
-- ARGV[4]  the key prefix of every reader's timeout keys: "{NAME}", or NAME when it
--          contains "{"
-- ARGV[5]  the publish command: "publish" or "spublish" (sharded, in a cluster)
-- ARGV[6]  write-unlock message ("1", Redisson's READ_UNLOCK_MESSAGE: wakes all)
-- ARGV[7]  "1": also remove the writer's entry from KEYS[3] (a wait that ended without
--          the lock), publishing ARGV[6] if there was one, so that the readers it held
--          back retry; else "0"
--
-- Replies:
--   -1  the owner holds no write on KEYS[1] (or KEYS[1] is not write-locked): nothing
--       written, nothing published
--    0  released: the writer's field removed, ARGV[6] published; the lock deleted, or
--       left in read mode for the owner's own live reads
--    N  N = ARGV[2] > 0 write holds remain; the Hash's TTL is at least ARGV[3]
-- Errors:
--   WRONGTYPE   KEYS[1] holds another type; nothing written
if ARGV[7] == '1' and redis.call('zrem', KEYS[3], ARGV[1]) == 1 then
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
local live, longest = prune_readers(ARGV[4])
if live > 0 then
  -- A downgrade: the owner's reads remain, and readers may join them now.
  redis.call('hset', KEYS[1], 'mode', 'read')
  if longest > 0 then
    redis.call('pexpire', KEYS[1], longest)
  end
else
  redis.call('del', KEYS[1])
end
redis.call(ARGV[5], KEYS[2], ARGV[6])
return 0

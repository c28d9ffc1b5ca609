-- read_acquire.lua: take or re-enter a read hold of a read/write lock, in Redisson's
-- RReadWriteLock layout byte for byte: Hash NAME with field "mode" = "read"/"write",
-- one field per reader owner = its read hold count, the writer's field "OWNER:write" =
-- its hold count; per read hold k (1..count) a String "{NAME}:OWNER:rwlock_timeout:k"
-- = "1" whose PTTL is that hold's lease. Readers share; a writer excludes them, except
-- its own owner's reads (a downgrade: read inside write).
--
-- As acquire.lua, the client sends the count it wants (its live read guards + 1), so a
-- replayed or retried call sets the same count again; holds above it (an abandoned
-- acquire that did apply) are given back, their timeout keys deleted.
--
-- Better than Redisson: reader fields with no live timeout key (a reader whose process
-- died) are pruned first (rw_prune.lua), so a dead reader blocks nobody past its lease;
-- and a Hash without a mode field (a plain lock) is refused instead of joined.
--
-- Deviation from Redisson (for safety): a re-entry raises the TTL of the owner's earlier
-- timeout keys (1..count-1) to the new lease, never lowering one. The client keeps one
-- deadline for all of an owner's read holds (the latest), and a release deletes the
-- highest keys first, so key 1 must outlive every hold the client counts: otherwise a
-- released re-entry leaves key 1 to expire under a guard that still believes it holds
-- (and a writer prunes the reader as dead). The keys and values are Redisson's.
--
-- The owner's timeout-key prefix is built here from ARGV[4] and ARGV[2], not declared
-- as a key: that key never exists, and in a MIGRATING cluster slot a call declaring a
-- missing key is answered TRYAGAIN. Every key built from it has NAME's hash tag, so it
-- is in KEYS[1]'s slot.
--
-- Writer preference: a fresh read (the owner holds no read, and the lock is not in its
-- own write mode) is refused while KEYS[2] has a live waiting writer (see
-- write_acquire.lua); dead entries (deadline passed, server clock) are purged first.
-- Re-entries always enter, so a reader never waits for a writer that waits for it.
-- Redisson's readers do not know KEYS[2]: a mixed fleet gets no writer preference.
--
-- KEYS[1]  lock key NAME (Hash)
-- KEYS[2]  waiting writers "leasehold_rwlock_writers:{NAME}" (ZSet writer -> deadline ms)
-- ARGV[1]  lease in ms (> 0): the new hold's timeout key gets it; the Hash's TTL and
--          the owner's earlier timeout keys' TTLs are raised to it, never lowered
-- ARGV[2]  reader owner field "CLIENT_UUID:N"
-- ARGV[3]  the owner's read hold count after this acquire (>= 1)
-- ARGV[4]  the key prefix of every reader's timeout keys: "{NAME}", or NAME when it
--          contains "{" (Redisson's suffixName rule); this owner's timeout keys are
--          ARGV[4] .. ":" .. ARGV[2] .. ":rwlock_timeout:k" (Redisson's layout)
--
-- Replies:
--   {1, 1}        acquired fresh (the owner had no live read hold): count = 1
--   {1, ARGV[3]}  re-entered: the owner's count is now ARGV[3]
--   {0, pttl}     write-locked by another owner; pttl = the Hash's PTTL (-1: no expiry)
--   {0, wait}     a fresh read while a leasehold writer waits; wait = ms until the first
--                 waiting writer's entry expires (at least 1)
-- Errors:
--   WRONGTYPE   KEYS[1] holds another type, or a Hash without "mode"; nothing written
--#include fragments/rw_mode.lua
local timeouts = ARGV[4] .. ':' .. ARGV[2] .. ':rwlock_timeout'
-- In a MIGRATING cluster slot a script may touch only keys still on this node, and the
-- new hold's timeout key is a new key (Redis puts those on the target): touch it first,
-- so that such a call fails before it writes anything.
redis.call('pttl', timeouts .. ':' .. ARGV[3])
if mode == 'write' and redis.call('hexists', KEYS[1], ARGV[2] .. ':write') == 0 then
  return {0, redis.call('pttl', KEYS[1])}
end
--#include fragments/rw_prune.lua
if mode ~= false then
  prune_readers(ARGV[4])
end
local held = tonumber(redis.call('hget', KEYS[1], ARGV[2]) or 0)
if held == 0 and mode ~= 'write' and redis.call('exists', KEYS[2]) == 1 then
--#include fragments/time.lua
  redis.call('zremrangebyscore', KEYS[2], '-inf', now)
  local first = redis.call('zrange', KEYS[2], 0, 0, 'WITHSCORES')
  if first[1] then
    return {0, math.max(tonumber(first[2]) - now, 1)}
  end
end
if mode == false then
  redis.call('hset', KEYS[1], 'mode', 'read')
end
local lease = tonumber(ARGV[1])
local target = tonumber(ARGV[3])
if held == 0 then
  target = 1
end
-- Holds the client does not account for are given back.
for k = target + 1, held do
  redis.call('del', timeouts .. ':' .. k)
end
-- The earlier holds live at least as long as this one (see the header).
for k = 1, target - 1 do
  local ttl = redis.call('pttl', timeouts .. ':' .. k)
  if ttl >= 0 and ttl < lease then
    redis.call('pexpire', timeouts .. ':' .. k, lease)
  end
end
redis.call('hset', KEYS[1], ARGV[2], target)
redis.call('set', timeouts .. ':' .. target, '1', 'px', ARGV[1])
-- A nested hold with a shorter lease must not cut the others short.
if redis.call('pttl', KEYS[1]) < lease then
  redis.call('pexpire', KEYS[1], ARGV[1])
end
return {1, target}

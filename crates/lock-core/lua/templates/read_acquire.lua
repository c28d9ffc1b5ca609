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
-- Better than Redisson: a Hash without a mode field (a plain lock) is refused instead
-- of joined. Dead readers are not pruned here (a dead reader blocks no reader): the
-- write acquire and the last read release prune them, so a read acquire costs the same
-- however many readers hold.
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
-- Phase-fair (leasehold's, beside the layout; Redisson's readers ignore it): a fresh
-- read (the owner holds no read, and the lock is not in its own write mode) is refused
-- while KEYS[2] has a live waiting writer (see write_acquire.lua), so that writer waits
-- for at most the read phase it arrived in; dead entries (deadline passed, server
-- clock) are purged first. Re-entries always enter, so a reader never waits for a
-- writer that waits for it. A waiting call that is refused (write-locked, or behind a
-- waiting writer) registers its owner in KEYS[3] with a deadline (now + ARGV[6]) and
-- its lease, refreshed by each of its calls: the next write release (write_release.lua)
-- grants every live registered reader its hold in one step and names it on the grant
-- channel, so a woken reader runs no script. A registered owner that acquires by
-- itself (ARGV[5] = "2") removes its entry.
--
-- KEYS[1]  lock key NAME (Hash)
-- KEYS[2]  waiting writers "leasehold_rwlock_writers:{NAME}" (ZSet writer -> deadline ms)
-- KEYS[3]  waiting readers "leasehold_rwlock_readers:{NAME}" (Hash reader owner ->
--          "DEADLINE_MS:LEASE_MS:TICKET")
-- ARGV[1]  lease in ms (> 0): the new hold's timeout key gets it; the Hash's TTL and
--          the owner's earlier timeout keys' TTLs are raised to it, never lowered
-- ARGV[2]  reader owner field "CLIENT_UUID:N"
-- ARGV[3]  the owner's read hold count after this acquire (>= 1)
-- ARGV[4]  the key prefix of every reader's timeout keys: "{NAME}", or NAME when it
--          contains "{" (Redisson's suffixName rule); this owner's timeout keys are
--          ARGV[4] .. ":" .. ARGV[2] .. ":rwlock_timeout:k" (Redisson's layout)
-- ARGV[5]  "0": a single try (registers nothing); "1": a waiting call not registered
--          yet; "2": a waiting call whose owner may be registered in KEYS[3]
-- ARGV[6]  keep-alive in ms of a registration in KEYS[3] (> 0 for a waiting call)
-- ARGV[7]  the call's ticket (its owner's turn number), kept with the registration and
--          named with a grant (see rw_admit.lua)
--
-- Replies:
--   {1, 1}        acquired fresh (the owner had no live read hold): count = 1
--   {1, ARGV[3]}  re-entered: the owner's count is now ARGV[3] (also the claim of a
--                 hold a write release granted: count 1)
--   {0, pttl}     write-locked by another owner; pttl = the Hash's PTTL (-1: no expiry)
--   {0, wait}     a fresh read while a leasehold writer waits; wait = ms until the first
--                 waiting writer's entry expires (at least 1)
-- Errors:
--   WRONGTYPE   KEYS[1] holds another type, or a Hash without "mode"; nothing written
--#include fragments/rw_mode.lua
local waiting = ARGV[5]
-- The server clock (TIME), read once and only when needed (a deadline).
local now = nil
local function clock()
  if now == nil then
    local t = redis.call('time')
    now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  end
  return now
end
-- Not acquired: a waiting call registers (or refreshes) its owner for a grant.
local function refused(wait)
  if waiting ~= '0' then
    local keepalive = tonumber(ARGV[6])
    redis.call('hset', KEYS[3], ARGV[2], (clock() + keepalive) .. ':' .. ARGV[1] .. ':' .. ARGV[7])
    -- The Hash lives as long as the latest registration's keep-alive: each entry has its
    -- own deadline, and a client with a shorter keep-alive only makes the others'
    -- entries vanish early (those readers then retry on the write release's "1").
    redis.call('pexpire', KEYS[3], keepalive)
  end
  return {0, wait}
end
if mode == 'write' and redis.call('hexists', KEYS[1], ARGV[2] .. ':write') == 0 then
  return refused(redis.call('pttl', KEYS[1]))
end
local timeouts = ARGV[4] .. ':' .. ARGV[2] .. ':rwlock_timeout'
-- In a MIGRATING cluster slot a script may touch only keys still on this node, and the
-- new hold's timeout key is a new key (Redis puts those on the target): touch it first,
-- so that such a call fails before it writes anything.
redis.call('pttl', timeouts .. ':' .. ARGV[3])
local held = tonumber(redis.call('hget', KEYS[1], ARGV[2]) or 0)
if held == 0 and mode ~= 'write' and redis.call('exists', KEYS[2]) == 1 then
  redis.call('zremrangebyscore', KEYS[2], '-inf', clock())
  local first = redis.call('zrange', KEYS[2], 0, 0, 'WITHSCORES')
  if first[1] then
    return refused(math.max(tonumber(first[2]) - clock(), 1))
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
if waiting == '2' then
  redis.call('hdel', KEYS[3], ARGV[2])
end
return {1, target}

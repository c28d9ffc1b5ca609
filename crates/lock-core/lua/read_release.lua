-- read_release.lua: set a reader owner's read hold count of a read/write lock to what
-- its remaining read guards account for (see read_acquire.lua for the layout); at 0
-- remove its field, and when no holder is left delete the lock and publish Redisson's
-- read-unlock message "0" on "redisson_rwlock:{NAME}" (a waiting writer tries). Used
-- for unlock, the background release of a dropped guard, and to undo an acquire whose
-- caller went away.
--
-- Replay-safe as release.lua: the client sends the count it wants (its live read guards
-- after this release); the timeout keys of the holds above it are deleted, so a replay
-- sets the same count again and deletes nothing more.
--
-- Better than Redisson: reader fields with no live timeout key (dead readers) are
-- pruned at every last release (rw_prune.lua), not only once none is left; in write
-- mode (a writer's own read inside its write) the Hash's TTL is never lowered, where
-- Redisson cuts it to the readers' longest lease; a Hash without "mode" is not touched.
--
-- Only KEYS[1] is declared: the owner's timeout-key prefix "{NAME}:OWNER:rwlock_timeout"
-- is built here from ARGV[4] and ARGV[1] (it never exists; see read_acquire.lua), and
-- the channel comes in ARGV[7] (a channel is never a key). A declared key missing on the
-- node makes a call in a MIGRATING cluster slot a TRYAGAIN refusal for the whole window,
-- while the keys this script touches (the lock, the owner's timeout keys) are still
-- there and a release can run. The channel has NAME's hash tag (SPUBLISH stays in the
-- slot).
--
-- While holds remain and ARGV[3] > 0, the owner's remaining timeout keys are raised to
-- ARGV[3] as the Hash is (never lowered): the client moves its guards' deadline to it,
-- and a read hold lives only as long as its timeout keys.
--
-- KEYS[1]  lock key NAME (Hash)
-- ARGV[1]  reader owner field "CLIENT_UUID:N"
-- ARGV[2]  the owner's read hold count after this release (>= 0)
-- ARGV[3]  TTL in ms the remaining holds need (the watchdog lease while a watchdog
--          hold remains), or 0: while holds remain the Hash's TTL is raised to it
-- ARGV[4]  the key prefix of every reader's timeout keys: "{NAME}", or NAME when it
--          contains "{"
-- ARGV[5]  the publish command: "publish" or "spublish" (sharded, in a cluster)
-- ARGV[6]  read-unlock message ("0", Redisson's UNLOCK_MESSAGE)
-- ARGV[7]  channel "redisson_rwlock:{NAME}"
-- ARGV[8]  "1": the clean-up of a wait that ended without its hold: also remove the
--          owner's registration from the waiting readers KEYS[2] (a grant that came
--          meanwhile is given back by the count, as any hold the client does not
--          account for); absent or "0": an unlock, which declares only KEYS[1]
-- KEYS[2]  (with ARGV[8] = "1") waiting readers "leasehold_rwlock_readers:{NAME}"
--
-- Replies:
--   -1  the owner holds no read on KEYS[1] (or KEYS[1] is not a read/write lock):
--       nothing written, nothing published
--    0  released: the owner's field and timeout keys removed; when no live holder was
--       left, the lock deleted and ARGV[6] published; in read mode the Hash's TTL is
--       then the longest live read hold's
--    N  N = ARGV[2] > 0 read holds remain; the Hash's TTL and the owner's timeout
--       keys' TTLs are at least ARGV[3]
-- Errors:
--   WRONGTYPE   KEYS[1] holds another type; nothing written
if ARGV[8] == '1' then
  redis.call('hdel', KEYS[2], ARGV[1])
end
local mode = redis.call('hget', KEYS[1], 'mode')
if mode == false then
  return -1
end
local held = tonumber(redis.call('hget', KEYS[1], ARGV[1]) or 0)
if held == 0 then
  return -1
end
local timeouts = ARGV[4] .. ':' .. ARGV[1] .. ':rwlock_timeout'
local target = tonumber(ARGV[2])
for k = target + 1, held do
  redis.call('del', timeouts .. ':' .. k)
end
if target > 0 then
  redis.call('hset', KEYS[1], ARGV[1], target)
  local need = tonumber(ARGV[3])
  if need > 0 then
    if redis.call('pttl', KEYS[1]) < need then
      redis.call('pexpire', KEYS[1], need)
    end
    for k = 1, target do
      local ttl = redis.call('pttl', timeouts .. ':' .. k)
      if ttl >= 0 and ttl < need then
        redis.call('pexpire', timeouts .. ':' .. k, need)
      end
    end
  end
  return target
end
redis.call('hdel', KEYS[1], ARGV[1])
local function prune_readers(prefix)
  local live, longest, present = 0, 0, {}
  local fields = redis.call('hgetall', KEYS[1])
  for i = 1, #fields, 2 do
    local field, count = fields[i], tonumber(fields[i + 1])
    if count ~= nil and field ~= 'mode' and string.sub(field, -6) ~= ':write' then
      local alive = false
      for k = count, 1, -1 do
        local ttl = redis.call('pttl', prefix .. ':' .. field .. ':rwlock_timeout:' .. k)
        if ttl ~= -2 then
          alive = true
          if ttl > longest then longest = ttl end
        end
      end
      if alive then
        live = live + 1
        present[field] = true
      else
        redis.call('hdel', KEYS[1], field)
      end
    end
  end
  return live, longest, present
end
local live, longest = prune_readers(ARGV[4])
if mode == 'write' then
  -- The writer's own read: the write hold stays, and so does its TTL.
  if redis.call('hlen', KEYS[1]) > 1 then
    return 0
  end
elseif live > 0 then
  if longest > 0 then
    redis.call('pexpire', KEYS[1], longest)
  end
  return 0
end
redis.call('del', KEYS[1])
redis.call(ARGV[5], ARGV[7], ARGV[6])
return 0

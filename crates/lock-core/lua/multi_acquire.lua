-- multi_acquire.lua: take or re-enter several reentrant locks of one hash slot at once,
-- all or none, in one round trip (a MultiLock's members on one client and slot). Each
-- member is a lock in Redisson's RLock layout exactly as acquire.lua writes it: a Hash,
-- field = owner "CLIENT_UUID:N", value = hold count, PEXPIRE = the lease.
--
-- As acquire.lua's single try (ARGV[4] = "0" there), it neither reads nor writes the
-- wait queue: a free lock is taken even if leasehold waiters are queued for it (a
-- release hands a lock to its first live waiter by writing that waiter's field, so a
-- lock handed over is never free). When a member is held by another owner, nothing is
-- written and the reply names the first such member in KEYS order; the caller then
-- waits for that lock alone, by acquire.lua's waiting call (which queues up and sets the
-- waiter flag, so that the holder's release publishes), and comes back for the rest.
--
-- The counts are absolute, as acquire.lua's are: a replayed or retried call sets the
-- same counts again.
--
-- KEYS[i]      member i's lock key (i = 1..n; every key in one hash slot, no key twice)
-- ARGV[1]      lease in milliseconds (> 0; checked by the caller). A re-entry never
--              shortens a key's TTL: it only raises it to ARGV[1]
-- ARGV[2i]     member i's owner field
-- ARGV[2i+1]   member i's hold count after this acquire: its live guards + 1 (>= 1)
--
-- Replies:
--   {1, holds_1, ..., holds_n}
--               acquired all: holds_i = 1 where the key did not exist (fresh), else
--               ARGV[2i+1] (the owner's field existed: re-entered)
--   {0, i, pttl}
--               member i (the first in KEYS order) is held by another owner; pttl is
--               its key's remaining TTL in ms (-1: no expiry). Nothing was written
-- Errors:
--   WRONGTYPE   a key exists and is not a Hash; nothing was written (every read comes
--               before the first write)
local n = #KEYS
local fresh = {}
for i = 1, n do
  local key = KEYS[i]
  fresh[i] = redis.call('exists', key) == 0
  -- HGET fails on a key of another type before anything is written.
  if not fresh[i] and not redis.call('hget', key, ARGV[2 * i]) then
    return {0, i, redis.call('pttl', key)}
  end
end
local reply = {1}
for i = 1, n do
  local key, owner = KEYS[i], ARGV[2 * i]
  if fresh[i] then
    redis.call('hset', key, owner, 1)
    redis.call('pexpire', key, ARGV[1])
    reply[i + 1] = 1
  else
    redis.call('hset', key, owner, ARGV[2 * i + 1])
    -- A nested hold with a shorter lease must not cut the outer holds short.
    if redis.call('pttl', key) < tonumber(ARGV[1]) then
      redis.call('pexpire', key, ARGV[1])
    end
    reply[i + 1] = tonumber(ARGV[2 * i + 1])
  end
end
return reply

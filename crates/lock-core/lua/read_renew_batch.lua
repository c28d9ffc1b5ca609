-- read_renew_batch.lua: extend the read holds of many read/write locks in one call (the
-- watchdog), this client's own only: each hold names the lock and its owner's own
-- timeout-key prefix, so another client's read holds are never renewed (Redisson
-- 3.44-4.3 renewed every holder's, keeping crashed readers alive). Never creates or
-- resurrects a key: a hold is extended only while its owner's field exists, and only
-- the timeout keys that still exist.
--
-- Only the Hashes are declared: a timeout-key prefix is no key (nothing is stored under
-- it), and Redis refuses a call that declares a missing key while its slot migrates
-- (TRYAGAIN), which would let the hold expire under a migration longer than its lease.
-- The timeout keys built from the prefix carry the lock's hash tag, so its slot.
--
-- KEYS[i]      lock key NAME (Hash) of hold i; in a cluster all in one hash slot
-- ARGV[1]      lease in ms (> 0)
-- ARGV[2i]     reader owner field of hold i
-- ARGV[2i+1]   its owner's timeout-key prefix "{NAME}:OWNER:rwlock_timeout" (not a key)
--
-- Replies:
--   an array of n integers, one per hold in order:
--     1    the owner's field exists; its timeout keys and the Hash have a TTL of at
--          least ARGV[1] now (raised, never lowered)
--     0    the owner's field is gone (released, expired, deleted, pruned, or the key
--          changed type): untouched
--     c+1  (>= 2) the owner's field exists with c holds and the Hash was extended, but
--          not every timeout key 1..c was found on this node: expired, or (while the slot
--          migrates) on the other node. The client renews those keys one per call
--          (read_renew_timeouts.lua), following the migration.
local lease = tonumber(ARGV[1])
local renewed = {}
for i = 1, #KEYS do
  local key, owner, prefix = KEYS[i], ARGV[2 * i], ARGV[2 * i + 1]
  local count = redis.pcall('hget', key, owner)
  count = type(count) == 'string' and tonumber(count) or nil
  if count ~= nil and count > 0 then
    local all_here = true
    for k = 1, count do
      local timeout = prefix .. ':' .. k
      -- pcall: on a migrating source, a key that already moved is refused (not local).
      local ttl = redis.pcall('pttl', timeout)
      if type(ttl) ~= 'number' or ttl == -2 then
        all_here = false
      elseif ttl < lease then
        redis.call('pexpire', timeout, lease)
      end
    end
    if redis.call('pttl', key) < lease then
      redis.call('pexpire', key, lease)
    end
    renewed[i] = all_here and 1 or count + 1
  else
    renewed[i] = 0
  end
end
return renewed

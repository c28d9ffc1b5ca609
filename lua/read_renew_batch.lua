-- read_renew_batch.lua: extend the read holds of many read/write locks in one call (the
-- watchdog), this client's own only: each pair names the lock and its owner's own
-- timeout-key prefix, so another client's read holds are never renewed (Redisson
-- 3.44-4.3 renewed every holder's, keeping crashed readers alive). Never creates or
-- resurrects a key: a hold is extended only while its owner's field exists, and only
-- the timeout keys that still exist.
--
-- KEYS[2i-1]  lock key NAME (Hash) of pair i; in a cluster all in one hash slot
-- KEYS[2i]    its owner's timeout-key prefix "{NAME}:OWNER:rwlock_timeout"
-- ARGV[1]     lease in ms (> 0)
-- ARGV[1+i]   reader owner field of pair i
--
-- Replies:
--   an array of n integers, one per pair in order:
--     1  the owner's field exists; its live timeout keys and the Hash have a TTL of at
--        least ARGV[1] now (raised, never lowered)
--     0  the owner's field is gone (released, expired, deleted, pruned, or the key
--        changed type): untouched
local lease = tonumber(ARGV[1])
local renewed = {}
for i = 1, #KEYS / 2 do
  local key, prefix = KEYS[2 * i - 1], KEYS[2 * i]
  local count = redis.pcall('hget', key, ARGV[i + 1])
  count = type(count) == 'string' and tonumber(count) or nil
  if count ~= nil and count > 0 then
    for k = 1, count do
      local timeout = prefix .. ':' .. k
      local ttl = redis.call('pttl', timeout)
      if ttl ~= -2 and ttl < lease then
        redis.call('pexpire', timeout, lease)
      end
    end
    if redis.call('pttl', key) < lease then
      redis.call('pexpire', key, lease)
    end
    renewed[i] = 1
  else
    renewed[i] = 0
  end
end
return renewed

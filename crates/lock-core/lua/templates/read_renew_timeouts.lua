-- read_renew_timeouts.lua: raise the TTL of read holds' timeout keys that
-- read_renew_batch.lua did not find next to their lock's Hash (the watchdog): while a
-- slot migrates, a key may be on the source and its Hash on the target, or the other
-- way round. Declared one per key, so that a call that meets the migration is split
-- and each key's call follows ASK on its own. Never creates or resurrects a key.
--
-- KEYS[i]    a timeout key "{NAME}:OWNER:rwlock_timeout:k"; in a cluster all in one
--            hash slot
-- ARGV[1]    lease in ms (> 0)
--
-- Replies:
--   an array of n integers, one per key in order:
--     1  the key exists; its TTL is now at least ARGV[1] (raised, never lowered)
--     0  the key does not exist (that hold's lease ran out): untouched
local lease = tonumber(ARGV[1])
local found = {}
for i, key in ipairs(KEYS) do
  local ttl = redis.call('pttl', key)
  if ttl == -2 then
    found[i] = 0
  else
    if ttl < lease then
      redis.call('pexpire', key, lease)
    end
    found[i] = 1
  end
end
return found

-- renew_batch.lua: extend the leases of many held locks in one call (the watchdog).
-- Never creates or resurrects a key: a key is extended only while its owner field exists.
--
-- KEYS[1..n]  lock keys (Hashes); in a cluster all in one hash slot
-- ARGV[1]     lease in ms (> 0)
-- ARGV[1+i]   owner field for KEYS[i]
--
-- Replies:
--   an array of n integers, one per key in order:
--     1  the owner field exists; the key's TTL is now at least ARGV[1] (raised, never
--        lowered: a longer explicit lease of the same owner is kept)
--     0  the owner field is gone (expired, deleted, or the key changed type): untouched
-- A key of another type answers 0 for that key only (pcall), so one bad key cannot
-- fail the renewal of the others.
local renewed = {}
for i, key in ipairs(KEYS) do
  if redis.pcall('hexists', key, ARGV[i + 1]) == 1 then
    if redis.call('pttl', key) < tonumber(ARGV[1]) then
      redis.call('pexpire', key, ARGV[1])
    end
    renewed[i] = 1
  else
    renewed[i] = 0
  end
end
return renewed

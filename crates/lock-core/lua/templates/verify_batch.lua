-- verify_batch.lua: check, without writing anything, that many holds still exist (the
-- client's check of every hold it has after a reconnect or a failover). Unlike
-- renew_batch.lua it never touches a TTL: a fixed lease is not extended by a check.
--
-- KEYS[1..n]  lock keys (Hashes); in a cluster all in one hash slot
-- ARGV[i]     owner field for KEYS[i]
--
-- Replies:
--   an array of n integers, one per key in order:
--     1  the owner field exists
--     0  the owner field is gone (expired, deleted, never replicated to this node, or the
--        key changed type)
-- A key of another type answers 0 for that key only (pcall), so one bad key cannot
-- fail the check of the others.
local found = {}
for i, key in ipairs(KEYS) do
  if redis.pcall('hexists', key, ARGV[i]) == 1 then
    found[i] = 1
  else
    found[i] = 0
  end
end
return found

-- force_release.lua: delete a lock whoever holds it, and wake its waiters.
--
-- KEYS[1]  lock key
-- KEYS[2]  release channel "redisson_lock__channel:{NAME}"
-- ARGV[1]  unlock message ("0")
-- ARGV[2]  the publish command: "publish" (classic pub/sub) or "spublish" (sharded)
-- ARGV[3]  optional: the lock's history "leasehold_history:{NAME}" (a List, in NAME's
--          slot; in ARGV, not KEYS, for the reason rw_force_release.lua gives), or ''
--          to record nothing
-- ARGV[4]  with ARGV[3]: who forced it (the forcing client's connection name)
--
-- Replies:
--   1  the key existed and was deleted; ARGV[1] published; with ARGV[3], the removed
--      owners recorded in the history (fragments/force_history.lua)
--   0  there was no such key; nothing published or recorded
--#include fragments/force_owners.lua history=ARGV[3]
if redis.call('del', KEYS[1]) == 1 then
  redis.call(ARGV[2], KEYS[2], ARGV[1])
  --#include fragments/force_history.lua history=ARGV[3] by=ARGV[4]
  return 1
end
return 0

-- fair_force_release.lua: force_release.lua for a fair lock: delete the lock whoever
-- holds it, purge the dead queue heads, and tell the head (Redisson's RFairLock
-- forceUnlock does the same). Queued waiters keep their places.
--
-- KEYS[1]  lock key
-- KEYS[2]  wait queue "redisson_lock_queue:{NAME}" (List)
-- KEYS[3]  deadlines "redisson_lock_timeout:{NAME}" (ZSet, ms since the epoch)
-- KEYS[4]  release channel "redisson_lock__channel:{NAME}"; the head's channel is
--          KEYS[4] .. ':' .. head
-- ARGV[1]  unlock message ("0")
-- ARGV[2]  the publish command: "publish" (classic pub/sub) or "spublish" (sharded)
-- ARGV[3]  optional: the lock's history "leasehold_history:{NAME}", or '' (as
--          force_release.lua)
-- ARGV[4]  with ARGV[3]: who forced it
--
-- Replies:
--   1  the key existed and was deleted; ARGV[1] published to the head's channel, if any;
--      with ARGV[3], the removed owners recorded in the history
--   0  no key; nothing published
-- Errors:
--   WRONGTYPE  KEYS[2] is not a List or KEYS[3] not a ZSet; nothing was written

redis.call('lindex', KEYS[2], 0)
redis.call('zcard', KEYS[3])

--#include fragments/time.lua
--#include fragments/fair_purge.lua

--#include fragments/force_owners.lua history=ARGV[3]
if redis.call('del', KEYS[1]) == 0 then
  return 0
end
--#include fragments/force_history.lua history=ARGV[3] by=ARGV[4]
local head = redis.call('lindex', KEYS[2], 0)
if head then
  redis.call(ARGV[2], KEYS[4] .. ':' .. head, ARGV[1])
end
return 1

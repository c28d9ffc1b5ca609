-- rw_force_release.lua: delete a read/write lock whoever holds it (readers and writer),
-- and publish the write-unlock message, which wakes every waiter. The readers' timeout
-- keys are left to expire with their leases (as Redisson's forceUnlock does): without
-- the Hash they grant nothing, and an acquire writes a fresh count over them.
--
-- Only KEYS[1] is declared; the channel comes in ARGV[3] (it is never a key, and a
-- declared key missing on the node makes the call a TRYAGAIN refusal in a MIGRATING
-- cluster slot, while the lock is still there to delete). It has NAME's hash tag.
--
-- KEYS[1]  lock key NAME (Hash)
-- ARGV[1]  unlock message ("1": wakes every waiter)
-- ARGV[2]  the publish command: "publish" or "spublish" (sharded, in a cluster)
-- ARGV[3]  channel "redisson_rwlock:{NAME}"
-- ARGV[4]  optional: the lock's history "leasehold_history:{NAME}", or '' (as
--          force_release.lua)
-- ARGV[5]  with ARGV[4]: who forced it
--
-- Replies:
--   1  the lock existed and was deleted; ARGV[1] published; with ARGV[4], the removed
--      readers and writer recorded in the history
--   0  there was no such key; nothing published
-- Errors:
--   WRONGTYPE   KEYS[1] holds another type, or a Hash without "mode" (a plain lock);
--               nothing written
--#include fragments/rw_mode.lua
if mode == false then
  return 0
end
--#include fragments/force_owners.lua history=ARGV[4]
redis.call('del', KEYS[1])
redis.call(ARGV[2], ARGV[3], ARGV[1])
--#include fragments/force_history.lua history=ARGV[4] by=ARGV[5]
return 1

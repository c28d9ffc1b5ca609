-- force_release_owner.lua: delete a lock only if the given owner holds it (`leasehold
-- unlock NAME --force --owner ID`), wake its waiters as force_release.lua and
-- fair_force_release.lua do, and record it in the lock's history.
--
-- KEYS[1]  lock key NAME
-- KEYS[2]  release channel "redisson_lock__channel:{NAME}"; a fair waiter's channel
--          is KEYS[2] .. ':' .. owner
-- KEYS[3]  the fair lock's queue "redisson_lock_queue:{NAME}" (List)
-- ARGV[1]  the owner: a Hash field (UUID:N) or a simple lock's String value (UUID-N)
-- ARGV[2]  unlock message ("0")
-- ARGV[3]  the publish command: "publish" (classic pub/sub) or "spublish" (sharded)
-- ARGV[4]  the lock's history "leasehold_history:{NAME}" (a List, in NAME's slot; in
--          ARGV, not KEYS, for the reason rw_force_release.lua gives), or '' to record
--          nothing
-- ARGV[5]  with ARGV[4]: who forced it (the forcing client's connection name)
--
-- Replies:
--   1  ARGV[1] held the lock; the key was deleted, ARGV[2] published on the release
--      channel and, when fair waiters queue, on the queue head's channel; with
--      ARGV[4], the removed owners recorded in the history (fragments/force_history.lua)
--   0  no key, or ARGV[1] does not hold it; nothing written
local kind = redis.call('type', KEYS[1])['ok']
local holds = false
if kind == 'hash' then
  holds = redis.call('hexists', KEYS[1], ARGV[1]) == 1
elseif kind == 'string' then
  holds = redis.call('get', KEYS[1]) == ARGV[1]
end
if not holds then
  return 0
end
--#include fragments/force_owners.lua history=ARGV[4]
redis.call('del', KEYS[1])
redis.call(ARGV[3], KEYS[2], ARGV[2])
if redis.call('type', KEYS[3])['ok'] == 'list' then
  local head = redis.call('lindex', KEYS[3], 0)
  if head then
    redis.call(ARGV[3], KEYS[2] .. ':' .. head, ARGV[2])
  end
end
--#include fragments/force_history.lua history=ARGV[4] by=ARGV[5]
return 1

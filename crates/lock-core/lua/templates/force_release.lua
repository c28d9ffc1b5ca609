-- force_release.lua: delete a lock whoever holds it, and wake its waiters.
--
-- KEYS[1]  lock key
-- KEYS[2]  release channel "redisson_lock__channel:{NAME}"
-- ARGV[1]  unlock message ("0")
-- ARGV[2]  the publish command: "publish" (classic pub/sub) or "spublish" (sharded)
--
-- Replies:
--   1  the key existed and was deleted; ARGV[1] published
--   0  there was no such key; nothing published
if redis.call('del', KEYS[1]) == 1 then
  redis.call(ARGV[2], KEYS[2], ARGV[1])
  return 1
end
return 0

-- release.lua: set the owner's hold count to what its remaining guards account for;
-- at 0, remove the owner and publish the unlock message. Used for unlock, for the
-- background release of a dropped guard, and to undo an acquire whose caller went away.
--
-- As in acquire.lua, the client sends the count it wants (its live guards after this
-- release), so a replayed or retried call is harmless: it sets the same count again.
-- Holds the client does not account for (an abandoned acquire that did apply) are
-- given back by the same call.
--
-- KEYS[1]  lock key (Hash)
-- KEYS[2]  release channel "redisson_lock__channel:{NAME}"
-- ARGV[1]  owner field
-- ARGV[2]  the owner's hold count after this release (>= 0); 0 = give it all back
-- ARGV[3]  TTL in ms the remaining holds need (the watchdog lease while a watchdog
--          hold remains), or 0: while holds remain the key's TTL is raised to it, never
--          lowered
-- ARGV[4]  unlock message ("0", Redisson's UNLOCK_MESSAGE)
--
-- Replies:
--   -1  the owner holds nothing on KEYS[1]: nothing written, nothing published
--    0  released: the owner's field removed (the key with it, as the owner held it
--       alone), ARGV[4] published
--    N  N = ARGV[2] > 0 holds remain; the key's TTL is at least ARGV[3]
-- Errors:
--   WRONGTYPE   KEYS[1] exists and is not a Hash; nothing was written
if tonumber(ARGV[2]) == 0 then
  -- HDEL checks the owner and removes it in one command; it fails on a key of another
  -- type before writing. A Hash with no field left is deleted by Redis itself.
  if redis.call('hdel', KEYS[1], ARGV[1]) == 0 then
    return -1
  end
  redis.call('publish', KEYS[2], ARGV[4])
  return 0
end
if redis.call('hexists', KEYS[1], ARGV[1]) == 0 then
  return -1
end
redis.call('hset', KEYS[1], ARGV[1], ARGV[2])
local need = tonumber(ARGV[3])
if need > 0 and redis.call('pttl', KEYS[1]) < need then
  redis.call('pexpire', KEYS[1], need)
end
return tonumber(ARGV[2])

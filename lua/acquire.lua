-- acquire.lua: take or re-enter a reentrant lock (Redisson's RLock layout).
--
-- The client is the authority on how many holds its owner has: its acquires and
-- releases take turns, so it always knows how many live guards it has. It sends the
-- count it wants to end up with, and the script sets it. A replayed or retried call
-- sets the same count again, so it counts once, with no per-request state on the
-- server (no latch key to write, expire or leave behind).
--
-- KEYS[1]  lock key: a Hash, field = owner "CLIENT_UUID:N", value = hold count
-- ARGV[1]  lease in milliseconds (> 0; checked by the caller). A re-entry never
--          shortens the key's TTL: it only raises it to ARGV[1]
-- ARGV[2]  owner field
-- ARGV[3]  the owner's hold count after this acquire: its live guards + 1 (>= 1)
--
-- Replies:
--   {1, 1}       acquired fresh: the key did not exist, or this owner's field was
--                gone (its earlier holds expired or were force-released); count = 1
--   {1, ARGV[3]} re-entered: the owner's field existed; its count is now ARGV[3]
--   {0, pttl}    held by another owner; pttl = the key's remaining TTL in ms,
--                -1 when the key has no expiry
-- Errors:
--   WRONGTYPE   KEYS[1] exists and is not a Hash; nothing was written
if redis.call('exists', KEYS[1]) == 0 then
  redis.call('hset', KEYS[1], ARGV[2], 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  return {1, 1}
end
-- HGET fails on a key of another type before anything is written.
if redis.call('hget', KEYS[1], ARGV[2]) then
  redis.call('hset', KEYS[1], ARGV[2], ARGV[3])
  -- A nested hold with a shorter lease must not cut the outer holds short.
  if redis.call('pttl', KEYS[1]) < tonumber(ARGV[1]) then
    redis.call('pexpire', KEYS[1], ARGV[1])
  end
  return {1, tonumber(ARGV[3])}
end
return {0, redis.call('pttl', KEYS[1])}

-- undo_acquire.lua: give back the hold taken by an acquire whose caller went away
-- (its future was dropped while the acquire was in flight, or its reply was lost).
--
-- KEYS[1]  lock key (Hash)
-- KEYS[2]  release channel "redisson_lock__channel:{NAME}"
-- KEYS[3]  acquire latch of the abandoned request (see acquire.lua)
-- ARGV[1]  owner field
-- ARGV[2]  TTL in ms the remaining holds need, or 0: while holds remain the key's TTL
--          is raised to it, never lowered
-- ARGV[3]  unlock message ("0")
--
-- Replies:
--   -1  nothing to undo: the acquire never applied, was undone already, its latch
--       expired (older than the replay window), or the owner's hold is gone
--    0  the abandoned hold was the last: key deleted, ARGV[3] published
--    N  N > 0 holds remain (the owner holds the lock through other guards)
-- Errors:
--   WRONGTYPE   KEYS[1] exists and is not a Hash; nothing was written (the check
--               comes before the first write)
if redis.call('exists', KEYS[3]) == 0 then
  return -1
end
if redis.call('hexists', KEYS[1], ARGV[1]) == 0 then
  redis.call('del', KEYS[3])
  return -1
end
redis.call('del', KEYS[3])
local holds = redis.call('hincrby', KEYS[1], ARGV[1], -1)
if holds > 0 then
  local need = tonumber(ARGV[2])
  if need > 0 and redis.call('pttl', KEYS[1]) < need then
    redis.call('pexpire', KEYS[1], need)
  end
  return holds
end
redis.call('del', KEYS[1])
redis.call('publish', KEYS[2], ARGV[3])
return 0

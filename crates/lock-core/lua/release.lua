-- release.lua: give back one hold of a reentrant lock; the last one deletes the key
-- and publishes the unlock message.
--
-- KEYS[1]  lock key (Hash)
-- KEYS[2]  release channel "redisson_lock__channel:{NAME}"
-- KEYS[3]  unlock latch "redisson_unlock_latch:{NAME}:REQUEST_ID": stores this request's
--          answer, so a replayed or retried call returns it instead of releasing twice
-- KEYS[4]  acquire latch of the hold being given back (see acquire.lua): deleted here,
--          since the guard that held it is done and nothing will replay that acquire
-- ARGV[1]  TTL in ms the remaining holds need (the watchdog lease while a watchdog
--          hold remains), or 0: while holds remain the key's TTL is raised to it, never
--          lowered
-- ARGV[2]  owner field
-- ARGV[3]  unlock latch TTL in ms (> 0)
-- ARGV[4]  unlock message ("0", Redisson's UNLOCK_MESSAGE)
--
-- Replies:
--   -1  the owner holds no hold on KEYS[1]: nothing written, nothing published
--    0  released: the last hold was given back, the key deleted, ARGV[4] published
--    N  N > 0 holds remain; the key's TTL is at least ARGV[1]
-- Errors:
--   WRONGTYPE   KEYS[1] exists and is not a Hash; nothing was written
local prior = redis.call('get', KEYS[3])
if prior then
  return tonumber(prior)
end
if redis.call('hexists', KEYS[1], ARGV[2]) == 0 then
  return -1
end
redis.call('del', KEYS[4])
local holds = redis.call('hincrby', KEYS[1], ARGV[2], -1)
if holds > 0 then
  local need = tonumber(ARGV[1])
  if need > 0 and redis.call('pttl', KEYS[1]) < need then
    redis.call('pexpire', KEYS[1], need)
  end
else
  holds = 0
  redis.call('del', KEYS[1])
  redis.call('publish', KEYS[2], ARGV[4])
end
redis.call('set', KEYS[3], holds, 'PX', ARGV[3])
return holds

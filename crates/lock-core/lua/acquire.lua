-- acquire.lua: take or re-enter a reentrant lock (Redisson's RLock layout).
--
-- KEYS[1]  lock key: a Hash, field = owner "CLIENT_UUID:N", value = hold count
-- KEYS[2]  acquire latch "leasehold_acquire_latch:{NAME}:REQUEST_ID": marks that this
--          request already took a hold, so a replayed or retried call does not count twice
-- ARGV[1]  lease in milliseconds (> 0; checked by the caller). A re-entry never
--          shortens the key's TTL: it only raises it to ARGV[1]
-- ARGV[2]  owner field
-- ARGV[3]  acquire latch TTL in milliseconds (> 0)
--
-- Replies:
--   {1, holds}  acquired; holds = this owner's hold count after the call
--               (1 = fresh acquire, > 1 = re-entered)
--   {0, pttl}   held by another owner; pttl = the key's remaining TTL in ms,
--               -1 when the key has no expiry
-- Errors:
--   WRONGTYPE   KEYS[1] exists and is not a Hash; nothing was written
if redis.call('exists', KEYS[2]) == 1 then
  local holds = redis.call('hget', KEYS[1], ARGV[2])
  if holds then
    -- A replay of a call that already took its hold: do not count it again; answer
    -- with the owner's current hold count (which includes that hold).
    return {1, tonumber(holds)}
  end
  -- The hold this request took is gone (expired, force-released): acquire afresh below.
end
if redis.call('exists', KEYS[1]) == 0 then
  redis.call('hincrby', KEYS[1], ARGV[2], 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  redis.call('set', KEYS[2], '1', 'PX', ARGV[3])
  return {1, 1}
end
if redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
  local holds = redis.call('hincrby', KEYS[1], ARGV[2], 1)
  -- A nested hold with a shorter lease must not cut the outer holds short.
  if redis.call('pttl', KEYS[1]) < tonumber(ARGV[1]) then
    redis.call('pexpire', KEYS[1], ARGV[1])
  end
  redis.call('set', KEYS[2], '1', 'PX', ARGV[3])
  return {1, holds}
end
return {0, redis.call('pttl', KEYS[1])}

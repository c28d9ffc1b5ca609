-- status.lua: everything `leasehold status` shows about one lock, read in one atomic
-- step (read only). Used by the `leasehold` command (crates/cli), not by the library.
--
-- KEYS[1]  lock key NAME (Hash for Lock/FencedLock/FairLock, String for SimpleLock)
-- KEYS[2]  fencing counter "redisson_lock_token:{NAME}" (String integer)
-- KEYS[3]  leasehold's wait queue "leasehold_lock_queue:{NAME}" (List)
-- KEYS[4]  the fair lock's queue "redisson_lock_queue:{NAME}" (List)
--
-- Reply: an array of six
--   1  the lock key's type ("none", "hash", "string", ...)
--   2  its PTTL (-2 no key, -1 no expiry)
--   3  its contents: HGETALL's flat field/value array for a Hash, {value} for a
--      String, {} otherwise
--   4  the fencing counter's value, "" when there is none (or it is not a String)
--   5  leasehold's wait queue, head first ({} when none)
--   6  the fair queue, head first ({} when none)
local kind = redis.call('type', KEYS[1])['ok']
local pttl = redis.call('pttl', KEYS[1])
local body = {}
if kind == 'hash' then
  body = redis.call('hgetall', KEYS[1])
elseif kind == 'string' then
  body = { redis.call('get', KEYS[1]) }
end
local token = ''
if redis.call('type', KEYS[2])['ok'] == 'string' then
  token = redis.call('get', KEYS[2])
end
local function list(key)
  if redis.call('type', key)['ok'] == 'list' then
    return redis.call('lrange', key, 0, -1)
  end
  return {}
end
return { kind, pttl, body, token, list(KEYS[3]), list(KEYS[4]) }

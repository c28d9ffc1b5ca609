-- permits_total.lua: `leasehold run --permits N NAME`: the total of a permit-expirable
-- semaphore's permits (available plus held), read atomically, to refuse an N that
-- differs from the one the semaphore was set up with (as `consul lock -n` refuses a
-- conflicting limit). Read-only. Used by the `leasehold` command (crates/cli).
--
-- KEYS[1]  the count NAME (String: available permits)
-- KEYS[2]  the held permits "{NAME}:timeout" (ZSet; expired ones not yet reclaimed
--          included: their permit is not back in the count yet)
--
-- Replies:
--   the total, an integer (the count may be below 0 after a setPermits that lowered it)
--   -1 when there is no count (nobody set the semaphore up)
--   an error when the count is not a number
local count = redis.call('get', KEYS[1])
if not count then
  return -1
end
local n = tonumber(count)
if n == nil then
  return redis.error_reply('ERR the key is not a semaphore count')
end
return n + redis.call('zcard', KEYS[2])

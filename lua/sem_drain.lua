-- sem_drain.lua: take every available permit of a semaphore (Redisson's RSemaphore
-- drainPermits: nothing is published). DECRBY rather than SET keeps a TTL.
--
-- KEYS[1]  the semaphore NAME (String: the count of available permits, decimal)
-- ARGV[]   none
--
-- Replies:
--   the count before the drain (0 for a missing key, which stays missing); the count
--   is 0 afterwards
-- Errors:
--   WRONGTYPE   KEYS[1] is not a String, or not a whole number; nothing was written
local raw = redis.call('get', KEYS[1])
local count = 0
if raw then
  count = tonumber(raw)
  if count == nil or count ~= math.floor(count) then
    return redis.error_reply('WRONGTYPE semaphore ' .. KEYS[1] .. ' holds a String that is not a count')
  end
end
if not raw then
  return 0
end
redis.call('decrby', KEYS[1], string.format('%d', count))
return count

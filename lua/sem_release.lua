-- sem_release.lua: give permits back to a semaphore and tell its waiters (Redisson's
-- RSemaphore release script: no owner, no upper bound; a missing key is created).
--
-- KEYS[1]  the semaphore NAME (String: the count of available permits, decimal)
-- KEYS[2]  its channel, redisson_sc:{NAME}
-- ARGV[1]  permits to give back (1 or more; checked by the client)
-- ARGV[2]  the publish command: publish, or spublish (sharded pub/sub)
--
-- Replies:
--   the count after the release. It is published on KEYS[2] when above 0.
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
local left = redis.call('incrby', KEYS[1], ARGV[1])
if left > 0 then
  redis.call(ARGV[2], KEYS[2], string.format('%d', left))
end
return left

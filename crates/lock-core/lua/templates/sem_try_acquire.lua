-- sem_try_acquire.lua: take permits of a semaphore if that many are available
-- (Redisson's RSemaphore tryAcquire script, with the count's type checked).
--
-- KEYS[1]  the semaphore NAME (String: the count of available permits, decimal)
-- ARGV[1]  permits to take (1 or more; checked by the client)
--
-- Replies:
--   1  the count was at least ARGV[1] and was lowered by it
--   0  fewer permits are available (a missing key counts as 0): untouched
-- Errors:
--   WRONGTYPE   KEYS[1] is not a String, or not a whole number; nothing was written
--#include fragments/sem_count.lua
if raw and count >= tonumber(ARGV[1]) then
  redis.call('decrby', KEYS[1], ARGV[1])
  return 1
end
return 0

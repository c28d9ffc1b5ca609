-- sem_try_set_permits.lua: set a semaphore's count of permits once, if it was never
-- set (Redisson's RSemaphore trySetPermits script).
--
-- KEYS[1]  the semaphore NAME (String: the count of available permits, decimal)
-- KEYS[2]  its channel, redisson_sc:{NAME}
-- ARGV[1]  the count (0 or more; checked by the client)
-- ARGV[2]  the publish command: publish, or spublish (sharded pub/sub)
--
-- Replies:
--   1  KEYS[1] was missing and now holds ARGV[1], published on KEYS[2] when above 0
--   0  KEYS[1] exists: untouched
-- Errors:
--   WRONGTYPE   KEYS[1] is not a String, or not a whole number; nothing was written
--#include fragments/sem_count.lua
if raw then
  return 0
end
redis.call('set', KEYS[1], ARGV[1])
local set = tonumber(ARGV[1])
--#include fragments/sem_publish.lua count=set cmd=2
return 1

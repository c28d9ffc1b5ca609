-- sem_add_permits.lua: add to (or, with a negative delta, take from) a semaphore's
-- count of permits (Redisson's RSemaphore addPermits; the count may go below 0).
-- INCRBY rather than Redisson's SET keeps a TTL set on the key.
--
-- KEYS[1]  the semaphore NAME (String: the count of available permits, decimal)
-- KEYS[2]  its channel, redisson_sc:{NAME}
-- ARGV[1]  the delta (any whole number)
-- ARGV[2]  the publish command: publish, or spublish (sharded pub/sub)
--
-- Replies:
--   the count after the change. It is published on KEYS[2] when above 0.
-- Errors:
--   WRONGTYPE   KEYS[1] is not a String, or not a whole number; nothing was written
--#include fragments/sem_count.lua
local now_count = redis.call('incrby', KEYS[1], ARGV[1])
--#include fragments/sem_publish.lua count=now_count cmd=2
return now_count

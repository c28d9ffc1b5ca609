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
--#include fragments/sem_count.lua
local left = redis.call('incrby', KEYS[1], ARGV[1])
--#include fragments/sem_publish.lua count=left cmd=2
return left

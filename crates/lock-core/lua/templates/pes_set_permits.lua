-- pes_set_permits.lua: make a permit-expirable semaphore's total (available plus
-- acquired) `ARGV[1]` (Redisson's setPermits), and tell the waiters.
--
-- KEYS[1]  the semaphore NAME (String: the count of available permits, decimal)
-- KEYS[2]  its channel, redisson_sc:{NAME}
-- KEYS[3]  its permits, {NAME}:timeout (ZSet: raw 16-byte id -> lease end, epoch ms)
-- ARGV[1]  the total (0 or more; checked by the client)
-- ARGV[2]  the publish command: publish, or spublish (sharded pub/sub)
-- ARGV[3]  how many expired permits one call reclaims at most (the chunk)
--
-- Replies:
--   the count of available permits afterwards (the total minus the live permits; may
--   be below 0 when more are held than the new total). Published when above 0.
-- Errors:
--   WRONGTYPE   a key of another type, or a count that is not a whole number
--#include fragments/sem_count.lua
--#include fragments/time.lua
--#include fragments/pes_reclaim.lua chunk=3
count = count + reclaimed
local acquired = redis.call('zcount', KEYS[3], '(' .. now, '+inf')
-- Expired permits still listed are given back by later reclaims, so they count as
-- available now.
local available = tonumber(ARGV[1]) - acquired
redis.call('set', KEYS[1], string.format('%d', available - left_expired))
--#include fragments/sem_publish.lua count=available cmd=2
return available

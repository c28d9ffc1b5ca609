-- pes_permits.lua: the available and the acquired permits of a permit-expirable
-- semaphore, after a bounded reclaim (Redisson's availablePermits / acquiredPermits,
-- which reclaim every expired permit first; here expired permits beyond the chunk are
-- counted as available without being removed, so the answer is exact and the call
-- bounded).
--
-- KEYS[1]  the semaphore NAME (String: the count of available permits, decimal)
-- KEYS[2]  its channel, redisson_sc:{NAME}
-- KEYS[3]  its permits, {NAME}:timeout (ZSet: raw 16-byte id -> lease end, epoch ms)
-- ARGV[1]  the publish command: publish, or spublish (sharded pub/sub)
-- ARGV[2]  how many expired permits one call reclaims at most (the chunk)
--
-- Replies:
--   {available, acquired}: the count plus the expired permits still listed, and the
--   live permits (ZCOUNT of the leases ending after now)
-- Errors:
--   WRONGTYPE   a key of another type, or a count that is not a whole number
--#include fragments/sem_count.lua
--#include fragments/time.lua
--#include fragments/pes_reclaim.lua chunk=2
count = count + reclaimed
if reclaimed > 0 then
  --#include fragments/sem_publish.lua count=count cmd=1
end
local acquired = redis.call('zcount', KEYS[3], '(' .. now, '+inf')
return {count + left_expired, acquired}

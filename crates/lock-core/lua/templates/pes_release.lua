-- pes_release.lua: give one permit of a permit-expirable semaphore back by its id and
-- tell the waiters (Redisson's tryRelease(id), on the server's clock).
--
-- KEYS[1]  the semaphore NAME (String: the count of available permits, decimal)
-- KEYS[2]  its channel, redisson_sc:{NAME}
-- KEYS[3]  its permits, {NAME}:timeout (ZSet: raw 16-byte id -> lease end, epoch ms)
-- ARGV[1]  the permit's id (16 bytes, raw)
-- ARGV[2]  the publish command: publish, or spublish (sharded pub/sub)
-- ARGV[3]  how many expired permits one call reclaims at most (the chunk)
--
-- Replies:
--   1   released: the count went up by 1 and was published
--   0   no such permit (never taken, released already, or reclaimed after its lease)
--   -1  the permit was there but its lease had run out: it is given back (as a
--       reclaim would), and the caller is told it was no longer held
-- Errors:
--   WRONGTYPE   a key of another type, or a count that is not a whole number
--#include fragments/sem_count.lua
--#include fragments/time.lua
local score = redis.call('zscore', KEYS[3], ARGV[1])
local reply = 0
if score then
  redis.call('zrem', KEYS[3], ARGV[1])
  redis.call('incrby', KEYS[1], 1)
  count = count + 1
  reply = 1
  if tonumber(score) <= now then
    reply = -1
  end
end
--#include fragments/pes_reclaim.lua chunk=3
count = count + reclaimed
if reply ~= 0 or reclaimed > 0 then
  --#include fragments/sem_publish.lua count=count cmd=2
end
return reply

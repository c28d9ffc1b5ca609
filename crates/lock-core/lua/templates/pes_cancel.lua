-- pes_cancel.lua: undo a permit-expirable semaphore's waiting acquire that ended
-- without its permit (a deadline, an error, a dropped future): its place in the wait
-- queue is left, and a permit a release granted it before it heard is released (once:
-- by its id). Replay-safe.
--
-- KEYS[1]  the semaphore NAME (String: the count of available permits, decimal)
-- KEYS[2]  its channel, redisson_sc:{NAME}
-- KEYS[3]  its permits, {NAME}:timeout (ZSet: raw 16-byte id -> lease end, epoch ms)
-- KEYS[4]  the wait queue, leasehold_pes_queue:{NAME}
-- KEYS[5]  the queue's entries, leasehold_pes_waiters:{NAME}
-- KEYS[6]  the grants channel, leasehold_sem_grants:{NAME}
-- ARGV[1]  the acquire's permit id (16 bytes, raw)
-- ARGV[2]  the same id in hex (its queue member)
-- ARGV[3]  the publish command: publish, or spublish (sharded pub/sub)
-- ARGV[4]  WAIT_MS of a grant message
--
-- Replies:
--   1   a permit with that id was held (granted, or taken by an attempt whose answer
--       was lost): released, the count published
--   0   none held: nothing given back
-- Either way the id's queue entry is gone, and when it was queued or gave a permit
-- back, the queue is served (the waiters behind it may be served now).
-- Errors:
--   WRONGTYPE   a key of another type, or a count that is not a whole number
--#include fragments/sem_count.lua
local was_queued = redis.call('zrem', KEYS[4], ARGV[2]) == 1
redis.call('hdel', KEYS[5], ARGV[2])
local given = 0
if redis.call('zscore', KEYS[3], ARGV[1]) then
  count = redis.call('incrby', KEYS[1], 1)
  redis.call('zrem', KEYS[3], ARGV[1])
  --#include fragments/sem_publish.lua count=count cmd=3
  given = 1
end
if was_queued or given > 0 then
  --#include fragments/time.lua
  --#include fragments/pes_serve.lua wait=4 cmd=3 self=''
end
return given

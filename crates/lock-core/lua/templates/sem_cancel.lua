-- sem_cancel.lua: undo an acquire whose caller never learned its outcome (a timeout, a
-- lost reply, a reset connection, a dropped future, a wait that ended while queued),
-- exactly once: the permits it took, or a release granted it, are given back; if it has
-- not run, a tombstone refuses it when it does; its place in the wait queue is left.
--
-- KEYS[1]  the semaphore NAME (String: the count of available permits, decimal)
-- KEYS[2]  its channel, redisson_sc:{NAME}
-- KEYS[3]  the acquire's record, leasehold_sem_op:{NAME}:OP (String "STATE N", PX)
-- KEYS[4]  the wait queue, leasehold_sem_queue:{NAME} (ZSET op -> arrival)
-- KEYS[5]  the queue's entries, leasehold_sem_waiters:{NAME} (Hash op -> "PERMITS DEADLINE_MS")
-- KEYS[6]  the grants channel, leasehold_sem_grants:{NAME}
-- ARGV[1]  the publish command: publish, or spublish (sharded pub/sub)
-- ARGV[2]  the life of the "cancelled" record, ms (the window in which the acquire can
--          still run late, or this undo be replayed)
-- ARGV[3]  the acquire's operation id (its queue member)
-- ARGV[4]  the records' prefix, leasehold_sem_op:{NAME}:
-- ARGV[5]  the life of a "taken" record a grant writes, ms
-- ARGV[6]  WAIT_MS of a grant message
--
-- Replies:
--   N > 0  the record said "taken N" (taken by an attempt, or granted while queued): N
--          permits were given back (the count published when above 0) and the record
--          says "cancelled N"
--   0      no record (the acquire has not run, or took nothing): the record says
--          "cancelled 0", so a late run of it is refused; or the record said
--          "released" or "cancelled" already (a replay): untouched
-- Either way the operation's queue entry is gone; when it was queued or gave permits
-- back, the queue is served (the waiters behind it may fit now).
-- Errors:
--   WRONGTYPE   KEYS[1] is not a String, or not a whole number, or KEYS[3] is not a
--               record; nothing was written
--#include fragments/sem_count.lua
--#include fragments/sem_op.lua key=3
local was_queued = redis.call('zrem', KEYS[4], ARGV[3]) == 1
redis.call('hdel', KEYS[5], ARGV[3])
local given = 0
if op_state == 'taken' then
  count = redis.call('incrby', KEYS[1], string.format('%d', op_permits))
  redis.call('set', KEYS[3], 'cancelled ' .. string.format('%d', op_permits), 'px', ARGV[2])
  --#include fragments/sem_publish.lua count=count cmd=1
  given = op_permits
elseif not op_state then
  redis.call('set', KEYS[3], 'cancelled 0', 'px', ARGV[2])
end
if was_queued or given > 0 then
  --#include fragments/time.lua
  --#include fragments/sem_serve.lua queue=4 entries=5 grants=6 prefix=4 ttl=5 wait=6 cmd=1 self=''
end
return given

-- pes_release.lua: give one permit of a permit-expirable semaphore back by its id and
-- tell the waiters (Redisson's tryRelease(id), on the server's clock).
--
-- KEYS[1]  the semaphore NAME (String: the count of available permits, decimal)
-- KEYS[2]  its channel, redisson_sc:{NAME}
-- KEYS[3]  its permits, {NAME}:timeout (ZSet: raw 16-byte id -> lease end, epoch ms)
-- ARGV[1]  the permit's id (16 bytes, raw)
-- ARGV[2]  the publish command: publish, or spublish (sharded pub/sub)
-- ARGV[3]  '1': tell a permit whose lease had run out (-1) by the server's clock (a
--          release by id: try_release); '0': do not read the clock (a Permit guard's
--          release, which tells that by its own lease deadline, never later than the
--          server's: a reply before it proves the lease was live when this ran)
-- KEYS[4]  the wait queue, leasehold_pes_queue:{NAME}
-- KEYS[5]  the queue's entries, leasehold_pes_waiters:{NAME}
-- KEYS[6]  the grants channel, leasehold_sem_grants:{NAME}
-- ARGV[4]  '1' serve the queue even when the count message reached nobody (a cluster
--          with classic pub/sub)
-- ARGV[5]  WAIT_MS of a grant message
--
-- Waiters (issue 29 item 4): when the count's PUBLISH reached a subscriber (or ARGV[4]
-- says so), the freed permit goes to the wait queue's head (fragments/pes_serve.lua:
-- TIME, ZRANGE, HGET, ZREM, HDEL, ZSCORE, DECRBY, ZADD, PTTL, and a publish on KEYS[6]),
-- so a holder that releases and at once acquires again queues behind it. An
-- uncontended release reaches nobody and reads no queue: still 4 calls.
--
-- Replies:
--   1   released: the count went up by 1 and was published (ARGV[3] = '0': whatever
--       the permit's lease)
--   0   no such permit (never taken, released already, or reclaimed after its lease)
--   -1  (ARGV[3] = '1') the permit was there but its lease had run out: it is given
--       back (as a reclaim would), and the caller is told it was no longer held
-- Errors:
--   WRONGTYPE   a key of another type; nothing written
--   ERR value is not an integer   the count is a String that is not a whole number:
--               INCRBY refuses it before writing (lock-core reports it as WrongType)
--
-- Server calls: ZSCORE, INCRBY, ZREM, PUBLISH, + TIME for a leased permit when ARGV[3]
-- asks; Redisson's script is ZSCORE, ZREM, INCRBY, PUBLISH, with `now` from the
-- client's clock as an ARGV. A guard's release sends '0': the same 4. INCRBY goes before
-- ZREM: it is the first write and fails without writing on a count that is not an
-- integer (a permit that is not listed answers 0 without the count being read, where the
-- count's type was checked first before issue 29). No reclaim here: the acquire reclaims
-- when it finds no permit free.
local score = redis.call('zscore', KEYS[3], ARGV[1])
if not score then
  return 0
end
local left = redis.call('incrby', KEYS[1], 1)
redis.call('zrem', KEYS[3], ARGV[1])
local reply = 1
if ARGV[3] == '1' and tonumber(score) < 922337203685477 then
  --#include fragments/time.lua
  if tonumber(score) <= now then
    reply = -1
  end
end
if left > 0 then
  local heard = redis.call(ARGV[2], KEYS[2], string.format('%d', left))
  if heard > 0 or ARGV[4] == '1' then
    local count = left
    --#include fragments/time.lua
    --#include fragments/pes_serve.lua wait=5 cmd=2 self=''
  end
end
return reply

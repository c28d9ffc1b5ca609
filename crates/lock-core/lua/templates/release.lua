-- release.lua: set the owner's hold count to what its remaining guards account for;
-- at 0, remove the owner, publish the unlock message, and hand the lock to the first
-- live waiter of leasehold's wait queue (see acquire.lua), if anyone is listening. Used
-- for unlock, for the background release of a dropped guard, to undo an acquire whose
-- caller went away, and to clean up a wait that ended without the lock.
--
-- As in acquire.lua, the client sends the count it wants (its live guards after this
-- release), so a replayed or retried call is harmless: it sets the same count again.
-- Holds the client does not account for (an abandoned acquire that did apply) are
-- given back by the same call.
--
-- The hand-over: the waiter becomes the owner (count 1) at once, so no newcomer can
-- take the lock between this release and that waiter's next call. The key's TTL is the
-- waiter's lease, cut to the life left in its queue entry: a waiter that died while
-- queued holds the lock no longer than its keep-alive. The live waiter claims the lock
-- with acquire.lua (a re-entry, which raises the TTL to its lease). The queue is read
-- only when PUBLISH reached a subscriber (every queued waiter's client subscribes to
-- the release channel before it waits) or a leasehold waiter flagged the owner, so a
-- release nobody waits for stays two commands (one with ARGV[8] = "0"); ARGV[5] = "1"
-- reads it regardless (a cluster with classic pub/sub, where PUBLISH counts only the
-- subscribers of one node). In a cluster with sharded pub/sub
-- ARGV[7] is "spublish": every channel has the lock key's hash tag, so it is in the
-- script's slot, and SPUBLISH counts the subscribers of the shard's primary, where
-- leasehold waiters subscribe.
--
-- KEYS[1]  lock key (Hash)
-- KEYS[2]  release channel "redisson_lock__channel:{NAME}"
-- KEYS[3]  wait queue "leasehold_lock_queue:{NAME}" (List)
-- KEYS[4]  waiter entries "leasehold_lock_waiters:{NAME}" (Hash owner -> "DEADLINE LEASE")
-- KEYS[5]  queue channel "leasehold_lock__queue:{NAME}"
-- ARGV[1]  owner field
-- ARGV[2]  the owner's hold count after this release (>= 0); 0 = give it all back
-- ARGV[3]  TTL in ms the remaining holds need (the watchdog lease while a watchdog
--          hold remains), or 0: while holds remain the key's TTL is raised to it, never
--          lowered
-- ARGV[4]  unlock message ("0", Redisson's UNLOCK_MESSAGE)
-- ARGV[5]  "1": read the queue even if PUBLISH reached nobody; else "0"
-- ARGV[6]  "1": also remove the owner's own queue entry (a wait that ended without the
--          lock); else "0"
-- ARGV[7]  the publish command: "publish" (classic pub/sub) or "spublish" (sharded)
-- ARGV[8]  "1": publish the unlock message at every last release, for Redisson waiters
--          (which flag nothing) as Redisson's own unlock does: the default; "0"
--          (`redisson_waiters(false)`): only when a leasehold waiter flagged the owner
--
-- The waiter flag (see acquire.lua): the owner's field "OWNER" and its flag "OWNER:w"
-- go in one HDEL, which answers 2 when a leasehold waiter flagged the owner, 1 when
-- none did, 0 when the owner holds nothing (a flag never outlives its owner's field).
-- A flagged release always publishes and reads the queue; an unflagged one with ARGV[8]
-- = "0" is that one HDEL.
--
-- Messages on KEYS[5], "GRANTED NEXT WAIT_MS" ("-" for nobody): GRANTED now owns the
-- lock and should claim it; NEXT is the queue head now, and should try at once
-- (WAIT_MS = 0) or after WAIT_MS, when the lock expires if nobody released it.
--
-- Replies:
--   -1  the owner holds nothing on KEYS[1]: nothing written, nothing published (but
--       its queue entry removed with ARGV[6])
--    0  released: the owner's field removed (the key with it, as the owner held it
--       alone), ARGV[4] published, and the lock handed to the first live waiter if any
--    N  N = ARGV[2] > 0 holds remain; the key's TTL is at least ARGV[3]
-- Errors:
--   WRONGTYPE   KEYS[1] exists and is not a Hash; nothing was written. A queue key of
--               another type is treated as an empty queue.

-- The hot path first, before any closure is made: the last hold, no queue clean-up,
-- and nobody listening. HDEL checks the owner and removes it in one command; it fails on
-- a key of another type before writing. A Hash with no field left is deleted by Redis.
local last = tonumber(ARGV[2]) == 0
local released = false
if last and ARGV[6] ~= '1' then
  local removed = redis.call('hdel', KEYS[1], ARGV[1], ARGV[1] .. ':w')
  if removed == 0 then
    return -1
  end
  if removed == 1 and ARGV[8] == '0' then
    -- No leasehold waiter flagged this owner, and no Redisson waiter is expected.
    return 0
  end
  if redis.call(ARGV[7], KEYS[2], ARGV[4]) == 0 and removed == 1 and ARGV[5] ~= '1' then
    return 0
  end
  released = true
end

local function now_ms()
  local t = redis.call('time')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

--#include fragments/leave_queue.lua

--#include fragments/hand_over.lua lock=KEYS[1] queue=KEYS[3] waiters=KEYS[4] queue_channel=KEYS[5] publish=ARGV[7]

if released then
  -- Someone listened (or the queue is read regardless): hand the lock over.
  hand_over()
  return 0
end
if last then
  -- A wait's clean-up (ARGV[6]): the same release, leaving the queue first.
  local removed = redis.call('hdel', KEYS[1], ARGV[1], ARGV[1] .. ':w')
  if removed == 0 then
    leave_queue()
    return -1
  end
  leave_queue()
  if redis.call(ARGV[7], KEYS[2], ARGV[4]) > 0 or ARGV[5] == '1' or removed == 2 then
    hand_over()
  end
  return 0
end
if redis.call('hexists', KEYS[1], ARGV[1]) == 0 then
  if ARGV[6] == '1' then leave_queue() end
  return -1
end
if ARGV[6] == '1' then leave_queue() end
redis.call('hset', KEYS[1], ARGV[1], ARGV[2])
local need = tonumber(ARGV[3])
if need > 0 and redis.call('pttl', KEYS[1]) < need then
  redis.call('pexpire', KEYS[1], need)
end
return tonumber(ARGV[2])

-- release_after.lua: the last release of an owner that asked for a minimum hold
-- (`LockGuard::unlock_after`, ShedLock's `lockAtLeastFor`): the lock is kept, in
-- Redisson's layout, until the minimum hold is over, and then expires by itself. The
-- owner's field stays with a count of 1 (a Redisson client sees the lock held until it
-- expires; `HGETALL` shows who kept it) and the key's TTL becomes ARGV[2], the part of
-- the minimum hold that is left, measured by the client from an instant no earlier than
-- the acquire's reply (so the key is never gone before the server's acquire + the
-- minimum hold). PEXPIRE sets it whatever the TTL was: it shortens a watchdog lease and
-- lengthens a fixed lease that would end first. The watchdog no longer renews it.
--
-- The client sends this only when time is left (ARGV[2] >= 1); once the minimum hold has
-- passed it sends release.lua, the ordinary last release. A retry sends the time left
-- then, measured to the same end: the same end, never an earlier one, and later only by
-- the time that attempt spent on its way (queued in the client while it reconnects:
-- bounded by the command timeout); and it checks the owner's field first, so it never touches a key
-- that expired and was taken by another owner meanwhile (that answers -1).
--
-- Nobody is handed the lock (it is not free). The waiters are told the new TTL: the
-- unlock message on the release channel, as a release publishes it (at every call with
-- ARGV[5] = "1", for Redisson waiters; else only when a leasehold waiter flagged the
-- owner). A leasehold queue head and a Redisson waiter then try once, are answered the
-- shorter TTL and wait for it; when the key expires, the head takes the free lock and
-- tells the next (as after any lease that ran out).
--
-- KEYS[1]  lock key (Hash)
-- KEYS[2]  release channel "redisson_lock__channel:{NAME}"
-- ARGV[1]  owner field
-- ARGV[2]  ms the key is still kept (>= 1)
-- ARGV[3]  unlock message ("0", Redisson's UNLOCK_MESSAGE)
-- ARGV[4]  the publish command: "publish" (classic pub/sub) or "spublish" (sharded)
-- ARGV[5]  "1": publish whenever the key is kept (Redisson waiters flag nothing);
--          "0" (`redisson_waiters(false)`): only when a leasehold waiter flagged the owner
--
-- Replies:
--   -1  the owner holds nothing on KEYS[1]: nothing written, nothing published
--    0  kept: the owner's count is 1 and the key expires in ARGV[2] ms
-- Errors:
--   WRONGTYPE   KEYS[1] exists and is not a Hash; nothing was written.
if redis.call('hexists', KEYS[1], ARGV[1]) == 0 then
  return -1
end
redis.call('hset', KEYS[1], ARGV[1], 1)
redis.call('pexpire', KEYS[1], ARGV[2])
if ARGV[5] == '1' or redis.call('hexists', KEYS[1], ARGV[1] .. ':w') == 1 then
  redis.call(ARGV[4], KEYS[2], ARGV[3])
end
return 0

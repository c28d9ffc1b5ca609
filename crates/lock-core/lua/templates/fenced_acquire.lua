-- fenced_acquire.lua: take or re-enter a reentrant lock and hand out a fencing token
-- (Redisson's RLock layout, plus RFencedLock's counter "redisson_lock_token:{NAME}"),
-- and queue a waiting owner in leasehold's wait queue, exactly as acquire.lua does: the
-- steps are acquire.lua's own (fragments/queued_acquire.lua: the same queue keys,
-- keep-alive, waiter flag, and the hand-over by release.lua), run in a function whose
-- replies get the token. So fenced waiters get the lock in arrival order across every
-- client and process, and a release hands the lock to the queue's head (acquire.lua's
-- header describes the queue and "The waiter flag").
--
-- The hand-over issues the token: release.lua makes the queue's head the owner (count
-- 1), and the waiter claims the lock with this script, which issues a new token for
-- every first hold of an owner (ARGV[3] = 1), the claim of a handed-over lock included.
-- Only a re-entry of a live hold (ARGV[3] > 1) keeps the outer hold's token. The claim,
-- not release.lua, issues it, so a hand-over by any release (a plain Lock's on the same
-- name, a force release, a wait's clean-up) gives the new owner a token above every
-- earlier one, and no owner ever holds with an older owner's token.
--
-- KEYS[1]  lock key: a Hash, field = owner "CLIENT_UUID:N", value = hold count (and
--          the owner's waiter flag "CLIENT_UUID:N:w" while a waiter waits; the last
--          release removes the key)
-- KEYS[2]  wait queue "leasehold_lock_queue:{NAME}" (List of owner fields, head first)
-- KEYS[3]  waiter entries "leasehold_lock_waiters:{NAME}" (Hash owner -> "DEADLINE LEASE")
-- KEYS[4]  queue channel "leasehold_lock__queue:{NAME}" (see release.lua)
-- KEYS[5]  fencing counter "redisson_lock_token:{NAME}": a String integer, the last
--          token issued for NAME
-- ARGV[1]  lease in milliseconds (> 0); a re-entry only raises the key's TTL to it
-- ARGV[2]  owner field
-- ARGV[3]  the owner's hold count after this acquire: its accounted holds + 1 (>= 1)
-- ARGV[4]  keep-alive in ms of a queue entry (> 0): a waiting call, which queues up (or
--          refreshes its entry) when not acquired and flags the holder; "0": a single
--          try, which never reads or writes the queue
-- ARGV[5]  the publish command, "publish" or "spublish" (a single try publishes nothing)
-- ARGV[6]  fencing counter TTL in milliseconds (> 0), set again whenever a token is issued
--
-- Replies (acquire.lua's, with the token after the count when acquired):
--   {1, 1, token}        acquired fresh, or claimed a lock release.lua handed to this
--                        owner, or re-acquired by an owner whose holds were gone: a new
--                        token
--   {1, ARGV[3], token}  re-entered a live hold (ARGV[3] > 1); token = the outer hold's:
--                        the counter's value, which no one else can move while this
--                        owner holds the lock (a new one only if the counter is gone,
--                        e.g. a failover lost it)
--   {0, pttl}            single try, held by another owner; pttl = the key's TTL in ms,
--                        -1 if none
--   {0, wait, position}  waiting call, not acquired: queued at `position` (0 = head);
--                        `wait` as in acquire.lua
-- Errors:
--   WRONGTYPE  KEYS[1] is not a Hash, KEYS[5] not a String (or, for a waiting call,
--              KEYS[2] not a List or KEYS[3] not a Hash); nothing was written
--   a script error when KEYS[5] holds a String that is not an integer; nothing written
--
-- Tokens: every new token is max(counter, server time in microseconds) + 1, and the
-- counter is set to it. While the counter exists tokens strictly increase whatever the
-- clocks do. When it is missing (a restart without persistence, a failover to a replica
-- that lacks it, an expired counter) or behind (a promoted replica that missed the last
-- tokens), the next token comes from the server's clock, above every earlier token as
-- long as the clock now reads later than the issuing server's clock did at the last
-- token (docs/architecture/fencing.md).

--#include fragments/token.lua

-- Reads first: a counter of another type (WRONGTYPE) or a String that is not an integer
-- fails the call before anything is written.
local counter = redis.call('get', KEYS[5])
if counter and not string.match(counter, '^-?%d+$') then
  return redis.error_reply('ERR the fencing counter ' .. KEYS[5] .. ' is not an integer')
end

-- acquire.lua's steps; their replies are this script's, before the token.
local function acquire()
  --#include fragments/queued_acquire.lua
end

local reply = acquire()
if reply[1] ~= 1 then
  return reply
end
local token
if reply[2] > 1 then
  -- A re-entry keeps the outer hold's token (as Hazelcast and bsm/redislock do; Redisson
  -- issues a new one): every guard of one hold writes with the same fence.
  token = redis.call('get', KEYS[5])
end
if not token then
  token = next_token(KEYS[5], ARGV[6])
end
return {1, reply[2], tonumber(token)}

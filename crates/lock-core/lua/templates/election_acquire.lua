-- election_acquire.lua: a candidate's campaign: take the election's lead (a reentrant
-- lock Hash, `leasehold_election:{NAME}`, field = owner, value = hold count), exactly
-- as acquire.lua takes a lock (fragments/queued_acquire.lua: the same wait queue,
-- keep-alive, waiter flag and hand-over by election_release.lua), and, when the lead is
-- taken fresh, issue the new leader's term, record who leads with its value, and tell
-- the followers, in the same script: no reader ever sees a lead without its term and
-- value, or a term without its lead.
--
-- Leasehold only: Redisson ignores every key and channel here.
--
-- KEYS[1]  lead key "leasehold_election:{NAME}" (a Hash, the RLock layout)
-- KEYS[2]  wait queue "leasehold_lock_queue:leasehold_election:{NAME}" (List)
-- KEYS[3]  waiter entries "leasehold_lock_waiters:leasehold_election:{NAME}" (Hash)
-- KEYS[4]  queue channel "leasehold_lock__queue:leasehold_election:{NAME}"
-- KEYS[5]  term counter "leasehold_election_term:{NAME}" (a String integer: the last
--          term issued)
-- KEYS[6]  leader record "leasehold_election_leader:{NAME}" (a Hash: owner, term, value)
-- KEYS[7]  change channel "leasehold_election__channel:{NAME}"
-- ARGV[1]  lease in milliseconds (> 0)
-- ARGV[2]  owner field (the candidate)
-- ARGV[3]  the owner's hold count after this acquire (1: a candidate holds once)
-- ARGV[4]  keep-alive in ms of a queue entry (> 0): a waiting call (a campaign); "0": a
--          single try (try_campaign), which never reads or writes the queue
-- ARGV[5]  the publish command, "publish" or "spublish"
-- ARGV[6]  TTL in ms given to the term counter with each term (the leader record has
--          none: it must outlive the longest lead; a resign or force deletes it, the
--          next lead overwrites a crashed leader's)
-- ARGV[7]  the value the new leader proclaims (bytes; may be empty)
--
-- Replies (fenced_acquire.lua's, the token being the term):
--   {1, 1, term}        took the lead (fresh, or claimed a lead election_release.lua
--                       handed to this candidate): a new term, larger than every term
--                       issued before for NAME; the record is (owner, term, ARGV[7]),
--                       and "L <term> <ARGV[1]> <ARGV[7]>" is published on KEYS[7]
--   {1, N, term}        re-entered (N > 1): the lead's term, the record unchanged
--   {0, pttl}           single try, another candidate leads; pttl = the lead's TTL
--   {0, wait, position} a campaign, not the leader: queued at `position` (0 = head)
-- Errors:
--   WRONGTYPE  a key of another type; nothing written
--   a script error when KEYS[5] holds a String that is not an integer; nothing written
--
-- Terms are fencing tokens (fragments/token.lua): max(counter, server time in µs) + 1,
-- so they strictly increase while the counter lives, and start above every earlier
-- term from the server's clock when it is lost (docs/architecture/fencing.md).

--#include fragments/token.lua

-- Reads first: a counter or record of another type (WRONGTYPE), or a counter that is
-- not an integer, fails the call before anything is written.
local counter = redis.call('get', KEYS[5])
if counter and not string.match(counter, '^-?%d+$') then
  return redis.error_reply('ERR the term counter ' .. KEYS[5] .. ' is not an integer')
end
local holder = redis.call('hget', KEYS[6], 'owner')

-- acquire.lua's steps; their replies are this script's, before the term.
local function acquire()
  --#include fragments/queued_acquire.lua
end

local reply = acquire()
if reply[1] ~= 1 then
  return reply
end
local term
if reply[2] > 1 and holder == ARGV[2] then
  term = redis.call('hget', KEYS[6], 'term')
end
if not term then
  term = next_token(KEYS[5], ARGV[6])
  redis.call('del', KEYS[6])
  redis.call('hset', KEYS[6], 'owner', ARGV[2], 'term', term, 'value', ARGV[7])
  redis.call(ARGV[5], KEYS[7], 'L ' .. term .. ' ' .. ARGV[1] .. ' ' .. ARGV[7])
end
return {1, reply[2], tonumber(term)}

-- election_leader.lua: who leads an election now, read-only: the leader record when
-- its owner still holds the lead, and the lead's TTL (a follower's next look, if no
-- message comes first: a leader that crashed publishes nothing; its lead expires).
--
-- KEYS[1]  lead key "leasehold_election:{NAME}"
-- KEYS[2]  leader record "leasehold_election_leader:{NAME}" (Hash: owner, term, value)
-- ARGV[]   none
--
-- Replies:
--   {1, pttl, term, value, owner}  a leader: its term and value; pttl = the lead's TTL
--   {0, pttl}                      nobody leads: -2 = no lead key; >= 0 = a lead held
--                                  without a record of it (a lead handed over and not
--                                  yet claimed, or taken by a client that is no
--                                  candidate): no leader until it is claimed or expires
-- Errors: WRONGTYPE when a key is of another type.
local pttl = redis.call('pttl', KEYS[1])
local record = redis.call('hmget', KEYS[2], 'owner', 'term', 'value')
if pttl == -2 then
  return {0, -2}
end
if record[1] and record[2] and redis.call('hexists', KEYS[1], record[1]) == 1 then
  return {1, pttl, record[2], record[3] or '', record[1]}
end
return {0, pttl}

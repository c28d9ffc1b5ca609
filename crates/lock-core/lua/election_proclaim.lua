-- election_proclaim.lua: the leader changes the value its followers see, keeping the
-- lead and its term, only while it still leads with that term.
--
-- KEYS[1]  lead key "leasehold_election:{NAME}"
-- KEYS[2]  leader record "leasehold_election_leader:{NAME}" (Hash: owner, term, value)
-- KEYS[3]  change channel "leasehold_election__channel:{NAME}"
-- ARGV[1]  owner field (the leader)
-- ARGV[2]  its term (decimal)
-- ARGV[3]  the new value
-- ARGV[4]  the publish command, "publish" or "spublish"
--
-- Replies:
--   1  the value is recorded; "L <term> <pttl> <value>" published (pttl = the lead's TTL)
--   0  the owner does not lead (its lead expired, was forced or resigned) or the record
--      is another term's: nothing written or published
-- Errors: WRONGTYPE when a key is of another type; nothing written.
if redis.call('hexists', KEYS[1], ARGV[1]) == 0 then
  return 0
end
local record = redis.call('hmget', KEYS[2], 'owner', 'term')
if record[1] ~= ARGV[1] or record[2] ~= ARGV[2] then
  return 0
end
redis.call('hset', KEYS[2], 'value', ARGV[3])
local pttl = redis.call('pttl', KEYS[1])
redis.call(ARGV[4], KEYS[3], 'L ' .. ARGV[2] .. ' ' .. pttl .. ' ' .. ARGV[3])
return 1

-- election_force_release.lua: force_release.lua for an election's lead: delete the lead
-- whoever holds it, wake the waiting candidates, record it in the lead's history, and
-- tell the followers ("N <term>" on the change channel) when a leader was recorded.
-- The leader finds out at its next renewal (lost()).
--
-- KEYS[1]  lead key "leasehold_election:{NAME}"
-- KEYS[2]  its release channel "redisson_lock__channel:leasehold_election:{NAME}"
-- KEYS[3]  leader record "leasehold_election_leader:{NAME}"
-- KEYS[4]  change channel "leasehold_election__channel:{NAME}"
-- ARGV[1..4]  force_release.lua's (unlock message, publish command, history key or '',
--             who)
--
-- Replies:
--   1  the lead existed and was deleted (as force_release.lua), the record with it
--   0  there was no lead; nothing published or recorded (a stale record is deleted)
--#include fragments/force_owners.lua history=ARGV[3]
local term = redis.call('hget', KEYS[3], 'term')
redis.call('del', KEYS[3])
if redis.call('del', KEYS[1]) == 1 then
  redis.call(ARGV[2], KEYS[2], ARGV[1])
  if term then
    redis.call(ARGV[2], KEYS[4], 'N ' .. term)
  end
  --#include fragments/force_history.lua history=ARGV[3] by=ARGV[4]
  return 1
end
return 0

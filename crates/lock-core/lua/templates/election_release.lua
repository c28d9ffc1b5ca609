-- election_release.lua: release.lua for an election's lead (resign, the background
-- resign of a dropped Leadership, the undo of an abandoned campaign, the clean-up of a
-- campaign that ended without the lead): the same steps (fragments/release_steps.lua:
-- set the count, at 0 remove the owner, publish the unlock message and hand the lead to
-- the first live waiting candidate), and, when the owner's lead ended and the leader
-- record is its own, delete the record and publish "N <term>" on the change channel:
-- followers learn at once that nobody leads until the next candidate's claim publishes
-- its own term.
--
-- KEYS[1..5]  release.lua's (lead key, its release channel, wait queue, waiter entries,
--             queue channel)
-- KEYS[6]     leader record "leasehold_election_leader:{NAME}" (Hash: owner, term, value)
-- KEYS[7]     change channel "leasehold_election__channel:{NAME}"
-- ARGV[1..8]  release.lua's
--
-- Replies: release.lua's (-1 not the owner, 0 released, N holds remain).

local function release()
  --#include fragments/release_steps.lua
end

local reply = release()
if reply == 0 and redis.call('hget', KEYS[6], 'owner') == ARGV[1] then
  local term = redis.call('hget', KEYS[6], 'term')
  redis.call('del', KEYS[6])
  redis.call(ARGV[7], KEYS[7], 'N ' .. term)
end
return reply

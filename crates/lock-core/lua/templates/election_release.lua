-- election_release.lua: release.lua for an election's lead (resign, the background
-- resign of a dropped Leadership, the undo of an abandoned campaign, the clean-up of a
-- campaign that ended without the lead): the same steps (fragments/release_steps.lua:
-- set the count, at 0 remove the owner, publish the unlock message and hand the lead to
-- the first live waiting candidate), and, when the owner's lead ended and the leader
-- record is its own, delete the record and publish "N <term>" on the change channel:
-- followers learn at once that this lead ended.
--
-- The hand-over is the grant of the lead in one step: when the first live waiting
-- candidate registered its value (election_acquire.lua writes "TICKET VALUE" in KEYS[9]
-- with every queued call), this script issues its term, writes the leader record with
-- its value, publishes "L <term> <ttl> <value>" on the change channel, and tells it on
-- the queue channel "GRANTED NEXT TTL TERM TICKET": its client takes the lead over
-- without a call (the ticket names the queued call the grant answers: a grant to an
-- earlier wait of the same owner is not taken over, the wait calls instead). A waiter
-- without a registered value (queued by an older client) gets the plain hand-over
-- ("GRANTED NEXT TTL") and claims with election_acquire.lua, which issues its term.
--
-- KEYS[1..5]  release.lua's (lead key, its release channel, wait queue, waiter entries,
--             queue channel)
-- KEYS[6]     leader record "leasehold_election_leader:{NAME}" (Hash: owner, term, value)
-- KEYS[7]     change channel "leasehold_election__channel:{NAME}"
-- KEYS[8]     term counter "leasehold_election_term:{NAME}" (String integer)
-- KEYS[9]     waiting candidates "leasehold_election_candidates:{NAME}" (Hash owner ->
--             "TICKET VALUE")
-- ARGV[1..8]  release.lua's
-- ARGV[9]     TTL in ms given to the term counter with each term
--
-- Replies: release.lua's (-1 not the owner, 0 released, N holds remain).

--#include fragments/token.lua

-- The releasing owner's lead ended: when the record is its own, delete it and tell the
-- followers "N <term>" (once: before a grant's "L", so followers read them in order).
local ended = false
local function end_lead()
  if ended then return end
  ended = true
  if redis.call('hget', KEYS[6], 'owner') == ARGV[1] then
    local term = redis.call('hget', KEYS[6], 'term')
    redis.call('del', KEYS[6])
    redis.call(ARGV[7], KEYS[7], 'N ' .. term)
  end
end

-- hand_over.lua's grant hook: `head` owns the lead now (TTL `ttl`, its queue entry's
-- life left at most); make it the leader in this step when its value is known.
local function grant_lead(head, next, ttl)
  -- pcall: a key of another type (or a counter that is not an integer) must not stop
  -- this release half-way: the plain hand-over goes, and the waiter's claim (a call)
  -- reports the error.
  local entry = redis.pcall('hget', KEYS[9], head)
  local ticket, value
  if type(entry) == 'string' then
    ticket, value = string.match(entry, '^(%d+) (.*)$')
  end
  local counter = redis.pcall('get', KEYS[8])
  if not ticket or type(counter) == 'table' or (counter and not string.match(counter, '^-?%d+$')) then
    return false
  end
  end_lead()
  redis.call('hdel', KEYS[9], head)
  local term = next_token(KEYS[8], ARGV[9])
  redis.call('del', KEYS[6])
  redis.call('hset', KEYS[6], 'owner', head, 'term', term, 'value', value)
  redis.call(ARGV[7], KEYS[7], 'L ' .. term .. ' ' .. ttl .. ' ' .. value)
  redis.call(ARGV[7], KEYS[5], head .. ' ' .. next .. ' ' .. ttl .. ' ' .. term .. ' ' .. ticket)
  return true
end

-- hand_over.lua's forget hook: a dead candidate it skips has no grant due any more;
-- its registered value goes with it.
local function forget_candidate(owner)
  redis.call('hdel', KEYS[9], owner)
end

local function release()
  --#include fragments/release_steps.lua grant=grant_lead forget=forget_candidate
end

local reply = release()
if reply == 0 then
  end_lead()
end
if ARGV[6] == '1' then
  -- A wait's clean-up left the queue: no grant is due to this candidate.
  redis.call('hdel', KEYS[9], ARGV[1])
end
return reply

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

-- Issues the next token; returns it as a decimal string (Lua numbers print as 1.7e+15).
local function next_token(counter, ttl_ms)
  local now = redis.call('time')
  local now_us = now[1] .. string.format('%06d', tonumber(now[2]))
  local last = redis.call('get', counter)
  if last == false or tonumber(last) < tonumber(now_us) then
    redis.call('set', counter, now_us)
  end
  redis.call('incr', counter)
  redis.call('pexpire', counter, ttl_ms)
  return redis.call('get', counter)
end

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

  -- Wait clean-up: remove this owner's entry; if it was the head, tell the next one.
  local function leave_queue()
    local head = redis.pcall('lindex', KEYS[3], 0)
    if type(head) ~= 'string' then return end
    redis.call('lrem', KEYS[3], 0, ARGV[1])
    redis.call('hdel', KEYS[4], ARGV[1])
    if head == ARGV[1] then
      local next = redis.call('lindex', KEYS[3], 0)
      if next then
        redis.call(ARGV[7], KEYS[5], '- ' .. next .. ' ' .. math.max(redis.call('pttl', KEYS[1]), 0))
      end
    end
  end

  -- Hand the free lock to the first live waiter, purging dead heads on the way.
  local function hand_over()
    local head = redis.pcall('lindex', KEYS[3], 0)
    if type(head) ~= 'string' then return end
    local now
    while head do
      redis.call('lpop', KEYS[3])
      local entry = redis.call('hget', KEYS[4], head)
      redis.call('hdel', KEYS[4], head)
      local deadline, lease
      if entry then
        deadline, lease = string.match(entry, '^(%d+) (%d+)$')
      end
      now = now or now_ms()
      if deadline and tonumber(deadline) > now then
        local ttl = math.max(math.min(tonumber(lease), tonumber(deadline) - now), 1)
        redis.call('hset', KEYS[1], head, 1)
        local next = redis.call('lindex', KEYS[3], 0) or '-'
        if next ~= '-' then
          -- Waiters remain: the new owner's release must wake them.
          redis.call('hset', KEYS[1], head .. ':w', 1)
        end
        redis.call('pexpire', KEYS[1], ttl)
        if grant_lead(head, next, ttl) then return end
        redis.call(ARGV[7], KEYS[5], head .. ' ' .. next .. ' ' .. ttl)
        return
      end
      forget_candidate(head)
      head = redis.call('lindex', KEYS[3], 0)
    end
  end

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

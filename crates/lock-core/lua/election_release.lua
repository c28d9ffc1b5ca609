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
        redis.call(ARGV[7], KEYS[5], head .. ' ' .. next .. ' ' .. ttl)
        return
      end
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
if reply == 0 and redis.call('hget', KEYS[6], 'owner') == ARGV[1] then
  local term = redis.call('hget', KEYS[6], 'term')
  redis.call('del', KEYS[6])
  redis.call(ARGV[7], KEYS[7], 'N ' .. term)
end
return reply

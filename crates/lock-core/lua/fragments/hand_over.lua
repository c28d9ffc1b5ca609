--! hand_over.lua: defines hand_over(): gives the free lock to the first live waiter of
--! leasehold's wait queue (purging dead heads on the way): the waiter owns it at once
--! (count 1, TTL its lease cut to the life left in its entry), is flagged as waited for
--! if anyone waits behind it, and is told on the queue channel ("GRANTED NEXT WAIT_MS").
--! Needs: now_ms().
--! Optional param: grant = a function (head, next, ttl) run once the waiter owns the
--! lock, before the grant message: answering true, it has published a grant message of
--! its own (election_release.lua's grant_lead: the term and the leader record issued
--! here); answering false or nil, the plain message goes. Without it (release.lua,
--! multi_release.lua) the line is left out.
--! Optional param: forget = a function (owner) run for each dead owner taken off the
--! queue (an election forgets its registered value; the one served is the grant's to
--! forget). Without it the line is left out.
--! Params: lock = the lock key, queue = the wait queue (List), waiters = the waiter
--! entries (Hash), queue_channel = the queue channel, publish = the publish command
--! (release.lua: KEYS[1], KEYS[3], KEYS[4], KEYS[5], ARGV[7]; multi_release.lua: the
--! current member's, as locals the function reads when it is called).
-- Hand the free lock to the first live waiter, purging dead heads on the way.
local function hand_over()
  local head = redis.pcall('lindex', {{queue}}, 0)
  if type(head) ~= 'string' then return end
  local now
  while head do
    redis.call('lpop', {{queue}})
    local entry = redis.call('hget', {{waiters}}, head)
    redis.call('hdel', {{waiters}}, head)
    local deadline, lease
    if entry then
      deadline, lease = string.match(entry, '^(%d+) (%d+)$')
    end
    now = now or now_ms()
    if deadline and tonumber(deadline) > now then
      local ttl = math.max(math.min(tonumber(lease), tonumber(deadline) - now), 1)
      redis.call('hset', {{lock}}, head, 1)
      local next = redis.call('lindex', {{queue}}, 0) or '-'
      if next ~= '-' then
        -- Waiters remain: the new owner's release must wake them.
        redis.call('hset', {{lock}}, head .. ':w', 1)
      end
      redis.call('pexpire', {{lock}}, ttl)
      --! An election grants the lead here (term, record, its own grant message).
      if {{grant}}(head, next, ttl) then return end
      redis.call({{publish}}, {{queue_channel}}, head .. ' ' .. next .. ' ' .. ttl)
      return
    end
    {{forget}}(head)
    head = redis.call('lindex', {{queue}}, 0)
  end
end

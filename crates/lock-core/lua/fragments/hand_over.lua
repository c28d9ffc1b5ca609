--! hand_over.lua: defines hand_over(): gives the free lock to the first live waiter of
--! leasehold's wait queue (purging dead heads on the way): the waiter owns it at once
--! (count 1, TTL its lease cut to the life left in its entry), is flagged as waited for
--! if anyone waits behind it, and is told on KEYS[5] ("GRANTED NEXT WAIT_MS").
--! Needs: release.lua's KEYS and ARGV, now_ms().
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

--! take_head.lua: the lock is free and nobody live is queued, or this owner is the
--! queue's head: take the lock, leave the queue, tell the next waiter it is first
--! (the lock is held for ARGV[1]) and flag this owner as waited for if anyone is.
--! Needs: acquire.lua's KEYS and ARGV, `free` (take_free.lua), `head`
--! (queue_purge.lua). Returns {1, 1} when it took the lock.
if free and (not head or head == ARGV[2]) then
  local next
  if head then
    redis.call('lpop', KEYS[2])
    redis.call('hdel', KEYS[3], head)
    next = redis.call('lindex', KEYS[2], 0)
    if next then
      -- The next waiter is first now; the lock is held for ARGV[1].
      redis.call(ARGV[5], KEYS[4], '- ' .. next .. ' ' .. ARGV[1])
    end
  end
  redis.call('hset', KEYS[1], ARGV[2], 1)
  if next then
    -- Waiters remain behind this owner: its release must wake them.
    redis.call('hset', KEYS[1], ARGV[2] .. ':w', 1)
  end
  redis.call('pexpire', KEYS[1], ARGV[1])
  return {1, 1}
end

--! leave_queue.lua: defines leave_queue(): the wait clean-up of release.lua, which
--! removes ARGV[1]'s entry from leasehold's wait queue and, if it was the head, tells
--! the next waiter on KEYS[5].
--! Needs: release.lua's KEYS and ARGV.
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

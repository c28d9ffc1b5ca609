--! fair_purge.lua: purges the dead heads of the fair queue (Redisson's RFairLock
--! layout): an entry whose deadline passed, or that lost its deadline, no longer blocks
--! the waiters behind it.
--! Needs: KEYS[2] queue (List), KEYS[3] deadlines (ZSet owner -> deadline ms), `now`
--! (time.lua).
--! Parameter `flag` (optional): the name of a local set to true when a head was purged
--! (declared here, false at first); without it nothing is recorded.
local {{flag}} = false
while true do
  local head = redis.call('lindex', KEYS[2], 0)
  if not head then break end
  local deadline = redis.call('zscore', KEYS[3], head)
  if deadline and tonumber(deadline) > now then break end
  redis.call('lpop', KEYS[2])
  redis.call('zrem', KEYS[3], head)
  {{flag}} = true
end

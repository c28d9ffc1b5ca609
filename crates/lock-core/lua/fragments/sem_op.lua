--! sem_op.lua: reads the record of one semaphore operation, KEYS[{{key}}]
--! (`leasehold_sem_op:{NAME}:OP`, a String "STATE N" with a PX TTL; Redisson never reads
--! it), into `op_state` ('taken', 'released' or 'cancelled'; false when there is no
--! record) and `op_permits` (N, the permits that operation moved; 0 for a tombstone).
--! A record that is not one of these is refused before anything is written (a key of
--! another type fails GET with WRONGTYPE itself). See docs/architecture/semaphores.md,
--! "Exactly once".
--! Sets: local `op_state`, local `op_permits`.
local op_state = false
local op_permits = 0
local op_raw = redis.call('get', KEYS[{{key}}])
if op_raw then
  local state, n = string.match(op_raw, '^(%a+) (%d+)$')
  if (state ~= 'taken' and state ~= 'released' and state ~= 'cancelled') or n == nil then
    return redis.error_reply('WRONGTYPE semaphore operation ' .. KEYS[{{key}}] .. ' holds no operation record')
  end
  op_state = state
  op_permits = tonumber(n)
end

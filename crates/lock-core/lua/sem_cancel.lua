-- sem_cancel.lua: undo an acquire whose caller never learned its outcome (a timeout, a
-- lost reply, a reset connection, a dropped future), exactly once: the permits it took,
-- if it ran, are given back; if it has not run, a tombstone refuses it when it does.
--
-- KEYS[1]  the semaphore NAME (String: the count of available permits, decimal)
-- KEYS[2]  its channel, redisson_sc:{NAME}
-- KEYS[3]  the acquire's record, leasehold_sem_op:{NAME}:OP (String "STATE N", PX)
-- ARGV[1]  the publish command: publish, or spublish (sharded pub/sub)
-- ARGV[2]  the life of the "cancelled" record, ms (the window in which the acquire can
--          still run late, or this undo be replayed)
--
-- Replies:
--   N > 0  the record said "taken N": N permits were given back (the count published
--          when above 0) and the record says "cancelled N"
--   0      no record (the acquire has not run, or took nothing): the record says
--          "cancelled 0", so a late run of it is refused; or the record said
--          "released" or "cancelled" already (a replay): untouched
-- Errors:
--   WRONGTYPE   KEYS[1] is not a String, or not a whole number, or KEYS[3] is not a
--               record; nothing was written
local raw = redis.call('get', KEYS[1])
local count = 0
if raw then
  count = tonumber(raw)
  if count == nil or count ~= math.floor(count) then
    return redis.error_reply('WRONGTYPE semaphore ' .. KEYS[1] .. ' holds a String that is not a count')
  end
end
local op_state = false
local op_permits = 0
local op_raw = redis.call('get', KEYS[3])
if op_raw then
  local state, n = string.match(op_raw, '^(%a+) (%d+)$')
  if (state ~= 'taken' and state ~= 'released' and state ~= 'cancelled') or n == nil then
    return redis.error_reply('WRONGTYPE semaphore operation ' .. KEYS[3] .. ' holds no operation record')
  end
  op_state = state
  op_permits = tonumber(n)
end
if op_state == 'taken' then
  local left = redis.call('incrby', KEYS[1], string.format('%d', op_permits))
  redis.call('set', KEYS[3], 'cancelled ' .. string.format('%d', op_permits), 'px', ARGV[2])
  if left > 0 then
    redis.call(ARGV[1], KEYS[2], string.format('%d', left))
  end
  return op_permits
elseif not op_state then
  redis.call('set', KEYS[3], 'cancelled 0', 'px', ARGV[2])
end
return 0

-- sem_cancel.lua: undo an acquire whose caller never learned its outcome (a timeout, a
-- lost reply, a reset connection, a dropped future, a wait that ended while queued),
-- exactly once: the permits it took, or a release granted it, are given back; if it has
-- not run, a tombstone refuses it when it does; its place in the wait queue is left.
--
-- KEYS[1]  the semaphore NAME (String: the count of available permits, decimal)
-- KEYS[2]  its channel, redisson_sc:{NAME}
-- KEYS[3]  the acquire's record, leasehold_sem_op:{NAME}:OP (String "STATE N", PX)
-- KEYS[4]  the wait queue, leasehold_sem_queue:{NAME} (ZSET op -> arrival)
-- KEYS[5]  the queue's entries, leasehold_sem_waiters:{NAME} (Hash op -> "PERMITS DEADLINE_MS")
-- KEYS[6]  the grants channel, leasehold_sem_grants:{NAME}
-- ARGV[1]  the publish command: publish, or spublish (sharded pub/sub)
-- ARGV[2]  the life of the "cancelled" record, ms (the window in which the acquire can
--          still run late, or this undo be replayed)
-- ARGV[3]  the acquire's operation id (its queue member)
-- ARGV[4]  the records' prefix, leasehold_sem_op:{NAME}:
-- ARGV[5]  the life of a "taken" record a grant writes, ms
-- ARGV[6]  WAIT_MS of a grant message
--
-- Replies:
--   N > 0  the record said "taken N" (taken by an attempt, or granted while queued): N
--          permits were given back (the count published when above 0) and the record
--          says "cancelled N"
--   0      no record (the acquire has not run, or took nothing): the record says
--          "cancelled 0", so a late run of it is refused; or the record said
--          "released" or "cancelled" already (a replay): untouched
-- Either way the operation's queue entry is gone; when it was queued or gave permits
-- back, the queue is served (the waiters behind it may fit now).
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
local was_queued = redis.call('zrem', KEYS[4], ARGV[3]) == 1
redis.call('hdel', KEYS[5], ARGV[3])
local given = 0
if op_state == 'taken' then
  count = redis.call('incrby', KEYS[1], string.format('%d', op_permits))
  redis.call('set', KEYS[3], 'cancelled ' .. string.format('%d', op_permits), 'px', ARGV[2])
  if count > 0 then
    redis.call(ARGV[1], KEYS[2], string.format('%d', count))
  end
  given = op_permits
elseif not op_state then
  redis.call('set', KEYS[3], 'cancelled 0', 'px', ARGV[2])
end
if was_queued or given > 0 then
  local t = redis.call('time')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  local served_self = false
  local next_head = nil
  local granted = {}
  while true do
    local head = redis.call('zrange', KEYS[4], 0, 0)[1]
    if not head then break end
    local entry = redis.call('hget', KEYS[5], head)
    local want, deadline
    if entry then
      want, deadline = string.match(entry, '^(%d+) (%d+)$')
    end
    if want and tonumber(deadline) > now and tonumber(want) > count then
      next_head = head
      break
    end
    redis.call('zrem', KEYS[4], head)
    redis.call('hdel', KEYS[5], head)
    -- SET NX: an operation that has a record already (it cannot, while queued: the
    -- enqueue read none, and an undo removes the entry) is never counted twice.
    if want and tonumber(deadline) > now
        and redis.call('set', ARGV[4] .. head, 'taken ' .. want, 'nx', 'px', ARGV[5]) then
      redis.call('decrby', KEYS[1], want)
      count = count - tonumber(want)
      if head == '' then
        served_self = true
      else
        granted[#granted + 1] = head
      end
    end
  end
  for _, op in ipairs(granted) do
    redis.call(ARGV[1], KEYS[6], op .. ' ' .. (next_head or '-') .. ' ' .. ARGV[6])
  end
end
return given

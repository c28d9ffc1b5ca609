-- sem_try_acquire.lua: take permits of a semaphore if that many are available
-- (Redisson's RSemaphore tryAcquire script, with the count's type checked), exactly once
-- per operation id: a retried or late-run call of the same operation answers from its
-- record and never counts again, and an operation that was undone is refused. A waiting
-- call (ARGV[3] > 0) also keeps a place in leasehold's wait queue (issue 29 item 4): it
-- takes free permits only when nobody waits (no barging), otherwise it queues, and a
-- release (or any waiting call) serves the queue in arrival order.
--
-- KEYS[1]  the semaphore NAME (String: the count of available permits, decimal)
-- KEYS[2]  the operation's record, leasehold_sem_op:{NAME}:OP (String "STATE N", PX)
-- KEYS[3]  the wait queue, leasehold_sem_queue:{NAME} (ZSET op -> arrival, server µs)
-- KEYS[4]  the queue's entries, leasehold_sem_waiters:{NAME} (Hash op -> "PERMITS DEADLINE_MS")
-- KEYS[5]  the grants channel, leasehold_sem_grants:{NAME}
-- ARGV[1]  permits to take (1 or more; checked by the client)
-- ARGV[2]  the life of a "taken" record, ms (the window in which a retry or the undo
--          of this operation can still come)
-- ARGV[3]  the keep-alive of a queue entry, ms; 0 for a single try (never queues and
--          never reads the queue: it may take free permits waiters wait for)
-- ARGV[4]  the publish command: publish, or spublish (sharded pub/sub)
-- ARGV[5]  the operation id (its queue member; KEYS[2] is ARGV[6] .. ARGV[5])
-- ARGV[6]  the records' prefix, leasehold_sem_op:{NAME}:
-- ARGV[7]  WAIT_MS of a grant message (when the new head looks again on its own)
--
-- Replies:
--   {1}     taken: the count was at least ARGV[1] (and, waiting, nobody was queued
--           ahead) and was lowered by it, and the record says "taken ARGV[1]"; or the
--           record already said "taken N" (a retry, or a grant by a release): untouched
--   {0}     a try: fewer permits are available (a missing key counts as 0): untouched
--   {0, P}  waiting: not taken; the operation is queued at place P (0 = the head), its
--           entry's deadline now + ARGV[3]
--   {-1}    the operation was released or cancelled already (a late run): untouched
-- Errors:
--   WRONGTYPE   KEYS[1] is not a String, or not a whole number, or KEYS[2] is not a
--               record; nothing was written
--
-- Server calls when the permits are there: GET (the count), DECRBY, SET NX (the
-- record); Redisson's script is GET, DECRBY. A waiting call adds EXISTS (the queue).
-- The record is read (GET) only when SET NX finds one there (a retry: the DECRBY is
-- undone) or when too few permits are left.
local raw = redis.call('get', KEYS[1])
local count = 0
if raw then
  count = tonumber(raw)
  if count == nil or count ~= math.floor(count) then
    return redis.error_reply('WRONGTYPE semaphore ' .. KEYS[1] .. ' holds a String that is not a count')
  end
end
local waiting = ARGV[3] ~= '0'
if raw and count >= tonumber(ARGV[1]) and (not waiting or redis.call('exists', KEYS[3]) == 0) then
  -- DECRBY first: it is the first write and fails without writing on a count that is
  -- not an integer. SET NX writes nothing when a record (or any key) is there.
  redis.call('decrby', KEYS[1], ARGV[1])
  if redis.call('set', KEYS[2], 'taken ' .. ARGV[1], 'nx', 'px', ARGV[2]) then
    return {1}
  end
  -- A record was there: this is a retry or a late run, which never counts again.
  redis.call('incrby', KEYS[1], ARGV[1])
end
local op_state = false
local op_permits = 0
local op_raw = redis.call('get', KEYS[2])
if op_raw then
  local state, n = string.match(op_raw, '^(%a+) (%d+)$')
  if (state ~= 'taken' and state ~= 'released' and state ~= 'cancelled') or n == nil then
    return redis.error_reply('WRONGTYPE semaphore operation ' .. KEYS[2] .. ' holds no operation record')
  end
  op_state = state
  op_permits = tonumber(n)
end
if op_state == 'taken' then
  return {1}
elseif op_state then
  return {-1}
end
if not waiting then
  return {0}
end
-- Waiting: serve the queue first (a release nobody heard, a Java release, a dead
-- head), which may serve this very call.
local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local served_self = false
local next_head = nil
local granted = {}
while true do
  local head = redis.call('zrange', KEYS[3], 0, 0)[1]
  if not head then break end
  local entry = redis.call('hget', KEYS[4], head)
  local want, deadline
  if entry then
    want, deadline = string.match(entry, '^(%d+) (%d+)$')
  end
  if want and tonumber(deadline) > now and tonumber(want) > count then
    next_head = head
    break
  end
  redis.call('zrem', KEYS[3], head)
  redis.call('hdel', KEYS[4], head)
  -- SET NX: an operation that has a record already (it cannot, while queued: the
  -- enqueue read none, and an undo removes the entry) is never counted twice.
  if want and tonumber(deadline) > now
      and redis.call('set', ARGV[6] .. head, 'taken ' .. want, 'nx', 'px', ARGV[2]) then
    redis.call('decrby', KEYS[1], want)
    count = count - tonumber(want)
    if head == ARGV[5] then
      served_self = true
    else
      granted[#granted + 1] = head
    end
  end
end
for _, op in ipairs(granted) do
  redis.call(ARGV[4], KEYS[5], op .. ' ' .. (next_head or '-') .. ' ' .. ARGV[7])
end
if served_self then
  return {1}
end
local place = redis.call('zrank', KEYS[3], ARGV[5])
if not place then
  if not next_head and count >= tonumber(ARGV[1]) then
    -- The queue held only dead entries: the permits are free for this call.
    redis.call('decrby', KEYS[1], ARGV[1])
    redis.call('set', KEYS[2], 'taken ' .. ARGV[1], 'px', ARGV[2])
    return {1}
  end
  redis.call('zadd', KEYS[3], tonumber(t[1]) * 1000000 + tonumber(t[2]), ARGV[5])
  place = redis.call('zrank', KEYS[3], ARGV[5])
end
redis.call('hset', KEYS[4], ARGV[5], ARGV[1] .. ' ' .. string.format('%d', now + tonumber(ARGV[3])))
-- The keys outlive their latest entry (never shortened: keep-alives may differ).
if redis.call('pttl', KEYS[3]) < tonumber(ARGV[3]) then
  redis.call('pexpire', KEYS[3], ARGV[3])
end
if redis.call('pttl', KEYS[4]) < tonumber(ARGV[3]) then
  redis.call('pexpire', KEYS[4], ARGV[3])
end
return {0, place}

-- sem_try_acquire.lua: take permits of a semaphore if that many are available
-- (Redisson's RSemaphore tryAcquire script, with the count's type checked), exactly once
-- per operation id: a retried or late-run call of the same operation answers from its
-- record and never counts again, and an operation that was undone is refused.
--
-- KEYS[1]  the semaphore NAME (String: the count of available permits, decimal)
-- KEYS[2]  the operation's record, leasehold_sem_op:{NAME}:OP (String "STATE N", PX)
-- ARGV[1]  permits to take (1 or more; checked by the client)
-- ARGV[2]  the life of a "taken" record, ms (the window in which a retry or the undo
--          of this operation can still come)
--
-- Replies:
--   1   taken: the count was at least ARGV[1] and was lowered by it, and the record says
--       "taken ARGV[1]"; or the record already said "taken N" (a retry): untouched
--   0   fewer permits are available (a missing key counts as 0): untouched, no record
--   -1  the operation was released or cancelled already (a late run): untouched
-- Errors:
--   WRONGTYPE   KEYS[1] is not a String, or not a whole number, or KEYS[2] is not a
--               record; nothing was written
--
-- Server calls when the permits are there: GET (the count), DECRBY, SET NX (the
-- record); Redisson's script is GET, DECRBY. The record is read (GET) only when SET NX
-- finds one there (a retry: the DECRBY is undone) or when too few permits are left.
local raw = redis.call('get', KEYS[1])
local count = 0
if raw then
  count = tonumber(raw)
  if count == nil or count ~= math.floor(count) then
    return redis.error_reply('WRONGTYPE semaphore ' .. KEYS[1] .. ' holds a String that is not a count')
  end
end
if raw and count >= tonumber(ARGV[1]) then
  -- DECRBY first: it is the first write and fails without writing on a count that is
  -- not an integer. SET NX writes nothing when a record (or any key) is there.
  redis.call('decrby', KEYS[1], ARGV[1])
  if redis.call('set', KEYS[2], 'taken ' .. ARGV[1], 'nx', 'px', ARGV[2]) then
    return 1
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
  return 1
elseif op_state then
  return -1
end
return 0

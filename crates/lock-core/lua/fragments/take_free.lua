--! take_free.lua: takes a lock that is free with nobody queued, as a single try takes it
--! (the hot path: one EXISTS counts the lock key and the queue).
--! Needs (acquire.lua's layout): KEYS[1] lock, KEYS[2] queue, ARGV[1] lease,
--! ARGV[2] owner, ARGV[4] keep-alive or "0" (a single try, which ignores the queue).
--! Sets: locals `queueing`, `free`, `unqueued`. Returns {1, 1} when it took the lock.
local queueing = ARGV[4] ~= '0'
-- A single try ignores the queue. A waiting call on a free lock with nobody queued takes
-- it just as a try does: one EXISTS counts both keys, so an uncontended lock() costs
-- what try_lock() costs (the queue cannot matter: nobody is ahead).
local free, unqueued
if queueing then
  local present = redis.call('exists', KEYS[1], KEYS[2])
  unqueued = present == 0
  free = unqueued or (present == 1 and redis.call('exists', KEYS[1]) == 0)
else
  free = redis.call('exists', KEYS[1]) == 0
  unqueued = true
end
if free and unqueued then
  redis.call('hset', KEYS[1], ARGV[2], 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  return {1, 1}
end

--! queued_acquire.lua: every step of acquire.lua after its header: take a free lock,
--! re-enter, or (a waiting call) purge the dead queue heads, take the lock as the queue's
--! head, queue up or refresh the entry, and flag the holder. fenced_acquire.lua runs the
--! same steps inside a function and adds the token to what they answer.
--! Needs: acquire.lua's KEYS[1..4] and ARGV[1..5]. Returns acquire.lua's replies.
--! Optional param: forget, passed on to queue_purge.lua.
--#include fragments/take_free.lua
-- HGET fails on a key of another type before anything is written.
if not free and redis.call('hget', KEYS[1], ARGV[2]) then
  -- A re-entry (or the claim of a lock handed to this owner): never queued.
  --#include fragments/reentry.lua
end
if not queueing then
  return {0, redis.call('pttl', KEYS[1])}
end

-- A waiting call. Reads first: each raises WRONGTYPE before any write.
redis.call('lindex', KEYS[2], 0)
redis.call('hget', KEYS[3], ARGV[2])

--#include fragments/time.lua

--#include fragments/queue_purge.lua forget={{forget}}

--#include fragments/take_head.lua

--#include fragments/queue_enter.lua

if not free then
  -- Flag every holder (one, unless Redisson and leasehold disagree) as waited for: see
  -- "The waiter flag" above.
  --#include fragments/waiter_flag.lua
  return {0, redis.call('pttl', KEYS[1]), position}
end
-- Free, and another live waiter is first.
if purged then
  -- The purge made that waiter first: it may take the lock now.
  redis.call(ARGV[5], KEYS[4], '- ' .. head .. ' 0')
end
return {0, math.max(head_deadline - now, 1), position}

-- latch_delete.lua: delete a count-down latch whatever its count, and tell its waiters
-- (Redisson's RCountDownLatch.delete publishes the new-count message "1" only, which a
-- Redisson waiter does not return on; the zero-count message "0" that follows makes
-- every waiter, Redisson's and leasehold's, read the count again: a missing latch is
-- open).
--
-- KEYS[1]  latch key NAME (String)
-- KEYS[2]  channel "redisson_countdownlatch__channel__{NAME}"
-- ARGV[1]  new-count message ("1", Redisson's)
-- ARGV[2]  zero-count message ("0")
-- ARGV[3]  the publish command: "publish" or "spublish" (sharded, in a cluster)
--
-- Replies:
--   1  the latch existed and was deleted; ARGV[1] then ARGV[2] published
--   0  there was no such key; nothing published
-- Errors:
--   WRONGTYPE   KEYS[1] holds another type; nothing deleted
local kind = redis.call('type', KEYS[1])['ok']
if kind == 'none' then
  return 0
end
if kind ~= 'string' then
  return redis.error_reply('WRONGTYPE ' .. KEYS[1] .. ' is not a count-down latch (not a String)')
end
redis.call('del', KEYS[1])
redis.call(ARGV[3], KEYS[2], ARGV[1])
redis.call(ARGV[3], KEYS[2], ARGV[2])
return 1

-- latch_count_down.lua: count a count-down latch down by one (Redisson's
-- RCountDownLatch.countDown); at zero the key goes and the waiters are told.
--
-- KEYS[1]  latch key NAME (String: the count, decimal)
-- KEYS[2]  channel "redisson_countdownlatch__channel__{NAME}"
-- ARGV[1]  zero-count message ("0")
-- ARGV[2]  the publish command: "publish" or "spublish" (sharded, in a cluster)
--
-- Replies:
--   n >= 1  the count left after this call
--   0       the count reached zero (or was at or below it, as a Java trySetCount(-k)
--           leaves it): KEYS[1] deleted and ARGV[1] published; also the answer when
--           there is no key (nothing written: Redisson's DECR of a missing key makes -1
--           and deletes it again, so it writes nothing either)
-- Errors:
--   WRONGTYPE   KEYS[1] holds another type, or a String that is not an integer;
--               nothing written
local count = redis.call('get', KEYS[1])
if count == false then
  return 0
end
if string.find(count, '^-?%d+$') == nil then
  return redis.error_reply('WRONGTYPE ' .. KEYS[1] .. ' is not a count-down latch (not an integer count)')
end
local left = redis.call('decr', KEYS[1])
if left > 0 then
  return left
end
-- Redisson publishes only when the count lands on 0 exactly; a count that was already
-- below zero is deleted here too, and announced, so no waiter is left behind.
redis.call('del', KEYS[1])
redis.call(ARGV[2], KEYS[2], ARGV[1])
return 0

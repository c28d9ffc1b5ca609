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
--           there is no key (DECR makes -1 and the key is deleted again, nothing
--           published: Redisson's own script does the same)
-- Errors:
--   WRONGTYPE   KEYS[1] holds another type: DECR refuses it before writing
--   ERR value is not an integer   KEYS[1] is a String that is not an integer: DECR
--               refuses it before writing (lock-core reports it as WrongType)
--
-- No GET or TYPE before the DECR: DECR is the script's first command and fails without
-- writing on anything but an integer, so the check costs no server call (Redisson's
-- script is the same DECR, DEL, PUBLISH).
local left = redis.call('decr', KEYS[1])
if left > 0 then
  return left
end
redis.call('del', KEYS[1])
-- Redisson publishes only when the count lands on 0 exactly; a count that was already
-- below zero (a Java trySetCount(-k)) is announced too, so no waiter is left behind.
-- -1 is a missing key (or a count of 0, which no waiter waits on): nothing to announce.
if left ~= -1 then
  redis.call(ARGV[2], KEYS[2], ARGV[1])
end
return 0

-- latch_try_set_count.lua: set a count-down latch's count when no latch exists
-- (Redisson's RCountDownLatch.trySetCount: a live latch is never reset).
--
-- KEYS[1]  latch key NAME (String: the count, decimal)
-- KEYS[2]  channel "redisson_countdownlatch__channel__{NAME}" (Redisson's literal form)
-- ARGV[1]  new-count message ("1")
-- ARGV[2]  the count (an integer >= 1; checked by the client)
-- ARGV[3]  the publish command: "publish" or "spublish" (sharded, in a cluster)
--
-- Replies:
--   1  there was no key: KEYS[1] = ARGV[2] (no expiry), ARGV[1] published
--   0  KEYS[1] exists (a live latch): untouched, nothing published
-- Errors:
--   WRONGTYPE   KEYS[1] holds another type; nothing written
if redis.call('exists', KEYS[1]) == 1 then
  if redis.call('type', KEYS[1])['ok'] ~= 'string' then
    return redis.error_reply('WRONGTYPE ' .. KEYS[1] .. ' is not a count-down latch (not a String)')
  end
  return 0
end
redis.call('set', KEYS[1], ARGV[2])
redis.call(ARGV[3], KEYS[2], ARGV[1])
return 1

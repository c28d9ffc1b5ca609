--! pes_reclaim.lua: gives the permits whose lease ran out back to the count, at most
--! {{chunk}} of them (ARGV[{{chunk}}]) per call, on the server's clock `now` (time.lua).
--! Redisson's scripts ZRANGEBYSCORE every expired id and ZREM them with `unpack`, which
--! fails past ~8,000 ids ("too many results to unpack") and runs unbounded; here the
--! expired ids are the lowest-ranked members (scores are expiry epoch ms), so ZCOUNT
--! finds how many there are and ZREMRANGEBYRANK removes the oldest chunk: O(log n + chunk),
--! no id leaves Redis. KEYS[1] is the count, KEYS[3] the `{NAME}:timeout` ZSet.
--! Sets: local `expired` (expired ids before this call), local `reclaimed` (removed now),
--! local `left_expired` (expired ids still in the ZSet: they count as available).
local expired = redis.call('zcount', KEYS[3], '-inf', now)
local reclaimed = math.min(expired, tonumber(ARGV[{{chunk}}]))
if reclaimed > 0 then
  redis.call('zremrangebyrank', KEYS[3], 0, reclaimed - 1)
  redis.call('incrby', KEYS[1], reclaimed)
end
local left_expired = expired - reclaimed

-- pes_permits.lua: the available and the acquired permits of a permit-expirable
-- semaphore, after a bounded reclaim (Redisson's availablePermits / acquiredPermits,
-- which reclaim every expired permit first; here expired permits beyond the chunk are
-- counted as available without being removed, so the answer is exact and the call
-- bounded).
--
-- KEYS[1]  the semaphore NAME (String: the count of available permits, decimal)
-- KEYS[2]  its channel, redisson_sc:{NAME}
-- KEYS[3]  its permits, {NAME}:timeout (ZSet: raw 16-byte id -> lease end, epoch ms)
-- ARGV[1]  the publish command: publish, or spublish (sharded pub/sub)
-- ARGV[2]  how many expired permits one call reclaims at most (the chunk)
--
-- Replies:
--   {available, acquired}: the count plus the expired permits still listed, and the
--   live permits (ZCOUNT of the leases ending after now)
-- Errors:
--   WRONGTYPE   a key of another type, or a count that is not a whole number
local raw = redis.call('get', KEYS[1])
local count = 0
if raw then
  count = tonumber(raw)
  if count == nil or count ~= math.floor(count) then
    return redis.error_reply('WRONGTYPE semaphore ' .. KEYS[1] .. ' holds a String that is not a count')
  end
end
local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local expired = redis.call('zcount', KEYS[3], '-inf', now)
local reclaimed = math.min(expired, tonumber(ARGV[2]))
if reclaimed > 0 then
  redis.call('zremrangebyrank', KEYS[3], 0, reclaimed - 1)
  redis.call('incrby', KEYS[1], reclaimed)
end
local left_expired = expired - reclaimed
count = count + reclaimed
if reclaimed > 0 then
  if count > 0 then
    redis.call(ARGV[1], KEYS[2], string.format('%d', count))
  end
end
local acquired = redis.call('zcount', KEYS[3], '(' .. now, '+inf')
return {count + left_expired, acquired}

-- pes_set_permits.lua: make a permit-expirable semaphore's total (available plus
-- acquired) `ARGV[1]` (Redisson's setPermits), and tell the waiters.
--
-- KEYS[1]  the semaphore NAME (String: the count of available permits, decimal)
-- KEYS[2]  its channel, redisson_sc:{NAME}
-- KEYS[3]  its permits, {NAME}:timeout (ZSet: raw 16-byte id -> lease end, epoch ms)
-- ARGV[1]  the total (0 or more; checked by the client)
-- ARGV[2]  the publish command: publish, or spublish (sharded pub/sub)
-- ARGV[3]  how many expired permits one call reclaims at most (the chunk)
--
-- Replies:
--   the count of available permits afterwards (the total minus the live permits; may
--   be below 0 when more are held than the new total). Published when above 0.
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
local reclaimed = math.min(expired, tonumber(ARGV[3]))
if reclaimed > 0 then
  redis.call('zremrangebyrank', KEYS[3], 0, reclaimed - 1)
  redis.call('incrby', KEYS[1], reclaimed)
end
local left_expired = expired - reclaimed
count = count + reclaimed
local acquired = redis.call('zcount', KEYS[3], '(' .. now, '+inf')
-- Expired permits still listed are given back by later reclaims, so they count as
-- available now.
local available = tonumber(ARGV[1]) - acquired
redis.call('set', KEYS[1], string.format('%d', available - left_expired))
if available > 0 then
  redis.call(ARGV[2], KEYS[2], string.format('%d', available))
end
return available

-- pes_release.lua: give one permit of a permit-expirable semaphore back by its id and
-- tell the waiters (Redisson's tryRelease(id), on the server's clock).
--
-- KEYS[1]  the semaphore NAME (String: the count of available permits, decimal)
-- KEYS[2]  its channel, redisson_sc:{NAME}
-- KEYS[3]  its permits, {NAME}:timeout (ZSet: raw 16-byte id -> lease end, epoch ms)
-- ARGV[1]  the permit's id (16 bytes, raw)
-- ARGV[2]  the publish command: publish, or spublish (sharded pub/sub)
-- ARGV[3]  how many expired permits one call reclaims at most (the chunk)
--
-- Replies:
--   1   released: the count went up by 1 and was published
--   0   no such permit (never taken, released already, or reclaimed after its lease)
--   -1  the permit was there but its lease had run out: it is given back (as a
--       reclaim would), and the caller is told it was no longer held
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
local score = redis.call('zscore', KEYS[3], ARGV[1])
local reply = 0
if score then
  redis.call('zrem', KEYS[3], ARGV[1])
  redis.call('incrby', KEYS[1], 1)
  count = count + 1
  reply = 1
  if tonumber(score) <= now then
    reply = -1
  end
end
local expired = redis.call('zcount', KEYS[3], '-inf', now)
local reclaimed = math.min(expired, tonumber(ARGV[3]))
if reclaimed > 0 then
  redis.call('zremrangebyrank', KEYS[3], 0, reclaimed - 1)
  redis.call('incrby', KEYS[1], reclaimed)
end
local left_expired = expired - reclaimed
count = count + reclaimed
if reply ~= 0 or reclaimed > 0 then
  if count > 0 then
    redis.call(ARGV[2], KEYS[2], string.format('%d', count))
  end
end
return reply

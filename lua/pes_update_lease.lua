-- pes_update_lease.lua: give a held permit of a permit-expirable semaphore a new lease
-- from now (Redisson's updateLeaseTime, on the server's clock). A permit whose lease ran
-- out cannot be revived.
--
-- KEYS[1]  the semaphore NAME (String: the count of available permits, decimal)
-- KEYS[2]  its channel, redisson_sc:{NAME}
-- KEYS[3]  its permits, {NAME}:timeout (ZSet: raw 16-byte id -> lease end, epoch ms)
-- ARGV[1]  the permit's id (16 bytes, raw)
-- ARGV[2]  the new lease in ms (1 or more), or -1: never expires
-- ARGV[3]  the publish command: publish, or spublish (sharded pub/sub)
-- ARGV[4]  how many expired permits one call reclaims at most (the chunk)
--
-- Replies:
--   the new lease end in epoch ms (server clock; 922337203685477 for -1)
--   0   no such live permit: nothing changed
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
if score and tonumber(score) > now then
  reply = 922337203685477
  if tonumber(ARGV[2]) > 0 then
    reply = now + tonumber(ARGV[2])
  end
  redis.call('zadd', KEYS[3], 'XX', reply, ARGV[1])
end
local expired = redis.call('zcount', KEYS[3], '-inf', now)
local reclaimed = math.min(expired, tonumber(ARGV[4]))
if reclaimed > 0 then
  redis.call('zremrangebyrank', KEYS[3], 0, reclaimed - 1)
  redis.call('incrby', KEYS[1], reclaimed)
end
local left_expired = expired - reclaimed
count = count + reclaimed
if reclaimed > 0 then
  if count > 0 then
    redis.call(ARGV[3], KEYS[2], string.format('%d', count))
  end
end
return reply

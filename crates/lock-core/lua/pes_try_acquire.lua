-- pes_try_acquire.lua: take one leased permit of a permit-expirable semaphore if one is
-- available (Redisson's RPermitExpirableSemaphore acquire script, with the lease on the
-- server's clock and a bounded reclaim of expired permits first).
--
-- KEYS[1]  the semaphore NAME (String: the count of available permits, decimal)
-- KEYS[2]  its channel, redisson_sc:{NAME}
-- KEYS[3]  its permits, {NAME}:timeout (ZSet: raw 16-byte id -> lease end, epoch ms)
-- ARGV[1]  the lease in ms (1 or more), or -1: a permit that never expires (scored
--          922337203685477, as Redisson's acquire() does)
-- ARGV[2]  the new permit's id (16 random bytes, raw)
-- ARGV[3]  the publish command: publish, or spublish (sharded pub/sub)
-- ARGV[4]  how many expired permits one call reclaims at most (the chunk)
--
-- Replies:
--   {1, lease end in epoch ms (server clock)}  taken; the id is in KEYS[3]
--   {0, ms}   none available: the earliest live lease ends in `ms` (-1: none will)
-- Errors:
--   WRONGTYPE   a key of another type, or a count that is not a whole number
--
-- Server calls when a permit is free: GET (the count), TIME (only for a lease), DECRBY,
-- ZADD, PTTL (+ PEXPIRE when NAME has a TTL); Redisson's script is ZRANGEBYSCORE (its
-- reclaim), GET, DECRBY, ZADD, PTTL. Expired permits are reclaimed only when the count
-- says none is free (an expired one may then be waiting to be given back): off the
-- common path, a chunk at a time; available_permits() reclaims too.
local raw = redis.call('get', KEYS[1])
local count = 0
if raw then
  count = tonumber(raw)
  if count == nil or count ~= math.floor(count) then
    return redis.error_reply('WRONGTYPE semaphore ' .. KEYS[1] .. ' holds a String that is not a count')
  end
end
local lease = tonumber(ARGV[1])
local now = 0
if count < 1 or lease > 0 then
  local t = redis.call('time')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
if count < 1 then
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
end
if count >= 1 then
  local expiry = 922337203685477
  if lease > 0 then
    expiry = now + lease
  end
  redis.call('decrby', KEYS[1], 1)
  redis.call('zadd', KEYS[3], expiry, ARGV[2])
  local pttl = redis.call('pttl', KEYS[1])
  if pttl > 0 then
    redis.call('pexpire', KEYS[3], pttl)
  end
  return {1, expiry}
end
local next_expiry = -1
local first = redis.call('zrangebyscore', KEYS[3], '(' .. now, '+inf', 'WITHSCORES', 'LIMIT', 0, 1)
if first[2] and tonumber(first[2]) < 922337203685477 then
  next_expiry = tonumber(first[2]) - now
end
return {0, next_expiry}

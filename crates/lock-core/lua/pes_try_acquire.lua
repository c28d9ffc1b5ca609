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
-- KEYS[4]  the wait queue, leasehold_pes_queue:{NAME} (ZSET hex id -> arrival, server µs)
-- KEYS[5]  the queue's entries, leasehold_pes_waiters:{NAME} (Hash hex id -> "LEASE_MS DEADLINE_MS")
-- KEYS[6]  the grants channel, leasehold_sem_grants:{NAME}
-- ARGV[5]  the keep-alive of a queue entry, ms; 0 for a single try (never queues and
--          never reads the queue, as before the queue)
-- ARGV[6]  the id in hex (its queue member)
-- ARGV[7]  WAIT_MS of a grant message
-- ARGV[8]  '1' when an earlier attempt of the same waiting call was sent (the id may
--          hold a permit already: taken by it, or granted by a release): it is looked up
--          first
--
-- A waiting call (issue 29 item 4) takes a free permit only when nobody is queued (no
-- barging: a holder that releases and at once acquires again queues behind the waiter
-- its release served); otherwise it serves the queue (which may serve it) and enters
-- it, or refreshes its entry (deadline now + ARGV[5]).
--
-- Replies:
--   {1, lease end in epoch ms (server clock)}  taken now; the id is in KEYS[3]
--   {2, lease end}  (ARGV[8]) the id held a permit already: taken by an earlier attempt
--             of the call, or granted by a release
--   {0, ms}   a try: none available: the earliest live lease ends in `ms` (-1: none will)
--   {0, ms, P}  waiting: not taken; queued at place P (0 = the head)
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
local waiting = ARGV[5] ~= '0'
if waiting and ARGV[8] == '1' then
  local held = redis.call('zscore', KEYS[3], ARGV[2])
  if held then
    return {2, tonumber(held)}
  end
end
local queued = waiting and redis.call('exists', KEYS[4]) == 1
local now = 0
local t = {0, 0}
if count < 1 or lease > 0 or queued then
  t = redis.call('time')
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
if count >= 1 and not queued then
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
if waiting then
  if now == 0 then
    -- Not read yet (a free permit without a lease, but a queue to join).
    t = redis.call('time')
    now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  end
  local served_self = false
  local self_expiry = 0
  local next_head = nil
  local granted = {}
  while true do
    local head = redis.call('zrange', KEYS[4], 0, 0)[1]
    if not head then break end
    local entry = redis.call('hget', KEYS[5], head)
    local lease, deadline
    if entry then
      lease, deadline = string.match(entry, '^(-?%d+) (%d+)$')
    end
    local live = lease and tonumber(deadline) > now and string.match(head, '^%x+$') and #head == 32
    if live and count < 1 then
      next_head = head
      break
    end
    redis.call('zrem', KEYS[4], head)
    redis.call('hdel', KEYS[5], head)
    if live then
      local raw = string.gsub(head, '..', function(cc) return string.char(tonumber(cc, 16)) end)
      -- A permit with that id is held already (it cannot be, while queued): never twice.
      if not redis.call('zscore', KEYS[3], raw) then
        local expiry = 922337203685477
        if tonumber(lease) > 0 then
          expiry = now + tonumber(lease)
        end
        redis.call('decrby', KEYS[1], 1)
        redis.call('zadd', KEYS[3], expiry, raw)
        count = count - 1
        if head == ARGV[6] then
          served_self = true
          self_expiry = expiry
        else
          granted[#granted + 1] = head
        end
      end
    end
  end
  if served_self or #granted > 0 then
    local pttl = redis.call('pttl', KEYS[1])
    if pttl > 0 then
      redis.call('pexpire', KEYS[3], pttl)
    end
  end
  for _, id in ipairs(granted) do
    redis.call(ARGV[3], KEYS[6], id .. ' ' .. (next_head or '-') .. ' ' .. ARGV[7])
  end
  if served_self then
    return {1, self_expiry}
  end
  local place = redis.call('zrank', KEYS[4], ARGV[6])
  if not place then
    if not next_head and count >= 1 then
      -- The queue held only dead entries: the free permit is this call's.
      local expiry = 922337203685477
      if lease > 0 then
        expiry = now + lease
      end
      redis.call('decrby', KEYS[1], 1)
      redis.call('zadd', KEYS[3], expiry, ARGV[2])
      return {1, expiry}
    end
    redis.call('zadd', KEYS[4], tonumber(t[1]) * 1000000 + tonumber(t[2]), ARGV[6])
    place = redis.call('zrank', KEYS[4], ARGV[6])
  end
  redis.call('hset', KEYS[5], ARGV[6], ARGV[1] .. ' ' .. string.format('%d', now + tonumber(ARGV[5])))
  if redis.call('pttl', KEYS[4]) < tonumber(ARGV[5]) then
    redis.call('pexpire', KEYS[4], ARGV[5])
  end
  if redis.call('pttl', KEYS[5]) < tonumber(ARGV[5]) then
    redis.call('pexpire', KEYS[5], ARGV[5])
  end
  local next_expiry = -1
  local first = redis.call('zrangebyscore', KEYS[3], '(' .. now, '+inf', 'WITHSCORES', 'LIMIT', 0, 1)
  if first[2] and tonumber(first[2]) < 922337203685477 then
    next_expiry = tonumber(first[2]) - now
  end
  return {0, next_expiry, place}
end
local next_expiry = -1
local first = redis.call('zrangebyscore', KEYS[3], '(' .. now, '+inf', 'WITHSCORES', 'LIMIT', 0, 1)
if first[2] and tonumber(first[2]) < 922337203685477 then
  next_expiry = tonumber(first[2]) - now
end
return {0, next_expiry}

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
--#include fragments/sem_count.lua
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
  --#include fragments/pes_reclaim.lua chunk=4
  count = count + reclaimed
  if reclaimed > 0 then
    --#include fragments/sem_publish.lua count=count cmd=3
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
  --#include fragments/pes_serve.lua wait=7 cmd=3 self=ARGV[6]
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
  --#include fragments/raise_ttl.lua key=KEYS[4] lease=ARGV[5]
  --#include fragments/raise_ttl.lua key=KEYS[5] lease=ARGV[5]
  --#include fragments/pes_next_expiry.lua
  return {0, next_expiry, place}
end
--#include fragments/pes_next_expiry.lua
return {0, next_expiry}

-- fenced_acquire.lua: take or re-enter a reentrant lock and hand out a fencing token
-- (Redisson's RLock layout, plus RFencedLock's counter "redisson_lock_token:{NAME}").
-- The same steps as acquire.lua (an absolute hold count from the client), plus the
-- token; keep the two in step.
--
-- KEYS[1]  lock key: a Hash, field = owner "CLIENT_UUID:N", value = hold count (and
--          the owner's waiter flag "CLIENT_UUID:N:w" while a waiter waits; the last
--          release removes the key)
-- KEYS[2]  fencing counter "redisson_lock_token:{NAME}": a String integer, the last
--          token issued for NAME
-- ARGV[1]  lease in milliseconds (> 0); a re-entry only raises the key's TTL to it
-- ARGV[2]  owner field
-- ARGV[3]  the owner's hold count after this acquire: its accounted holds + 1 (>= 1)
-- ARGV[4]  fencing counter TTL in milliseconds (> 0), set again whenever a token is issued
-- ARGV[5]  "1": a waiting call, which flags the holder when the lock is held (the waiter
--          flag "HOLDER:w", see acquire.lua), so that its release publishes; "0": a
--          single try, which writes nothing when the lock is held
--
-- Replies:
--   {1, 1, token}        acquired fresh, with a new token
--   {1, ARGV[3], token}  re-entered; token = the outer hold's: the counter's value, which
--                        no one else can move while this owner holds the lock (a new
--                        one only if the counter is gone, e.g. a failover lost it)
--   {0, pttl}            held by another owner; pttl = the key's TTL in ms, -1 if none
--                        (a waiting call has flagged the holder)
-- Errors:
--   WRONGTYPE  KEYS[1] is not a Hash, or KEYS[2] is not a String; nothing was written
--   a script error when KEYS[2] holds a String that is not an integer; nothing written
--
-- Tokens: every new token is max(counter, server time in microseconds) + 1, and the
-- counter is set to it. While the counter exists tokens strictly increase whatever the
-- clocks do. When it is missing (a restart without persistence, a failover to a replica
-- that lacks it, an expired counter) or behind (a promoted replica that missed the last
-- tokens), the next token comes from the server's clock, above every earlier token as
-- long as the clock now reads later than the issuing server's clock did at the last
-- token (docs/architecture/fencing.md).

-- Issues the next token; returns it as a decimal string (Lua numbers print as 1.7e+15).
local function next_token()
  local now = redis.call('time')
  local now_us = now[1] .. string.format('%06d', tonumber(now[2]))
  local counter = redis.call('get', KEYS[2])
  -- tonumber() of a non-integer String is nil: the comparison raises, before any write.
  if counter == false or tonumber(counter) < tonumber(now_us) then
    redis.call('set', KEYS[2], now_us)
  end
  redis.call('incr', KEYS[2])
  redis.call('pexpire', KEYS[2], ARGV[4])
  return redis.call('get', KEYS[2])
end

if redis.call('exists', KEYS[1]) == 0 then
  local token = next_token()
  redis.call('hset', KEYS[1], ARGV[2], 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  return {1, 1, tonumber(token)}
end
-- HGET fails on a key of another type before anything is written.
if redis.call('hget', KEYS[1], ARGV[2]) then
  -- A re-entry keeps the outer hold's token (as Hazelcast and bsm/redislock do; Redisson
  -- issues a new one): every guard of one hold writes with the same fence.
  local token = redis.call('get', KEYS[2])
  if not token then
    token = next_token()
  end
  redis.call('hset', KEYS[1], ARGV[2], ARGV[3])
  -- A nested hold with a shorter lease must not cut the outer holds short.
  if redis.call('pttl', KEYS[1]) < tonumber(ARGV[1]) then
    redis.call('pexpire', KEYS[1], ARGV[1])
  end
  return {1, tonumber(ARGV[3]), tonumber(token)}
end
if ARGV[5] == '1' then
  for _, field in ipairs(redis.call('hkeys', KEYS[1])) do
    if string.sub(field, -2) ~= ':w' then
      redis.call('hset', KEYS[1], field .. ':w', 1)
    end
  end
end
return {0, redis.call('pttl', KEYS[1])}

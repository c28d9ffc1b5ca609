-- fenced_acquire.lua: take or re-enter a reentrant lock and hand out a fencing token
-- (Redisson's RLock layout, plus RFencedLock's counter "redisson_lock_token:{NAME}").
-- The same steps as acquire.lua, plus the token; keep the two in step.
--
-- KEYS[1]  lock key: a Hash, field = owner "CLIENT_UUID:N", value = hold count, plus the
--          leasehold-only field "leasehold:fence" = the token of the current hold (the
--          whole key, that field included, is deleted by the last release)
-- KEYS[2]  acquire latch "leasehold_acquire_latch:{NAME}:REQUEST_ID" (as in acquire.lua)
-- KEYS[3]  fencing counter "redisson_lock_token:{NAME}": a String integer, the last
--          token issued for NAME
-- ARGV[1]  lease in milliseconds (> 0); a re-entry only raises the key's TTL to it
-- ARGV[2]  owner field
-- ARGV[3]  acquire latch TTL in milliseconds (> 0)
-- ARGV[4]  fencing counter TTL in milliseconds (> 0), set again whenever a token is issued
--
-- Replies:
--   {1, holds, token}  acquired; holds = this owner's hold count after the call (1 =
--                      fresh); token = this hold's fencing token: a fresh hold gets a new
--                      one, a re-entry (or a replay) answers the outer hold's
--   {0, pttl}          held by another owner; pttl = the key's TTL in ms, -1 if none
-- Errors:
--   WRONGTYPE  KEYS[1] is not a Hash, or KEYS[3] is not a String; nothing was written
--   a script error when KEYS[3] holds a String that is not an integer; nothing written
--
-- Tokens: every token is max(counter, server time in microseconds) + 1, and the counter
-- is set to it. While the counter exists tokens strictly increase whatever the clocks do.
-- When it is missing (a restart without persistence, a failover to a replica that lacks
-- it, an expired counter) or behind (a promoted replica that missed the last tokens), the
-- next token comes from the server's clock, above every earlier token as long as the
-- clock now reads later than the issuing server's clock did at the last token
-- (docs/architecture.md, "Fencing tokens").
local FENCE = 'leasehold:fence'

-- Issues the next token; returns it as a decimal string (Lua numbers print as 1.7e+15).
local function next_token()
  local now = redis.call('time')
  local now_us = now[1] .. string.format('%06d', tonumber(now[2]))
  local counter = redis.call('get', KEYS[3])
  -- tonumber() of a non-integer String is nil: the comparison raises, before any write.
  if counter == false or tonumber(counter) < tonumber(now_us) then
    redis.call('set', KEYS[3], now_us)
  end
  redis.call('incr', KEYS[3])
  redis.call('pexpire', KEYS[3], ARGV[4])
  return redis.call('get', KEYS[3])
end

-- The token of the owner's current hold. A hold without one (this script always writes
-- it, but a Hash written by other means can lack it) gets a new one.
local function hold_token()
  local token = redis.call('hget', KEYS[1], FENCE)
  if not token then
    token = next_token()
    redis.call('hset', KEYS[1], FENCE, token)
  end
  return tonumber(token)
end

if redis.call('exists', KEYS[2]) == 1 then
  local holds = redis.call('hget', KEYS[1], ARGV[2])
  if holds then
    -- A replay of a call that already took its hold: count nothing, answer its token.
    return {1, tonumber(holds), hold_token()}
  end
  -- The hold this request took is gone (expired, force-released): acquire afresh below.
end
if redis.call('exists', KEYS[1]) == 0 then
  local token = next_token()
  redis.call('hincrby', KEYS[1], ARGV[2], 1)
  redis.call('hset', KEYS[1], FENCE, token)
  redis.call('pexpire', KEYS[1], ARGV[1])
  redis.call('set', KEYS[2], '1', 'PX', ARGV[3])
  return {1, 1, tonumber(token)}
end
if redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
  -- A re-entry keeps the outer hold's token (as Hazelcast and bsm/redislock do; Redisson
  -- issues a new one): every guard of one hold writes with the same fence.
  local token = hold_token()
  local holds = redis.call('hincrby', KEYS[1], ARGV[2], 1)
  -- A nested hold with a shorter lease must not cut the outer holds short.
  if redis.call('pttl', KEYS[1]) < tonumber(ARGV[1]) then
    redis.call('pexpire', KEYS[1], ARGV[1])
  end
  redis.call('set', KEYS[2], '1', 'PX', ARGV[3])
  return {1, holds, token}
end
return {0, redis.call('pttl', KEYS[1])}

--! token.lua: defines next_token(counter, ttl_ms): issues the next fencing token from
--! the counter `counter` (a String integer, Redisson's "redisson_lock_token:{NAME}") and
--! gives the counter the TTL `ttl_ms` again. Every new token is max(counter, server time
--! in microseconds) + 1, and the counter is set to it (docs/architecture/fencing.md).
--! The caller has checked that the counter, if present, is an integer String.
--! Returns the token as a decimal string (Lua numbers print as 1.7e+15).
-- Issues the next token; returns it as a decimal string (Lua numbers print as 1.7e+15).
local function next_token(counter, ttl_ms)
  local now = redis.call('time')
  local now_us = now[1] .. string.format('%06d', tonumber(now[2]))
  local last = redis.call('get', counter)
  if last == false or tonumber(last) < tonumber(now_us) then
    redis.call('set', counter, now_us)
  end
  redis.call('incr', counter)
  redis.call('pexpire', counter, ttl_ms)
  return redis.call('get', counter)
end

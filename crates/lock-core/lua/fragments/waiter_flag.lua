--! waiter_flag.lua: flags every holder of KEYS[1] as waited for (field "HOLDER:w" = 1
--! beside "HOLDER"), so that its release publishes even with
--! `redisson_waiters(false)`. See "The waiter flag" in acquire.lua.
for _, field in ipairs(redis.call('hkeys', KEYS[1])) do
  if string.sub(field, -2) ~= ':w' then
    redis.call('hset', KEYS[1], field .. ':w', 1)
  end
end

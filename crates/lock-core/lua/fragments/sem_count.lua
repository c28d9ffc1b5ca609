--! sem_count.lua: reads a semaphore's count of available permits (Redisson's String
--! KEYS[1], decimal) into `count`, 0 when the key is missing (Redisson counts a missing
--! key as 0 permits, and so do its waiters: they wait). A String that is not a whole
--! number is refused as WRONGTYPE before anything is written (INCRBY would say "not an
--! integer", a Hash or a List fails GET with WRONGTYPE itself).
--! Sets: local `raw` (the String, or false when missing), local `count`.
local raw = redis.call('get', KEYS[1])
local count = 0
if raw then
  count = tonumber(raw)
  if count == nil or count ~= math.floor(count) then
    return redis.error_reply('WRONGTYPE semaphore ' .. KEYS[1] .. ' holds a String that is not a count')
  end
end

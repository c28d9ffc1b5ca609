-- fenced_write.lua: the resource side of fencing. Writes a String resource only if the
-- writer's token is at least the highest token that wrote it before, and remembers it.
--
-- KEYS[1]  resource key (a String; any key name the application uses)
-- KEYS[2]  its fence "leasehold_fence:{RESOURCE}": a String integer, the highest token
--          that wrote KEYS[1]. No TTL: it must live as long as the resource (delete both
--          together)
-- ARGV[1]  the writer's token (a decimal integer >= 1 and <= 2^53, checked by the caller)
-- ARGV[2]  the value to store in KEYS[1]
--
-- Replies:
--   {1, token}  written: KEYS[1] = ARGV[2], fence = ARGV[1] (an equal token writes again:
--               one holder may write many times)
--   {0, fence}  rejected: a later holder's token (fence > ARGV[1]) wrote already;
--               nothing written
-- Errors:
--   WRONGTYPE  KEYS[1] or KEYS[2] is not a String; nothing was written
--   a script error when KEYS[2] holds a String that is not an integer; nothing written
redis.call('strlen', KEYS[1])
local fence = redis.call('get', KEYS[2])
if fence and tonumber(fence) > tonumber(ARGV[1]) then
  return {0, tonumber(fence)}
end
redis.call('set', KEYS[1], ARGV[2])
redis.call('set', KEYS[2], ARGV[1])
return {1, tonumber(ARGV[1])}

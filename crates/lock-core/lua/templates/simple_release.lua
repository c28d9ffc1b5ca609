-- simple_release.lua: the minimal lock's atomic compare-and-delete.
--
-- KEYS[1]  lock key (String)
-- ARGV[1]  owner value
--
-- Replies:
--   1  KEYS[1] held ARGV[1] and was deleted
--   0  KEYS[1] is absent or holds another owner's value: untouched
-- Errors:
--   WRONGTYPE   KEYS[1] exists and is not a String; nothing was written
if redis.call('get', KEYS[1]) == ARGV[1] then
  return redis.call('del', KEYS[1])
end
return 0

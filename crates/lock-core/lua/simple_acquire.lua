-- simple_acquire.lua: the minimal lock. SET NX PX, and the remaining TTL when taken.
--
-- KEYS[1]  lock key: a String whose value is the owner "CLIENT_UUID-N"
-- ARGV[1]  owner value
-- ARGV[2]  lease in ms (> 0)
--
-- Replies:
--   nil   acquired: KEYS[1] now holds ARGV[1] with a TTL of ARGV[2]
--   pttl  held (by anyone, this owner included: not reentrant); the key's remaining
--         TTL in ms, -1 when it has no expiry
if redis.call('set', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return nil
end
return redis.call('pttl', KEYS[1])

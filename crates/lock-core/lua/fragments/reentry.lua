--! reentry.lua: the owner's field exists: set its hold count to ARGV[3] (absolute, so
--! a replay counts once) and raise the key's TTL to the lease (never lower it).
--! Needs: KEYS[1] lock, ARGV[1] lease, ARGV[2] owner, ARGV[3] hold count.
--! Returns {1, ARGV[3]}.
redis.call('hset', KEYS[1], ARGV[2], ARGV[3])
-- A nested hold with a shorter lease must not cut the outer holds short.
--#include fragments/raise_ttl.lua key=KEYS[1] lease=ARGV[1]
return {1, tonumber(ARGV[3])}

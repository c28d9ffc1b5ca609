-- client_describe.lua: write (or refresh) a client's description and its expiry, in one
-- request (leasehold only; Redisson ignores the key). The client sends it at connect and
-- every watchdog period; the key outlives the client by at most ARGV[1] ms.
--
-- KEYS[1]  the description "leasehold_client:{UUID}" (Hash)
-- ARGV[1]  its TTL in ms (> 0): the client's watchdog timeout, three refresh periods
-- ARGV[2..] field, value, field, value, ... (host, pid, service, started, version)
--
-- Replies:
--   1  written, TTL set
-- Errors:
--   WRONGTYPE  KEYS[1] is not a Hash; nothing was written
redis.call('hset', KEYS[1], unpack(ARGV, 2))
redis.call('pexpire', KEYS[1], ARGV[1])
return 1

--! raise_ttl.lua: raises the TTL of the lock key {{key}} to the lease {{lease}} (ms), never
--! lowers it (a key without an expiry, PTTL -1, gets one).
--! Params: key = the lock key expression, lease = the lease expression (a string).
if redis.call('pttl', {{key}}) < tonumber({{lease}}) then
  redis.call('pexpire', {{key}}, {{lease}})
end

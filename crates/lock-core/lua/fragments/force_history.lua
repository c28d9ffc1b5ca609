--! force_history.lua: records a forced unlock in the lock's history List, when the
--! caller named one: LPUSH "<server TIME ms> force-unlock by=<who> owners=<a,b>", keep
--! the newest 100 entries, expire 7 days after the last one (leasehold only; Redisson
--! ignores the key). Needs: `removed` (the owner fields removed, comma-separated, maybe
--! empty). Params: `history` (the ARGV holding the List's key, `leasehold_history:{NAME}`,
--! or '' to record nothing), `by` (the ARGV holding who forced it).
if {{history}} and {{history}} ~= '' then
  local clock = redis.call('time')
  local at = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
  redis.call('lpush', {{history}}, string.format('%d force-unlock by=%s owners=%s', at, {{by}}, removed))
  redis.call('ltrim', {{history}}, 0, 99)
  redis.call('pexpire', {{history}}, 604800000)
end

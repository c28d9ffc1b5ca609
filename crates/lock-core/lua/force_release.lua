-- force_release.lua: delete a lock whoever holds it, and wake its waiters.
--
-- KEYS[1]  lock key
-- KEYS[2]  release channel "redisson_lock__channel:{NAME}"
-- ARGV[1]  unlock message ("0")
-- ARGV[2]  the publish command: "publish" (classic pub/sub) or "spublish" (sharded)
-- ARGV[3]  optional: the lock's history "leasehold_history:{NAME}" (a List, in NAME's
--          slot; in ARGV, not KEYS, for the reason rw_force_release.lua gives), or ''
--          to record nothing
-- ARGV[4]  with ARGV[3]: who forced it (the forcing client's connection name)
--
-- Replies:
--   1  the key existed and was deleted; ARGV[1] published; with ARGV[3], the removed
--      owners recorded in the history (fragments/force_history.lua)
--   0  there was no such key; nothing published or recorded
local removed = ''
if ARGV[3] and ARGV[3] ~= '' then
  redis.call('llen', ARGV[3])
  local shape = redis.call('type', KEYS[1])['ok']
  local owners = {}
  if shape == 'hash' then
    for _, field in ipairs(redis.call('hkeys', KEYS[1])) do
      if field ~= 'mode' and string.sub(field, -2) ~= ':w' then
        owners[#owners + 1] = field
      end
    end
  elseif shape == 'string' then
    owners[1] = redis.call('get', KEYS[1])
  end
  removed = table.concat(owners, ',')
end
if redis.call('del', KEYS[1]) == 1 then
  redis.call(ARGV[2], KEYS[2], ARGV[1])
  if ARGV[3] and ARGV[3] ~= '' then
    local clock = redis.call('time')
    local at = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
    redis.call('lpush', ARGV[3], string.format('%d force-unlock by=%s owners=%s', at, ARGV[4], removed))
    redis.call('ltrim', ARGV[3], 0, 99)
    redis.call('pexpire', ARGV[3], 604800000)
  end
  return 1
end
return 0

-- election_force_release.lua: force_release.lua for an election's lead: delete the lead
-- whoever holds it, wake the waiting candidates, record it in the lead's history, and
-- tell the followers ("N <term>" on the change channel) when a leader was recorded.
-- The leader finds out at its next renewal (lost()).
--
-- KEYS[1]  lead key "leasehold_election:{NAME}"
-- KEYS[2]  its release channel "redisson_lock__channel:leasehold_election:{NAME}"
-- KEYS[3]  leader record "leasehold_election_leader:{NAME}"
-- KEYS[4]  change channel "leasehold_election__channel:{NAME}"
-- ARGV[1..4]  force_release.lua's (unlock message, publish command, history key or '',
--             who)
--
-- Replies:
--   1  the lead existed and was deleted (as force_release.lua), the record with it
--   0  there was no lead; nothing published or recorded (a stale record is deleted)
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
local term = redis.call('hget', KEYS[3], 'term')
redis.call('del', KEYS[3])
if redis.call('del', KEYS[1]) == 1 then
  redis.call(ARGV[2], KEYS[2], ARGV[1])
  if term then
    redis.call(ARGV[2], KEYS[4], 'N ' .. term)
  end
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

-- fair_force_release.lua: force_release.lua for a fair lock: delete the lock whoever
-- holds it, purge the dead queue heads, and tell the head (Redisson's RFairLock
-- forceUnlock does the same). Queued waiters keep their places.
--
-- KEYS[1]  lock key
-- KEYS[2]  wait queue "redisson_lock_queue:{NAME}" (List)
-- KEYS[3]  deadlines "redisson_lock_timeout:{NAME}" (ZSet, ms since the epoch)
-- KEYS[4]  release channel "redisson_lock__channel:{NAME}"; the head's channel is
--          KEYS[4] .. ':' .. head
-- ARGV[1]  unlock message ("0")
-- ARGV[2]  the publish command: "publish" (classic pub/sub) or "spublish" (sharded)
-- ARGV[3]  optional: the lock's history "leasehold_history:{NAME}", or '' (as
--          force_release.lua)
-- ARGV[4]  with ARGV[3]: who forced it
--
-- Replies:
--   1  the key existed and was deleted; ARGV[1] published to the head's channel, if any;
--      with ARGV[3], the removed owners recorded in the history
--   0  no key; nothing published
-- Errors:
--   WRONGTYPE  KEYS[2] is not a List or KEYS[3] not a ZSet; nothing was written

redis.call('lindex', KEYS[2], 0)
redis.call('zcard', KEYS[3])

local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
while true do
  local head = redis.call('lindex', KEYS[2], 0)
  if not head then break end
  local deadline = redis.call('zscore', KEYS[3], head)
  if deadline and tonumber(deadline) > now then break end
  redis.call('lpop', KEYS[2])
  redis.call('zrem', KEYS[3], head)
end

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
if redis.call('del', KEYS[1]) == 0 then
  return 0
end
if ARGV[3] and ARGV[3] ~= '' then
  local clock = redis.call('time')
  local at = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
  redis.call('lpush', ARGV[3], string.format('%d force-unlock by=%s owners=%s', at, ARGV[4], removed))
  redis.call('ltrim', ARGV[3], 0, 99)
  redis.call('pexpire', ARGV[3], 604800000)
end
local head = redis.call('lindex', KEYS[2], 0)
if head then
  redis.call(ARGV[2], KEYS[4] .. ':' .. head, ARGV[1])
end
return 1

-- rw_force_release.lua: delete a read/write lock whoever holds it (readers and writer),
-- and publish the write-unlock message, which wakes every waiter. The readers' timeout
-- keys are left to expire with their leases (as Redisson's forceUnlock does): without
-- the Hash they grant nothing, and an acquire writes a fresh count over them.
--
-- Only KEYS[1] is declared; the channel comes in ARGV[3] (it is never a key, and a
-- declared key missing on the node makes the call a TRYAGAIN refusal in a MIGRATING
-- cluster slot, while the lock is still there to delete). It has NAME's hash tag.
--
-- KEYS[1]  lock key NAME (Hash)
-- ARGV[1]  unlock message ("1": wakes every waiter)
-- ARGV[2]  the publish command: "publish" or "spublish" (sharded, in a cluster)
-- ARGV[3]  channel "redisson_rwlock:{NAME}"
-- ARGV[4]  optional: the lock's history "leasehold_history:{NAME}", or '' (as
--          force_release.lua)
-- ARGV[5]  with ARGV[4]: who forced it
--
-- Replies:
--   1  the lock existed and was deleted; ARGV[1] published; with ARGV[4], the removed
--      readers and writer recorded in the history
--   0  there was no such key; nothing published
-- Errors:
--   WRONGTYPE   KEYS[1] holds another type, or a Hash without "mode" (a plain lock);
--               nothing written
local mode = redis.call('hget', KEYS[1], 'mode')
if mode == false and redis.call('exists', KEYS[1]) == 1 then
  return redis.error_reply('WRONGTYPE ' .. KEYS[1] .. ' holds a lock that is not a read/write lock (a Hash without a mode field)')
end
if mode == false then
  return 0
end
local removed = ''
if ARGV[4] and ARGV[4] ~= '' then
  redis.call('llen', ARGV[4])
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
redis.call('del', KEYS[1])
redis.call(ARGV[2], ARGV[3], ARGV[1])
if ARGV[4] and ARGV[4] ~= '' then
  local clock = redis.call('time')
  local at = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
  redis.call('lpush', ARGV[4], string.format('%d force-unlock by=%s owners=%s', at, ARGV[5], removed))
  redis.call('ltrim', ARGV[4], 0, 99)
  redis.call('pexpire', ARGV[4], 604800000)
end
return 1

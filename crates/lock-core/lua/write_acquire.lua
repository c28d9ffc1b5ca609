-- write_acquire.lua: take or re-enter the write hold of a read/write lock (Redisson's
-- RReadWriteLock layout, see read_acquire.lua): the writer's field "OWNER:write" =
-- its hold count, "mode" = "write". A writer excludes every reader and every other
-- writer. An owner that holds only reads cannot take it (an upgrade would wait for
-- itself forever); the client refuses that before sending (WouldDeadlock), and this
-- script answers it "held" like any reader.
--
-- As acquire.lua, the client sends the count it wants (replay-safe). Better than
-- Redisson: reader fields with no live timeout key are pruned first (rw_prune.lua), so
-- a reader whose process died blocks writers at most its lease; a re-entry raises the
-- TTL to the lease (never lowers it) where Redisson adds the lease to it each time.
--
-- KEYS[1]  lock key NAME (Hash)
-- ARGV[1]  lease in ms (> 0)
-- ARGV[2]  writer field "CLIENT_UUID:N:write"
-- ARGV[3]  the owner's write hold count after this acquire (>= 1)
-- ARGV[4]  the key prefix of every reader's timeout keys: "{NAME}", or NAME when it
--          contains "{"
--
-- Replies:
--   {1, 1}        acquired fresh: the lock was free (or only dead readers were left)
--   {1, ARGV[3]}  re-entered: the owner's count is now ARGV[3]
--   {0, pttl}     held by readers or another writer; pttl = in read mode the longest
--                 live read hold's remaining lease, else the Hash's PTTL (-1: no
--                 expiry)
-- Errors:
--   WRONGTYPE   KEYS[1] holds another type, or a Hash without "mode"; nothing written
local mode = redis.call('hget', KEYS[1], 'mode')
if mode == false and redis.call('exists', KEYS[1]) == 1 then
  return redis.error_reply('WRONGTYPE ' .. KEYS[1] .. ' holds a lock that is not a read/write lock (a Hash without a mode field)')
end
local function prune_readers(prefix)
  local live, longest = 0, 0
  local fields = redis.call('hgetall', KEYS[1])
  for i = 1, #fields, 2 do
    local field, count = fields[i], tonumber(fields[i + 1])
    if count ~= nil and field ~= 'mode' and string.sub(field, -6) ~= ':write' then
      local alive = false
      for k = count, 1, -1 do
        local ttl = redis.call('pttl', prefix .. ':' .. field .. ':rwlock_timeout:' .. k)
        if ttl ~= -2 then
          alive = true
          if ttl > longest then longest = ttl end
        end
      end
      if alive then
        live = live + 1
      else
        redis.call('hdel', KEYS[1], field)
      end
    end
  end
  return live, longest
end
if mode == 'read' then
  local live, longest = prune_readers(ARGV[4])
  if live > 0 then
    -- The soonest a retry can help is when the longest read hold ends (its timeout key
    -- expires; nothing is published then), not the Hash's TTL, which a zombie renewal
    -- of an older client may keep far longer.
    return {0, longest > 0 and longest or redis.call('pttl', KEYS[1])}
  end
  -- Every reader is gone: the lock is free.
  redis.call('del', KEYS[1])
  mode = false
end
if mode == false then
  redis.call('hset', KEYS[1], 'mode', 'write', ARGV[2], 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  return {1, 1}
end
if redis.call('hexists', KEYS[1], ARGV[2]) == 0 then
  return {0, redis.call('pttl', KEYS[1])}
end
redis.call('hset', KEYS[1], ARGV[2], ARGV[3])
if redis.call('pttl', KEYS[1]) < tonumber(ARGV[1]) then
  redis.call('pexpire', KEYS[1], ARGV[1])
end
return {1, tonumber(ARGV[3])}

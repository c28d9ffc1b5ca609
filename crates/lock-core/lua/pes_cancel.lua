-- pes_cancel.lua: undo a permit-expirable semaphore's waiting acquire that ended
-- without its permit (a deadline, an error, a dropped future): its place in the wait
-- queue is left, and a permit a release granted it before it heard is released (once:
-- by its id). Replay-safe.
--
-- KEYS[1]  the semaphore NAME (String: the count of available permits, decimal)
-- KEYS[2]  its channel, redisson_sc:{NAME}
-- KEYS[3]  its permits, {NAME}:timeout (ZSet: raw 16-byte id -> lease end, epoch ms)
-- KEYS[4]  the wait queue, leasehold_pes_queue:{NAME}
-- KEYS[5]  the queue's entries, leasehold_pes_waiters:{NAME}
-- KEYS[6]  the grants channel, leasehold_sem_grants:{NAME}
-- ARGV[1]  the acquire's permit id (16 bytes, raw)
-- ARGV[2]  the same id in hex (its queue member)
-- ARGV[3]  the publish command: publish, or spublish (sharded pub/sub)
-- ARGV[4]  WAIT_MS of a grant message
--
-- Replies:
--   1   a permit with that id was held (granted, or taken by an attempt whose answer
--       was lost): released, the count published
--   0   none held: nothing given back
-- Either way the id's queue entry is gone, and when it was queued or gave a permit
-- back, the queue is served (the waiters behind it may be served now).
-- Errors:
--   WRONGTYPE   a key of another type, or a count that is not a whole number
local raw = redis.call('get', KEYS[1])
local count = 0
if raw then
  count = tonumber(raw)
  if count == nil or count ~= math.floor(count) then
    return redis.error_reply('WRONGTYPE semaphore ' .. KEYS[1] .. ' holds a String that is not a count')
  end
end
local was_queued = redis.call('zrem', KEYS[4], ARGV[2]) == 1
redis.call('hdel', KEYS[5], ARGV[2])
local given = 0
if redis.call('zscore', KEYS[3], ARGV[1]) then
  count = redis.call('incrby', KEYS[1], 1)
  redis.call('zrem', KEYS[3], ARGV[1])
  if count > 0 then
    redis.call(ARGV[3], KEYS[2], string.format('%d', count))
  end
  given = 1
end
if was_queued or given > 0 then
  local t = redis.call('time')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  local served_self = false
  local self_expiry = 0
  local next_head = nil
  local granted = {}
  while true do
    local head = redis.call('zrange', KEYS[4], 0, 0)[1]
    if not head then break end
    local entry = redis.call('hget', KEYS[5], head)
    local lease, deadline
    if entry then
      lease, deadline = string.match(entry, '^(-?%d+) (%d+)$')
    end
    local live = lease and tonumber(deadline) > now and string.match(head, '^%x+$') and #head == 32
    if live and count < 1 then
      next_head = head
      break
    end
    redis.call('zrem', KEYS[4], head)
    redis.call('hdel', KEYS[5], head)
    if live then
      local raw = string.gsub(head, '..', function(cc) return string.char(tonumber(cc, 16)) end)
      -- A permit with that id is held already (it cannot be, while queued): never twice.
      if not redis.call('zscore', KEYS[3], raw) then
        local expiry = 922337203685477
        if tonumber(lease) > 0 then
          expiry = now + tonumber(lease)
        end
        redis.call('decrby', KEYS[1], 1)
        redis.call('zadd', KEYS[3], expiry, raw)
        count = count - 1
        if head == '' then
          served_self = true
          self_expiry = expiry
        else
          granted[#granted + 1] = head
        end
      end
    end
  end
  if served_self or #granted > 0 then
    local pttl = redis.call('pttl', KEYS[1])
    if pttl > 0 then
      redis.call('pexpire', KEYS[3], pttl)
    end
  end
  for _, id in ipairs(granted) do
    redis.call(ARGV[3], KEYS[6], id .. ' ' .. (next_head or '-') .. ' ' .. ARGV[4])
  end
end
return given

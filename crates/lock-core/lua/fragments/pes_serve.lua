--! pes_serve.lua: serves a permit-expirable semaphore's wait queue of leasehold
--! acquirers (issue 29 item 4), as sem_serve.lua serves a plain semaphore's: from the
--! head while a permit is free, each live entry is granted the permit whose id it
--! queued with (ZADD of the raw id with its lease end, DECRBY 1) and leaves the queue;
--! entries past their deadline are purged unserved. A waiter that dies after its grant
--! holds a permit that expires with its lease, as any holder's does. Each grant is
--! published on the grants channel as "ID NEXT WAIT_MS" (ID in hex; the lock queue's
--! message format). The count's TTL, when NAME has one, is given to the ZSet, as a take
--! does.
--! Needs: KEYS[1] the count, KEYS[3] the permits ZSet, KEYS[4] the queue (ZSET hex id ->
--! arrival), KEYS[5] the entries (Hash hex id -> "LEASE_MS DEADLINE_MS", LEASE_MS -1
--! for a permit that never expires), KEYS[6] the grants channel; ARGV[{{wait}}] the new
--! head's WAIT_MS, ARGV[{{cmd}}] the publish command; locals `count`, `now` (time.lua);
--! {{self}} the calling acquire's hex id ('' for none: its grant is not published).
--! Sets: local `served_self`, `self_expiry` (its lease end), `next_head` (the live head
--! left waiting, or nil); `count` is lowered by the grants.
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
      if head == {{self}} then
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
  redis.call(ARGV[{{cmd}}], KEYS[6], id .. ' ' .. (next_head or '-') .. ' ' .. ARGV[{{wait}}])
end

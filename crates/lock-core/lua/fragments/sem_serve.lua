--! sem_serve.lua: serves a semaphore's wait queue of leasehold acquirers from its head
--! while the count covers the head's permits (issue 29 item 4): each served entry's
--! permits are taken (DECRBY), its operation's record says "taken N" (the record an
--! acquire that took would have written, so its release, its undo and a retry of it
--! treat the grant as any other take), and it leaves the queue. Entries past their
--! deadline (server TIME; a waiter refreshes its own every keep-alive / 3) are purged
--! unserved on the way, so a waiter that died stops blocking the queue, and is never
--! handed permits, one keep-alive after its last call. Each grant is published on the
--! grants channel as "OP NEXT WAIT_MS" (the lock's queue message: the granted waiter, the
--! new head or "-", and when the new head should look again on its own).
--! Needs: KEYS[1] the count, KEYS[{{queue}}] the queue (ZSET op -> arrival),
--! KEYS[{{entries}}] the entries (Hash op -> "PERMITS DEADLINE_MS"), KEYS[{{grants}}] the
--! grants channel; ARGV[{{prefix}}] the records' prefix ("leasehold_sem_op:{NAME}:"),
--! ARGV[{{ttl}}] a "taken" record's life (ms), ARGV[{{wait}}] the new head's WAIT_MS,
--! ARGV[{{cmd}}] the publish command; locals `count` (the count now, a number), `now`
--! (time.lua); {{self}} the calling acquire's op ('' for none: its grant is not published).
--! Sets: local `served_self` (the calling op was served), local `next_head` (the live
--! head left waiting, or nil when the queue is empty); `count` is lowered by the grants.
local served_self = false
local next_head = nil
local granted = {}
while true do
  local head = redis.call('zrange', KEYS[{{queue}}], 0, 0)[1]
  if not head then break end
  local entry = redis.call('hget', KEYS[{{entries}}], head)
  local want, deadline
  if entry then
    want, deadline = string.match(entry, '^(%d+) (%d+)$')
  end
  if want and tonumber(deadline) > now and tonumber(want) > count then
    next_head = head
    break
  end
  redis.call('zrem', KEYS[{{queue}}], head)
  redis.call('hdel', KEYS[{{entries}}], head)
  -- SET NX: an operation that has a record already (it cannot, while queued: the
  -- enqueue read none, and an undo removes the entry) is never counted twice.
  if want and tonumber(deadline) > now
      and redis.call('set', ARGV[{{prefix}}] .. head, 'taken ' .. want, 'nx', 'px', ARGV[{{ttl}}]) then
    redis.call('decrby', KEYS[1], want)
    count = count - tonumber(want)
    if head == {{self}} then
      served_self = true
    else
      granted[#granted + 1] = head
    end
  end
end
for _, op in ipairs(granted) do
  redis.call(ARGV[{{cmd}}], KEYS[{{grants}}], op .. ' ' .. (next_head or '-') .. ' ' .. ARGV[{{wait}}])
end

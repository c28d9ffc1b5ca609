--! queue_purge.lua: finds the first live entry of leasehold's wait queue, purging the
--! dead heads on the way (deadline passed, or entry gone): a waiter that died stops
--! blocking the waiters behind it one keep-alive after its last call.
--! Needs: KEYS[2] queue (List), KEYS[3] waiter entries (Hash owner -> "DEADLINE
--! LEASE"), `now` (time.lua).
--! Optional param: forget = a function (owner) run for each purged owner (an
--! election forgets the dead candidate's registered value).
--! Sets: locals `purged` (a head was purged), `head` (nil: nobody live is queued) and
--! `head_deadline`.
-- The first live entry; dead heads (deadline passed, or entry gone) are purged.
local purged = false
local head, head_deadline
while true do
  head = redis.call('lindex', KEYS[2], 0)
  if not head then break end
  local entry = redis.call('hget', KEYS[3], head)
  head_deadline = entry and tonumber(string.match(entry, '^(%d+)'))
  if head_deadline and head_deadline > now then break end
  redis.call('lpop', KEYS[2])
  redis.call('hdel', KEYS[3], head)
  {{forget}}(head)
  purged = true
end

--! queue_enter.lua: queues the owner at the end of leasehold's wait queue, or refreshes
--! its entry's deadline (now + ARGV[4]) in place, and raises the queue keys' TTLs to
--! the keep-alive.
--! Needs: KEYS[2] queue, KEYS[3] waiter entries, ARGV[1] lease, ARGV[2] owner,
--! ARGV[4] keep-alive, `now` (time.lua).
--! Sets: locals `keepalive`, `position` (0 = head).
-- Queue up, or refresh the entry (HSET answers 1 only for a new field: a refresh moves
-- the deadline, not the place).
local keepalive = tonumber(ARGV[4])
if redis.call('hset', KEYS[3], ARGV[2], string.format('%d %s', now + keepalive, ARGV[1])) == 1 then
  redis.call('rpush', KEYS[2], ARGV[2])
end
-- The queue's keys live as long as their longest-lived entry: waiters may have
-- different keep-alives (clients configured apart), and a call with a shorter one must
-- never cut the TTL that a longer-lived entry needs. Raised, never lowered (a key
-- without an expiry, PTTL -1, gets one).
for _, key in ipairs({KEYS[2], KEYS[3]}) do
  if redis.call('pttl', key) < keepalive then
    redis.call('pexpire', key, keepalive)
  end
end
local position = redis.call('lpos', KEYS[2], ARGV[2])

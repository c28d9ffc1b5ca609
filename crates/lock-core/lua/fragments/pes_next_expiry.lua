--! pes_next_expiry.lua: the ms from `now` until the earliest live permit's lease runs
--! out, or -1 when no permit will expire (none held, or only non-expiring ones, scored
--! 922337203685477 as Redisson's `acquire()` does). A waiter sleeps at most that long:
--! Redisson publishes nothing when a lease lapses.
--! Sets: local `next_expiry`.
local next_expiry = -1
local first = redis.call('zrangebyscore', KEYS[3], '(' .. now, '+inf', 'WITHSCORES', 'LIMIT', 0, 1)
if first[2] and tonumber(first[2]) < 922337203685477 then
  next_expiry = tonumber(first[2]) - now
end

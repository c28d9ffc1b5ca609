-- multi_release.lua: release.lua for several reentrant locks of one hash slot in one
-- round trip (a MultiLock's members on one client and slot, as multi_acquire.lua took
-- them). For each member, in KEYS order, exactly what release.lua does for an unlock
-- (its ARGV[6] = "0": no queue clean-up): set the owner's hold count to the absolute
-- count sent; at 0 remove the owner (and its waiter flag), publish the unlock message
-- on the member's own release channel (Redisson's "0", so Redisson and leasehold
-- waiters of that lock wake) and hand the lock to the first live waiter of its
-- leasehold wait queue. The counts are absolute, so a replayed or retried call sets
-- the same counts again; a member whose owner is already gone answers -1, as release.lua
-- does, and the others are released all the same.
--
-- Each member is independent: one that is not held by its owner (or whose key is not
-- a Hash) changes nothing of the others. Every write of a member comes after the read
-- that can fail on it (HDEL / HEXISTS fail on a key of another type before writing).
--
-- KEYS[5i-4]   member i's lock key (i = 1..n; every key in one hash slot)
-- KEYS[5i-3]   member i's release channel "redisson_lock__channel:{NAME}"
-- KEYS[5i-2]   member i's wait queue "leasehold_lock_queue:{NAME}" (List)
-- KEYS[5i-1]   member i's waiter entries "leasehold_lock_waiters:{NAME}"
-- KEYS[5i]     member i's queue channel "leasehold_lock__queue:{NAME}"
-- ARGV[1]      unlock message ("0", Redisson's UNLOCK_MESSAGE)
-- ARGV[2]      "1": read the queue even if PUBLISH reached nobody (release.lua's ARGV[5])
-- ARGV[3]      the publish command: "publish" or "spublish" (release.lua's ARGV[7])
-- ARGV[4]      "1": publish at every last release, for Redisson waiters; "0": only when
--              a leasehold waiter flagged the owner (release.lua's ARGV[8])
-- ARGV[3i+2]   member i's owner field
-- ARGV[3i+3]   member i's hold count after this release (>= 0); 0 = give it all back
-- ARGV[3i+4]   TTL in ms member i's remaining holds need, or 0 (release.lua's ARGV[3])
--
-- Replies: {r_1, ..., r_n}, r_i as release.lua answers for member i:
--   -1  the owner holds nothing on that key: nothing written or published for it
--    0  released (owner removed, message published, lock handed over if anyone waits)
--    N  N > 0 holds remain; the key's TTL is at least the TTL asked
--   -2  the key exists and is not a Hash (WRONGTYPE): nothing written for it

local function now_ms()
  local t = redis.call('time')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- The current member's keys, read by hand_over() when it is called.
local lock_key, queue_key, waiters_key, queue_channel

--#include fragments/hand_over.lua lock=lock_key queue=queue_key waiters=waiters_key queue_channel=queue_channel publish=ARGV[3]

local reply = {}
for i = 1, #KEYS / 5 do
  local k, a = 5 * i - 4, 3 * i + 2
  lock_key, queue_key, waiters_key, queue_channel = KEYS[k], KEYS[k + 2], KEYS[k + 3], KEYS[k + 4]
  local owner, target, need = ARGV[a], tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2])
  if target == 0 then
    -- release.lua's hot path: HDEL checks the owner and removes it with its flag.
    local removed = redis.pcall('hdel', lock_key, owner, owner .. ':w')
    if type(removed) ~= 'number' then
      reply[i] = -2
    elseif removed == 0 then
      reply[i] = -1
    else
      reply[i] = 0
      if removed == 2 or ARGV[4] ~= '0' then
        local listeners = redis.call(ARGV[3], KEYS[k + 1], ARGV[1])
        if listeners > 0 or removed == 2 or ARGV[2] == '1' then
          hand_over()
        end
      end
    end
  else
    local exists = redis.pcall('hexists', lock_key, owner)
    if type(exists) ~= 'number' then
      reply[i] = -2
    elseif exists == 0 then
      reply[i] = -1
    else
      redis.call('hset', lock_key, owner, target)
      if need > 0 and redis.call('pttl', lock_key) < need then
        redis.call('pexpire', lock_key, need)
      end
      reply[i] = target
    end
  end
end
return reply

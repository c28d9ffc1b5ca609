--! release_steps.lua: every step of release.lua after its header: set the owner's count,
--! at 0 remove it, publish the unlock message and hand the lock to the first live waiter.
--! election_release.lua runs the same steps inside a function and tells the election's
--! followers when the leader's lead ended.
--! Needs: release.lua's KEYS[1..5] and ARGV[1..8]. Returns release.lua's replies.
--! Optional params: grant and forget, passed on to hand_over.lua (election_release.lua's
--! grant_lead and forget_candidate).
-- The hot path first, before any closure is made: the last hold, no queue clean-up,
-- and nobody listening. HDEL checks the owner and removes it in one command; it fails on
-- a key of another type before writing. A Hash with no field left is deleted by Redis.
local last = tonumber(ARGV[2]) == 0
local released = false
if last and ARGV[6] ~= '1' then
  local removed = redis.call('hdel', KEYS[1], ARGV[1], ARGV[1] .. ':w')
  if removed == 0 then
    return -1
  end
  if removed == 1 and ARGV[8] == '0' then
    -- No leasehold waiter flagged this owner, and no Redisson waiter is expected.
    return 0
  end
  if redis.call(ARGV[7], KEYS[2], ARGV[4]) == 0 and removed == 1 and ARGV[5] ~= '1' then
    return 0
  end
  released = true
end

local function now_ms()
  local t = redis.call('time')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

--#include fragments/leave_queue.lua

--#include fragments/hand_over.lua lock=KEYS[1] queue=KEYS[3] waiters=KEYS[4] queue_channel=KEYS[5] publish=ARGV[7] grant={{grant}} forget={{forget}}

if released then
  -- Someone listened (or the queue is read regardless): hand the lock over.
  hand_over()
  return 0
end
if last then
  -- A wait's clean-up (ARGV[6]): the same release, leaving the queue first.
  local removed = redis.call('hdel', KEYS[1], ARGV[1], ARGV[1] .. ':w')
  if removed == 0 then
    leave_queue()
    return -1
  end
  leave_queue()
  if redis.call(ARGV[7], KEYS[2], ARGV[4]) > 0 or ARGV[5] == '1' or removed == 2 then
    hand_over()
  end
  return 0
end
if redis.call('hexists', KEYS[1], ARGV[1]) == 0 then
  if ARGV[6] == '1' then leave_queue() end
  return -1
end
if ARGV[6] == '1' then leave_queue() end
redis.call('hset', KEYS[1], ARGV[1], ARGV[2])
local need = tonumber(ARGV[3])
if need > 0 and redis.call('pttl', KEYS[1]) < need then
  redis.call('pexpire', KEYS[1], need)
end
return tonumber(ARGV[2])

-- pes_renew_batch.lua: extend many watchdog-renewed permits of permit-expirable
-- semaphores in one call (the watchdog). A permit is extended only while it is listed
-- and its lease has not run out on the server's clock: a reclaimed or expired permit is
-- never revived (its count may have gone to someone else).
--
-- Only the ZSets are declared (never the count key NAME, which a semaphore whose
-- permits are all taken may lack): a held permit's ZSet exists, so while its slot
-- migrates the call runs on the source or, once the ZSet moved, follows ASK.
--
-- KEYS[i]    the {NAME}:timeout ZSet of permit i; in a cluster all in one hash slot
-- ARGV[1]    lease in ms (> 0)
-- ARGV[1+i]  permit i's id (16 bytes, raw)
--
-- Replies:
--   an array of n integers, one per permit in order:
--     1  listed and live: its lease ends ARGV[1] ms from now (raised, never lowered)
--     0  gone (released, reclaimed, expired, or the key changed type): untouched
local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local lease_end = now + tonumber(ARGV[1])
local renewed = {}
for i = 1, #KEYS do
  local score = redis.pcall('zscore', KEYS[i], ARGV[i + 1])
  score = type(score) == 'string' and tonumber(score) or nil
  if score ~= nil and score > now then
    if score < lease_end then
      redis.call('zadd', KEYS[i], 'XX', lease_end, ARGV[i + 1])
    end
    renewed[i] = 1
  else
    renewed[i] = 0
  end
end
return renewed

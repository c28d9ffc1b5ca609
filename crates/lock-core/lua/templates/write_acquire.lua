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
-- Writer preference (leasehold's, beside the layout; Redisson ignores it): a waiting
-- call that does not acquire records the writer in KEYS[2] (ZSet writer -> deadline on
-- the server's clock, now + ARGV[5]), refreshed by each of its calls; while a live
-- entry is there, read_acquire.lua admits no new leasehold reader (re-entries and the
-- writer's own reads still enter). An acquire removes the writer's entry; a wait that
-- ends without the lock removes it with write_release.lua (ARGV[7]). A writer that died
-- stops blocking readers when its deadline passes.
--
-- Writers in order (issue 29): a waiting writer also takes its place at the end of
-- KEYS[3] (a List, first come first; a refresh keeps the place), and a waiting call
-- takes a free lock only when no live writer is ahead of it there: when the lock turns
-- to write, the earliest live waiting writer gets in. Dead writers in front are dropped
-- (rw_writer_order.lua), so a writer whose process died blocks the others at most until
-- its deadline, and a refused writer retries then. A single try ignores the order (as
-- a Lock's try_lock ignores its queue).
--
-- KEYS[1]  lock key NAME (Hash)
-- KEYS[2]  waiting writers "leasehold_rwlock_writers:{NAME}" (ZSet writer -> deadline ms)
-- KEYS[3]  their order "leasehold_rwlock_writers:order:{NAME}" (List of writers)
-- ARGV[1]  lease in ms (> 0)
-- ARGV[2]  writer field "CLIENT_UUID:N:write"
-- ARGV[3]  the owner's write hold count after this acquire (>= 1)
-- ARGV[4]  the key prefix of every reader's timeout keys: "{NAME}", or NAME when it
--          contains "{"
-- ARGV[5]  keep-alive in ms of the writer's entry in KEYS[2] (> 0): a waiting call;
--          "0": a single try, which records nothing
--
-- Replies:
--   {1, 1}        acquired fresh: the lock was free (or only dead readers were left)
--   {1, ARGV[3]}  re-entered: the owner's count is now ARGV[3]
--   {0, pttl}     held by readers or another writer; pttl = in read mode the longest
--                 live read hold's remaining lease, else the Hash's PTTL (-1: no
--                 expiry); free but a live writer is ahead in KEYS[3]: ms until that
--                 writer's entry expires (it is woken by the message that freed the lock)
-- Errors:
--   WRONGTYPE   KEYS[1] holds another type, or a Hash without "mode"; nothing written
--#include fragments/rw_mode.lua
--#include fragments/rw_prune.lua
--#include fragments/rw_writer_order.lua
local waiting = ARGV[5] ~= '0'
-- The server's clock in ms (TIME), read once and only when needed.
local now
local function clock()
  if not now then
    local t = redis.call('time')
    now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  end
  return now
end
-- Not acquired: a waiting writer records (or refreshes) its intent and its place.
local function held(wait)
  if waiting then
    enter_writer(KEYS[2], KEYS[3], ARGV[2], clock() + tonumber(ARGV[5]))
    for _, key in ipairs({KEYS[2], KEYS[3]}) do
      if redis.call('pttl', key) < tonumber(ARGV[5]) then
        redis.call('pexpire', key, ARGV[5])
      end
    end
  end
  return {0, wait}
end
local function acquired(count)
  if waiting then
    if redis.call('zrem', KEYS[2], ARGV[2]) == 1 then
      leave_writers_order(KEYS[3], ARGV[2])
    end
  end
  return {1, count}
end
if mode == 'read' then
  local live, longest = prune_readers(ARGV[4])
  if live > 0 then
    -- The soonest a retry can help is when the longest read hold ends (its timeout key
    -- expires; nothing is published then), not the Hash's TTL, which a zombie renewal
    -- of an older client may keep far longer.
    return held(longest > 0 and longest or redis.call('pttl', KEYS[1]))
  end
  -- Every reader is gone: the lock is free.
  redis.call('del', KEYS[1])
  mode = false
end
if mode == false then
  if waiting then
    -- Free: the earliest live waiting writer takes it; the others wait behind it.
    local first, deadline = first_writer(KEYS[2], KEYS[3], clock)
    if first and first ~= ARGV[2] then
      return held(math.max(deadline - now, 1))
    end
  end
  redis.call('hset', KEYS[1], 'mode', 'write', ARGV[2], 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  return acquired(1)
end
if redis.call('hexists', KEYS[1], ARGV[2]) == 0 then
  return held(redis.call('pttl', KEYS[1]))
end
redis.call('hset', KEYS[1], ARGV[2], ARGV[3])
if redis.call('pttl', KEYS[1]) < tonumber(ARGV[1]) then
  redis.call('pexpire', KEYS[1], ARGV[1])
end
return acquired(tonumber(ARGV[3]))

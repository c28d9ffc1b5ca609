-- sem_release.lua: give permits back to a semaphore and tell its waiters (Redisson's
-- RSemaphore release script: no owner, no upper bound; a missing key is created),
-- exactly once per operation id: a replay of the same operation is a no-op.
--
-- Three callers: the plain release(n) of permits taken elsewhere, with an operation id
-- of its own (no record yet: it adds, and leaves a "released N" tombstone); the release
-- of one acquire's permits, with that acquire's id, in one of two ways (ARGV[4]):
--   consume ('1'): the acquire answered on its one send (no copy of it can still run
--       and write its record again) and the release comes well within the record's
--       life: the "taken N" record is deleted, and its absence is what a replay of this
--       release finds. Nothing is left behind.
--   tombstone ('0'): otherwise (a copy of the acquire may still be in flight, or the
--       record may be near its end): record "taken N" -> give back N, "released N".
--
-- KEYS[1]  the semaphore NAME (String: the count of available permits, decimal)
-- KEYS[2]  its channel, redisson_sc:{NAME}
-- KEYS[3]  the operation's record, leasehold_sem_op:{NAME}:OP (String "STATE N", PX)
-- ARGV[1]  permits to give back (1 or more; checked by the client): consume: the
--          acquire's N; tombstone: used when the record does not say "taken N" (a
--          plain release, or a record that expired while the permits were held)
-- ARGV[2]  the publish command: publish, or spublish (sharded pub/sub)
-- ARGV[3]  the life of the "released" record, ms (the window for replays)
-- ARGV[4]  '1' consume the acquire's record, '0' keep a tombstone (above)
-- KEYS[4]  the wait queue, leasehold_sem_queue:{NAME} (ZSET op -> arrival)
-- KEYS[5]  the queue's entries, leasehold_sem_waiters:{NAME} (Hash op -> "PERMITS DEADLINE_MS")
-- KEYS[6]  the grants channel, leasehold_sem_grants:{NAME}
-- ARGV[5]  '1' serve the queue even when the count message reached nobody (a cluster
--          with classic pub/sub, whose PUBLISH counts one node's subscribers)
-- ARGV[6]  the records' prefix, leasehold_sem_op:{NAME}:
-- ARGV[7]  the life of a "taken" record a grant writes, ms
-- ARGV[8]  WAIT_MS of a grant message
--
-- Waiters (issue 29 item 4): after the count is published, when its PUBLISH reached a
-- subscriber (a waiting leasehold client, a Java waiter, a lingering subscription) or
-- ARGV[5] says so, the wait queue is served from its head while the count covers it
-- (fragments/sem_serve.lua: TIME, ZRANGE, HGET, then per grant ZREM, HDEL, SET, DECRBY,
-- and one publish on KEYS[6]). The count message goes first because its reply is the
-- only free sign that anyone waits: so a Java waiter may be woken by a count that a
-- grant then takes (it tries, finds too few, and waits again); leasehold's waiters wake
-- on a count only when they head the queue and it covers them, and a grant message that
-- follows settles it. An uncontended release publishes to nobody and reads no queue.
--
-- Replies:
--   {count, 1}  given back: the count after INCRBY, published on KEYS[2] when above 0;
--               consume: the record is gone; tombstone: the record says "released N"
--   {count, 0}  a replay, untouched: consume: the record was gone already; tombstone:
--               it said "released" or "cancelled" already
-- Errors:
--   WRONGTYPE   KEYS[1] is not a String, or (tombstone) KEYS[3] is not a record;
--               nothing written
--   ERR value is not an integer   KEYS[1] is a String that is not a whole number:
--               INCRBY refuses it before writing (lock-core reports it as WrongType)
--
-- Server calls, consume: INCRBY, DEL (the record), PUBLISH; Redisson's script is INCRBY,
-- PUBLISH: the DEL is the price of exactly-once (issue 26), inside the same EVALSHA.
-- INCRBY goes first: it is the first write and refuses a count that is not an integer
-- with nothing written (the record stays for a retry); a replay (DEL finds nothing)
-- takes its INCRBY back with DECRBY, in the same script, so nobody sees it. Tombstone:
-- GET (the record), INCRBY, SET (the record), PUBLISH. The count is never read first.
if ARGV[4] == '1' then
  local left = redis.call('incrby', KEYS[1], ARGV[1])
  if redis.call('del', KEYS[3]) == 0 then
    -- A replay: the first run consumed the record. Nothing changes.
    return {redis.call('decrby', KEYS[1], ARGV[1]), 0}
  end
  if left > 0 then
    local heard = redis.call(ARGV[2], KEYS[2], string.format('%d', left))
    if heard > 0 or ARGV[5] == '1' then
      local count = left
      local t = redis.call('time')
      local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
      local served_self = false
      local next_head = nil
      local granted = {}
      while true do
        local head = redis.call('zrange', KEYS[4], 0, 0)[1]
        if not head then break end
        local entry = redis.call('hget', KEYS[5], head)
        local want, deadline
        if entry then
          want, deadline = string.match(entry, '^(%d+) (%d+)$')
        end
        if want and tonumber(deadline) > now and tonumber(want) > count then
          next_head = head
          break
        end
        redis.call('zrem', KEYS[4], head)
        redis.call('hdel', KEYS[5], head)
        -- SET NX: an operation that has a record already (it cannot, while queued: the
        -- enqueue read none, and an undo removes the entry) is never counted twice.
        if want and tonumber(deadline) > now
            and redis.call('set', ARGV[6] .. head, 'taken ' .. want, 'nx', 'px', ARGV[7]) then
          redis.call('decrby', KEYS[1], want)
          count = count - tonumber(want)
          if head == '' then
            served_self = true
          else
            granted[#granted + 1] = head
          end
        end
      end
      for _, op in ipairs(granted) do
        redis.call(ARGV[2], KEYS[6], op .. ' ' .. (next_head or '-') .. ' ' .. ARGV[8])
      end
    end
  end
  return {left, 1}
end
local op_state = false
local op_permits = 0
local op_raw = redis.call('get', KEYS[3])
if op_raw then
  local state, n = string.match(op_raw, '^(%a+) (%d+)$')
  if (state ~= 'taken' and state ~= 'released' and state ~= 'cancelled') or n == nil then
    return redis.error_reply('WRONGTYPE semaphore operation ' .. KEYS[3] .. ' holds no operation record')
  end
  op_state = state
  op_permits = tonumber(n)
end
if op_state and op_state ~= 'taken' then
  -- A replay: answer the count as it is (read only on this rare path).
  local raw = redis.call('get', KEYS[1])
  local count = 0
  if raw then
    count = tonumber(raw)
    if count == nil or count ~= math.floor(count) then
      return redis.error_reply('WRONGTYPE semaphore ' .. KEYS[1] .. ' holds a String that is not a count')
    end
  end
  return {count, 0}
end
local give = ARGV[1]
if op_state == 'taken' then
  give = string.format('%d', op_permits)
end
local left = redis.call('incrby', KEYS[1], give)
redis.call('set', KEYS[3], 'released ' .. give, 'px', ARGV[3])
if left > 0 then
  local heard = redis.call(ARGV[2], KEYS[2], string.format('%d', left))
  if heard > 0 or ARGV[5] == '1' then
    local count = left
    local t = redis.call('time')
    local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
    local served_self = false
    local next_head = nil
    local granted = {}
    while true do
      local head = redis.call('zrange', KEYS[4], 0, 0)[1]
      if not head then break end
      local entry = redis.call('hget', KEYS[5], head)
      local want, deadline
      if entry then
        want, deadline = string.match(entry, '^(%d+) (%d+)$')
      end
      if want and tonumber(deadline) > now and tonumber(want) > count then
        next_head = head
        break
      end
      redis.call('zrem', KEYS[4], head)
      redis.call('hdel', KEYS[5], head)
      -- SET NX: an operation that has a record already (it cannot, while queued: the
      -- enqueue read none, and an undo removes the entry) is never counted twice.
      if want and tonumber(deadline) > now
          and redis.call('set', ARGV[6] .. head, 'taken ' .. want, 'nx', 'px', ARGV[7]) then
        redis.call('decrby', KEYS[1], want)
        count = count - tonumber(want)
        if head == '' then
          served_self = true
        else
          granted[#granted + 1] = head
        end
      end
    end
    for _, op in ipairs(granted) do
      redis.call(ARGV[2], KEYS[6], op .. ' ' .. (next_head or '-') .. ' ' .. ARGV[8])
    end
  end
end
return {left, 1}

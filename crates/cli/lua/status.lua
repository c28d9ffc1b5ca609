-- status.lua: everything `leasehold status` shows about one name, read in one atomic
-- step (read only). Used by the `leasehold` command (crates/cli), not by the library.
-- Every key is derived from NAME and in its hash slot (docs/architecture/data-layout.md).
--
-- KEYS[1]   NAME (Hash: Lock/FencedLock/FairLock/ReadWriteLock; String: SimpleLock's
--           owner, or a semaphore's or latch's count)
-- KEYS[2]   fencing counter "redisson_lock_token:{NAME}" (String integer)
-- KEYS[3]   the lock's wait queue "leasehold_lock_queue:{NAME}" (List)
-- KEYS[4]   its entries "leasehold_lock_waiters:{NAME}" (Hash owner -> "DEADLINE LEASE")
-- KEYS[5]   the fair lock's queue "redisson_lock_queue:{NAME}" (List)
-- KEYS[6]   its deadlines "redisson_lock_timeout:{NAME}" (ZSet owner -> deadline ms)
-- KEYS[7]   waiting writers "leasehold_rwlock_writers:{NAME}" (ZSet writer -> deadline ms)
-- KEYS[8]   their order "leasehold_rwlock_writers:order:{NAME}" (List)
-- KEYS[9]   waiting readers "leasehold_rwlock_readers:{NAME}" (Hash reader ->
--           "DEADLINE_MS:LEASE_MS:TICKET")
-- KEYS[10]  a permit semaphore's permits "{NAME}:timeout" (ZSet raw id -> lease end ms)
-- KEYS[11]  its wait queue "leasehold_pes_queue:{NAME}" (ZSet hex id -> arrival)
-- KEYS[12]  its entries "leasehold_pes_waiters:{NAME}" (Hash id -> "LEASE_MS DEADLINE_MS")
-- KEYS[13]  a semaphore's wait queue "leasehold_sem_queue:{NAME}" (ZSet op -> arrival)
-- KEYS[14]  its entries "leasehold_sem_waiters:{NAME}" (Hash op -> "PERMITS DEADLINE_MS")
-- ARGV[1]   the read holds' timeout-key prefix ("{NAME}"): a read hold k of OWNER is
--           ARGV[1]:OWNER:rwlock_timeout:k (not declared: in NAME's slot)
-- ARGV[2]   the lease end of a permit that never expires (922337203685477)
--
-- Times left are in ms on the server's clock (TIME); `false` (nil) where there is none.
-- Each queue is read up to its first 1000 entries.
--
-- Reply: an array of seven
--   1  NAME's type ("none", "hash", "string", ...)
--   2  its PTTL (-2 no key, -1 no expiry)
--   3  its contents: HGETALL's flat field/value array for a Hash, {value} for a
--      String, {} otherwise
--   4  the fencing counter's value, "" when there is none (or it is not a String)
--   5  the waiters, flat, four values each: queue ("lock", "fair", "write", "read",
--      "semaphore", "permit_semaphore"), owner or id, ms left of its entry, permits
--      asked (semaphore only), each queue head first
--   6  the readers' holds, flat, two values each: a reader field of NAME, ms left of
--      its longest read hold
--   7  the permit semaphore's permits, flat, two values each: id (hex when 16 bytes),
--      ms left of its lease
local LIMIT = 999
local time = redis.call('time')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)

local function has(key, wanted)
  return redis.call('type', key)['ok'] == wanted
end

-- ms left until `deadline` (ms on the server clock, a string or number), or false.
local function left(deadline)
  local d = tonumber(deadline)
  if d == nil then
    return false
  end
  return d - now
end

local kind = redis.call('type', KEYS[1])['ok']
local pttl = redis.call('pttl', KEYS[1])
local body = {}
if kind == 'hash' then
  body = redis.call('hgetall', KEYS[1])
elseif kind == 'string' then
  body = { redis.call('get', KEYS[1]) }
end
local token = ''
if has(KEYS[2], 'string') then
  token = redis.call('get', KEYS[2])
end

local waiters = {}
local function add(queue, owner, ttl, permits)
  local n = #waiters
  waiters[n + 1] = queue
  waiters[n + 2] = owner
  waiters[n + 3] = ttl
  waiters[n + 4] = permits
end
-- A Hash's value for `field` when the key is a Hash (`is_hash`), else nil.
local function field_of(key, is_hash, field)
  if not is_hash then
    return nil
  end
  return redis.call('hget', key, field) or nil
end

-- The lock's wait queue (Lock, FencedLock): "DEADLINE LEASE" entries.
if has(KEYS[3], 'list') then
  local entries = has(KEYS[4], 'hash')
  for _, owner in ipairs(redis.call('lrange', KEYS[3], 0, LIMIT)) do
    local entry = field_of(KEYS[4], entries, owner)
    add('lock', owner, left(entry and string.match(entry, '^(%-?%d+)')), false)
  end
end

-- The fair lock's queue, with Redisson's deadlines.
if has(KEYS[5], 'list') then
  local deadlines = has(KEYS[6], 'zset')
  for _, owner in ipairs(redis.call('lrange', KEYS[5], 0, LIMIT)) do
    local deadline = deadlines and redis.call('zscore', KEYS[6], owner) or nil
    add('fair', owner, left(deadline), false)
  end
end

-- Waiting writers: in their order, then any the order does not name (by deadline).
local writers = has(KEYS[7], 'zset')
local listed = {}
if has(KEYS[8], 'list') then
  for _, writer in ipairs(redis.call('lrange', KEYS[8], 0, LIMIT)) do
    if not listed[writer] then
      listed[writer] = true
      local deadline = writers and redis.call('zscore', KEYS[7], writer) or nil
      add('write', writer, left(deadline), false)
    end
  end
end
if writers then
  local flat = redis.call('zrange', KEYS[7], 0, LIMIT, 'withscores')
  for i = 1, #flat, 2 do
    if not listed[flat[i]] then
      add('write', flat[i], left(flat[i + 1]), false)
    end
  end
end

-- Waiting readers, by ticket (the order they registered).
if has(KEYS[9], 'hash') then
  local flat = redis.call('hgetall', KEYS[9])
  local readers = {}
  for i = 1, #flat, 2 do
    local deadline, ticket = string.match(flat[i + 1], '^(%-?%d+):%-?%d+:(%d+)')
    readers[#readers + 1] = { flat[i], deadline, tonumber(ticket) or 0 }
  end
  table.sort(readers, function(a, b) return a[3] < b[3] end)
  for i = 1, math.min(#readers, LIMIT + 1) do
    add('read', readers[i][1], left(readers[i][2]), false)
  end
end

-- A semaphore's queue: "PERMITS DEADLINE_MS" entries.
if has(KEYS[13], 'zset') then
  local entries = has(KEYS[14], 'hash')
  for _, op in ipairs(redis.call('zrange', KEYS[13], 0, LIMIT)) do
    local entry = field_of(KEYS[14], entries, op)
    local permits, deadline = nil, nil
    if entry then
      permits, deadline = string.match(entry, '^(%d+) (%-?%d+)')
    end
    add('semaphore', op, left(deadline), tonumber(permits) or false)
  end
end

-- A permit semaphore's queue: "LEASE_MS DEADLINE_MS" entries, one permit each.
if has(KEYS[11], 'zset') then
  local entries = has(KEYS[12], 'hash')
  for _, id in ipairs(redis.call('zrange', KEYS[11], 0, LIMIT)) do
    local entry = field_of(KEYS[12], entries, id)
    local deadline = entry and string.match(entry, '^%-?%d+ (%-?%d+)') or nil
    add('permit_semaphore', id, left(deadline), 1)
  end
end

-- The readers' holds of a read/write lock (a Hash with a `mode` field): each reader's
-- longest read-hold timeout.
local reads = {}
if kind == 'hash' and redis.call('hexists', KEYS[1], 'mode') == 1 then
  for i = 1, #body, 2 do
    local field, count = body[i], tonumber(body[i + 1])
    if field ~= 'mode' and count and not string.find(field, ':write$') then
      local longest = false
      for k = 1, math.min(count, 100) do
        local ms = redis.call('pttl', ARGV[1] .. ':' .. field .. ':rwlock_timeout:' .. k)
        if ms >= 0 and (longest == false or ms > longest) then
          longest = ms
        end
      end
      reads[#reads + 1] = field
      reads[#reads + 1] = longest
    end
  end
end

-- A permit semaphore's permits, soonest lease end first.
local permits = {}
if has(KEYS[10], 'zset') then
  local never = tonumber(ARGV[2])
  local flat = redis.call('zrange', KEYS[10], 0, LIMIT, 'withscores')
  for i = 1, #flat, 2 do
    local id = flat[i]
    if #id == 16 then
      id = string.gsub(id, '.', function(c) return string.format('%02x', string.byte(c)) end)
    end
    local lease_end = tonumber(flat[i + 1])
    permits[#permits + 1] = id
    if lease_end >= never then
      permits[#permits + 1] = false
    else
      permits[#permits + 1] = lease_end - now
    end
  end
end

return { kind, pttl, body, token, waiters, reads, permits }

--! rw_admit.lua: grants a read hold, in one step, to every live waiting reader of the
--! read/write lock KEYS[1]: the Hash `readers` (leasehold_rwlock_readers:{NAME}: reader
--! owner -> "DEADLINE_MS:LEASE_MS:TICKET", the deadline on the server's clock) is emptied, and
--! each entry whose deadline has not passed gets Redisson's read hold exactly as a read
--! acquire would write it: its field "OWNER" = 1 and its timeout key
--! PFX:OWNER:rwlock_timeout:1 = "1" PX its lease. An owner whose field exists already
--! (it holds a read) is skipped: its waiting call re-enters with its own script. The
--! granted owners are published on `channel` (leasehold_rwlock__grants:{NAME}) as
--! "OWNER:LEASE_MS:TICKET" separated by spaces, so each client takes over its readers'
--! holds without a script. TICKET is the registering call's number (its owner's turn):
--! the client takes a grant over only if no later call of its wait was refused (which
--! would mean the grant was gone by then), and counts the lease from that call's send. The caller sets the Hash's TTL (at least the returned
--! lease) and has made sure no write is held by another owner.
--! Needs: KEYS[1] lock.
--! `present`: the reader fields KEYS[1] has (rw_prune.lua's third answer), so that the
--! granted fields are written with one HSET; nil: each is looked up (HEXISTS) and
--! written on its own (a waiting writer giving up, which did not prune).
--! Sets: local function `admit_readers(readers, prefix, channel, publish, present)` ->
--! (owners granted, the longest lease granted in ms, 0 when none).
local function admit_readers(readers, prefix, channel, publish, present)
  local entries = redis.call('hgetall', readers)
  if #entries == 0 then
    return 0, 0
  end
  redis.call('del', readers)
  local clock = redis.call('time')
  local at = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
  local granted, longest, names, fields = 0, 0, {}, {'mode', 'read'}
  for i = 1, #entries, 2 do
    local owner = entries[i]
    -- The lease stays text for the SET and the message (a Lua number given to
    -- redis.call or concatenated is formatted with sprintf, twice per reader); the
    -- pattern takes it only without a leading zero, as Redis reads an integer.
    local deadline, lease_text, ticket = string.match(entries[i + 1], '^(%d+):([1-9]%d*):(%d+)$')
    local lease
    deadline, lease = tonumber(deadline), tonumber(lease_text)
    -- A dead waiter (its deadline passed: its client stopped refreshing) gets nothing,
    -- and an owner that holds a read already keeps its count.
    local fresh = false
    if deadline ~= nil and lease ~= nil and lease > 0 and deadline > at then
      if present ~= nil then
        fresh = not present[owner]
      elseif redis.call('hexists', KEYS[1], owner) == 0 then
        redis.call('hset', KEYS[1], owner, 1)
        fresh = true
      end
    end
    if fresh then
      redis.call('set', prefix .. ':' .. owner .. ':rwlock_timeout:1', '1', 'px', lease_text)
      granted = granted + 1
      if lease > longest then
        longest = lease
      end
      names[granted] = owner .. ':' .. lease_text .. ':' .. ticket
      if present ~= nil then
        fields[#fields + 1] = owner
        fields[#fields + 1] = '1'
      end
    end
  end
  if granted > 0 then
    -- The fields in as few HSETs as Lua's stack allows (unpack of at most 1000 values).
    for first = 1, #fields, 1000 do
      redis.call('hset', KEYS[1], unpack(fields, first, math.min(first + 999, #fields)))
    end
    redis.call(publish, channel, table.concat(names, ' '))
  end
  return granted, longest
end

--! rw_prune.lua: drops the reader fields of the read/write lock KEYS[1] none of whose
--! read holds is alive (no timeout key left: a reader whose process died, or whose
--! fixed leases ran out while others kept the Hash alive), and measures the live ones.
--! Other holders' timeout keys are built here as Redisson builds them: the key prefix
--! ("{NAME}", or NAME when it has a brace) .. ":" .. field .. ":rwlock_timeout:" .. k,
--! k = 1..count; they carry NAME's hash tag, so they are in the script's slot.
--! Reader fields are the numeric fields other than "mode" and the writer's "OWNER:write".
--! Sets: local function `prune_readers(prefix)` -> (live reader fields, the longest PTTL
--! of their timeout keys in ms, 0 when none has an expiry, the set of live reader
--! fields: field -> true).
local function prune_readers(prefix)
  local live, longest, present = 0, 0, {}
  local fields = redis.call('hgetall', KEYS[1])
  for i = 1, #fields, 2 do
    local field, count = fields[i], tonumber(fields[i + 1])
    if count ~= nil and field ~= 'mode' and string.sub(field, -6) ~= ':write' then
      local alive = false
      for k = count, 1, -1 do
        local ttl = redis.call('pttl', prefix .. ':' .. field .. ':rwlock_timeout:' .. k)
        if ttl ~= -2 then
          alive = true
          if ttl > longest then longest = ttl end
        end
      end
      if alive then
        live = live + 1
        present[field] = true
      else
        redis.call('hdel', KEYS[1], field)
      end
    end
  end
  return live, longest, present
end

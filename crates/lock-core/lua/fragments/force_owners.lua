--! force_owners.lua: the owners a forced unlock is about to remove, for its history
--! record, read only when a history is asked for (`{{history}}` not empty): a Hash's
--! owner fields (leasehold's waiter flags `OWNER:w` and a read/write lock's `mode` are
--! left out), a simple lock's String value. The history's type is checked first (`LLEN`
--! fails on a key that is not a List), before anything is written. Params: `history` (the ARGV holding the
--! history key, '' for none). Sets: local `removed` (comma-separated; '' for none).
local removed = ''
if {{history}} and {{history}} ~= '' then
  redis.call('llen', {{history}})
  local shape = redis.call('type', KEYS[1])['ok']
  local owners = {}
  if shape == 'hash' then
    for _, field in ipairs(redis.call('hkeys', KEYS[1])) do
      if field ~= 'mode' and string.sub(field, -2) ~= ':w' then
        owners[#owners + 1] = field
      end
    end
  elseif shape == 'string' then
    owners[1] = redis.call('get', KEYS[1])
  end
  removed = table.concat(owners, ',')
end

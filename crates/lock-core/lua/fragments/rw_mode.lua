--! rw_mode.lua: reads the read/write lock's mode, refusing a key that is not one. A key
--! of another type fails HGET with WRONGTYPE before anything is written; a Hash without
--! a "mode" field (a plain RLock, a fair or fenced lock under the same name) fails with a
--! WRONGTYPE error reply, so the client reports a typed error and nothing is written.
--! Needs: KEYS[1] lock.
--! Sets: local `mode`: "read", "write", or false (no such key).
local mode = redis.call('hget', KEYS[1], 'mode')
if mode == false and redis.call('exists', KEYS[1]) == 1 then
  return redis.error_reply('WRONGTYPE ' .. KEYS[1] .. ' holds a lock that is not a read/write lock (a Hash without a mode field)')
end

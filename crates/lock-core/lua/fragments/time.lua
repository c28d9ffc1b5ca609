--! time.lua: reads the server clock (TIME) into `now`, in whole milliseconds.
--! Every deadline of a wait queue is on this clock, never a client's (clients' clocks
--! may be apart). Script effects replication (Redis 5+) makes TIME safe to call before
--! writing.
--! Sets: local `t`, local `now` (ms since the epoch).
local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

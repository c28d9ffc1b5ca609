--! rw_writer_order.lua: the order of a read/write lock's waiting writers (issue 29):
--! `leasehold_rwlock_writers:order:{NAME}` (a List of writer fields, first come first)
--! beside the waiting writers' deadlines `leasehold_rwlock_writers:{NAME}` (ZSet writer
--! -> deadline on the server's clock). A writer is live while its deadline has not
--! passed; the List may hold writers whose ZSet entry is gone (a fresh read purges the
--! ZSet alone): they count as dead.
--! Sets: local functions `first_writer(writers, order, clock)` -> the first live writer
--! of the List and its deadline (nil when none), dropping the dead ones in front of it
--! (`clock()` answers the server's time in ms; called only when the List is not empty,
--! so an uncontended writer pays one LINDEX);
--! `enter_writer(writers, order, writer, deadline)`: records or refreshes the writer's
--! deadline, and puts it at the end of the List when it was not waiting (a refresh keeps
--! its place); `leave_writers_order(order, writer)`: removes it from the List.
local function first_writer(writers, order, clock)
  while true do
    local head = redis.call('lindex', order, 0)
    if not head then
      return nil, nil
    end
    local deadline = tonumber(redis.call('zscore', writers, head))
    if deadline and deadline > clock() then
      return head, deadline
    end
    -- Dead (its client stopped refreshing, or its entry was purged): it blocks nobody.
    redis.call('lpop', order)
    redis.call('zrem', writers, head)
  end
end
local function enter_writer(writers, order, writer, deadline)
  if redis.call('zadd', writers, deadline, writer) == 1 then
    -- New (or back after its entry was purged as dead): the end of the line.
    redis.call('lrem', order, 0, writer)
    redis.call('rpush', order, writer)
  end
end
local function leave_writers_order(order, writer)
  redis.call('lrem', order, 0, writer)
end

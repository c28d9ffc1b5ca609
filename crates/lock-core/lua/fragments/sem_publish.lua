--! sem_publish.lua: tells the waiters on the channel KEYS[2] the count of available
--! permits `{{count}}` (Redisson's RSemaphore payload, decimal), with the publish command
--! ARGV[{{cmd}}]. Nothing below 1 is published: Java's SemaphorePubSub throws on a
--! negative count, and 0 frees nothing. Formatted with %d, never tostring (which writes
--! 1e+14 for large counts).
if {{count}} > 0 then
  redis.call(ARGV[{{cmd}}], KEYS[2], string.format('%d', {{count}}))
end

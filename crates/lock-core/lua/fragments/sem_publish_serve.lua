--! sem_publish_serve.lua: a release's last step: publishes the count `left` on KEYS[2]
--! (when above 0, as sem_publish.lua) and, when that reached a subscriber or ARGV[5] is
--! '1', serves the wait queue (sem_serve.lua) with what is free.
--! Needs: local `left`; the keys and ARGV of sem_release.lua.
if left > 0 then
  local heard = redis.call(ARGV[2], KEYS[2], string.format('%d', left))
  if heard > 0 or ARGV[5] == '1' then
    local count = left
    --#include fragments/time.lua
    --#include fragments/sem_serve.lua queue=4 entries=5 grants=6 prefix=6 ttl=7 wait=8 cmd=2 self=''
  end
end

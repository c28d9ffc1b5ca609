//! Redisson's `RPermitExpirableSemaphore` scripts (`RedissonPermitExpirableSemaphore`,
//! 4.7), reproduced for the tests that run them against leasehold's
//! `PermitExpirableSemaphore` without a JVM (`tests/permit_semaphore_interop.rs`), after
//! `/work/shared/notes/redisson-family.md` §3: the same commands in the same order, with
//! the client's clock as Redisson uses it (`now` and the expiry are ARGVs). Permit ids
//! are the raw 16 bytes; every other ARGV is decimal ASCII; the publish command is
//! `publish` or `spublish`.

/// `tryAcquireAsync(ids, timeoutDate)`. KEYS = `[N, {N}:timeout, redisson_sc:{N}]`;
/// ARGV = `[n, expiryAt, now, 922337203685477, publish command, id_1 .. id_n]`.
/// `OK` = taken; `:score` = the earliest lease end (retry then); nil = wait for a message.
/// Its reclaim `unpack`s up to `n` expired ids.
pub const REDISSON_PES_ACQUIRE: &str =
    "local expiredIds = redis.call('zrangebyscore', KEYS[2], 0, ARGV[3], 'limit', 0, ARGV[1]); \
if #expiredIds > 0 then \
  redis.call('zrem', KEYS[2], unpack(expiredIds)); \
  local value = redis.call('incrby', KEYS[1], #expiredIds); \
  if tonumber(value) > 0 then redis.call(ARGV[5], KEYS[3], value); end; \
end; \
local value = redis.call('get', KEYS[1]); \
if (value ~= false and tonumber(value) >= tonumber(ARGV[1])) then \
  redis.call('decrby', KEYS[1], ARGV[1]); \
  for i = 6, #ARGV, 1 do redis.call('zadd', KEYS[2], ARGV[2], ARGV[i]); end; \
  local ttl = redis.call('pttl', KEYS[1]); \
  if ttl > 0 then redis.call('pexpire', KEYS[2], ttl); end; \
  return 'OK'; \
end; \
local v = redis.call('zrange', KEYS[2], 0, 0, 'WITHSCORES'); \
if v[1] ~= nil and v[2] ~= ARGV[4] then return ':' .. tostring(v[2]); end \
return nil;";

/// `tryReleaseAsync(id)`. KEYS = `[N, redisson_sc:{N}, {N}:timeout]`; ARGV = `[id, 1,
/// now, publish command]`. 1 = released; 0 = not listed, or listed but expired (then
/// the permit is given back anyway).
pub const REDISSON_PES_TRY_RELEASE: &str = "local expire = redis.call('zscore', KEYS[3], ARGV[1]); \
local removed = redis.call('zrem', KEYS[3], ARGV[1]); \
if tonumber(removed) ~= 1 then return 0; end; \
local value = redis.call('incrby', KEYS[1], ARGV[2]); \
redis.call(ARGV[4], KEYS[2], value); \
if tonumber(expire) <= tonumber(ARGV[3]) then return 0; end; \
return 1;";

/// `availablePermitsAsync()`. KEYS = `[N, {N}:timeout, redisson_sc:{N}]`; ARGV = `[now,
/// publish command]`. Reclaims **every** expired id with one `unpack` (which fails past
/// a few thousand ids), then answers the count.
pub const REDISSON_PES_AVAILABLE: &str =
    "local expiredIds = redis.call('zrangebyscore', KEYS[2], 0, ARGV[1], 'limit', 0, -1); \
if #expiredIds > 0 then \
  redis.call('zrem', KEYS[2], unpack(expiredIds)); \
  local value = redis.call('incrby', KEYS[1], #expiredIds); \
  if tonumber(value) > 0 then redis.call(ARGV[2], KEYS[3], value); end; \
  return value; \
end; \
local ret = redis.call('get', KEYS[1]); \
return ret == false and 0 or ret;";

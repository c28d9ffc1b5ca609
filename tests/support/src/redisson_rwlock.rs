//! Redisson's `RReadWriteLock` scripts (`RedissonReadLock`, `RedissonWriteLock`, 4.x), as
//! Redisson sends them, for the tests and benchmarks that run them against leasehold's
//! read/write lock without a JVM (`tests/rw_interop.rs`, `benches/src/bin/rwlock.rs`).
//! Checked against `redisson/src/main/java/org/redisson/RedissonReadLock.java` and
//! `RedissonWriteLock.java`: the same commands in the same order; the unlocks' "no mode"
//! branch answers nil as `shared/notes/redisson-family.md` says 4.x does (a 2024 revision
//! answers 1 there).

/// `RedissonReadLock.tryLockInnerAsync`. KEYS = `[N, {N}:id:tid:rwlock_timeout]`;
/// ARGV = `[lease, id:tid, id:tid:write]`. nil = acquired, else the PTTL.
pub const REDISSON_READ_ACQUIRE: &str = "local mode = redis.call('hget', KEYS[1], 'mode'); \
if (mode == false) then \
  redis.call('hset', KEYS[1], 'mode', 'read'); \
  redis.call('hset', KEYS[1], ARGV[2], 1); \
  redis.call('set', KEYS[2] .. ':1', 1); \
  redis.call('pexpire', KEYS[2] .. ':1', ARGV[1]); \
  redis.call('pexpire', KEYS[1], ARGV[1]); \
  return nil; \
end; \
if (mode == 'read') or (mode == 'write' and redis.call('hexists', KEYS[1], ARGV[3]) == 1) then \
  local ind = redis.call('hincrby', KEYS[1], ARGV[2], 1); \
  local key = KEYS[2] .. ':' .. ind; \
  redis.call('set', key, 1); \
  redis.call('pexpire', key, ARGV[1]); \
  local remainTime = redis.call('pttl', KEYS[1]); \
  redis.call('pexpire', KEYS[1], math.max(remainTime, ARGV[1])); \
  return nil; \
end; \
return redis.call('pttl', KEYS[1]);";

/// `RedissonReadLock.unlockInnerAsync`. KEYS = `[N, channel, {N}:id:tid:rwlock_timeout,
/// {N}, latch]`; ARGV = `[0, id:tid, publish command, latch TTL]`.
pub const REDISSON_READ_UNLOCK: &str = "local val = redis.call('get', KEYS[5]); \
if val ~= false then return tonumber(val); end; \
local mode = redis.call('hget', KEYS[1], 'mode'); \
if (mode == false) then \
  redis.call(ARGV[3], KEYS[2], ARGV[1]); \
  redis.call('set', KEYS[5], 1, 'px', ARGV[4]); \
  return nil; \
end; \
local lockExists = redis.call('hexists', KEYS[1], ARGV[2]); \
if (lockExists == 0) then return nil; end; \
local counter = redis.call('hincrby', KEYS[1], ARGV[2], -1); \
if (counter == 0) then redis.call('hdel', KEYS[1], ARGV[2]); end; \
redis.call('del', KEYS[3] .. ':' .. (counter+1)); \
if (redis.call('hlen', KEYS[1]) > 1) then \
  local maxRemainTime = -3; \
  local keys = redis.call('hkeys', KEYS[1]); \
  for n, key in ipairs(keys) do \
    counter = tonumber(redis.call('hget', KEYS[1], key)); \
    if type(counter) == 'number' then \
      for i=counter, 1, -1 do \
        local remainTime = redis.call('pttl', KEYS[4] .. ':' .. key .. ':rwlock_timeout:' .. i); \
        maxRemainTime = math.max(remainTime, maxRemainTime); \
      end; \
    end; \
  end; \
  if maxRemainTime > 0 then \
    redis.call('pexpire', KEYS[1], maxRemainTime); \
    redis.call('set', KEYS[5], 0, 'px', ARGV[4]); \
    return 0; \
  end; \
  if mode == 'write' then \
    redis.call('set', KEYS[5], 0, 'px', ARGV[4]); \
    return 0; \
  end; \
end; \
redis.call('del', KEYS[1]); \
redis.call(ARGV[3], KEYS[2], ARGV[1]); \
redis.call('set', KEYS[5], 1, 'px', ARGV[4]); \
return 1;";

/// `RedissonWriteLock.tryLockInnerAsync`. KEYS = `[N]`; ARGV = `[lease, id:tid:write]`.
pub const REDISSON_WRITE_ACQUIRE: &str = "local mode = redis.call('hget', KEYS[1], 'mode'); \
if (mode == false) then \
  redis.call('hset', KEYS[1], 'mode', 'write'); \
  redis.call('hset', KEYS[1], ARGV[2], 1); \
  redis.call('pexpire', KEYS[1], ARGV[1]); \
  return nil; \
end; \
if (mode == 'write') then \
  if (redis.call('hexists', KEYS[1], ARGV[2]) == 1) then \
    redis.call('hincrby', KEYS[1], ARGV[2], 1); \
    local currentExpire = redis.call('pttl', KEYS[1]); \
    redis.call('pexpire', KEYS[1], currentExpire + ARGV[1]); \
    return nil; \
  end; \
end; \
return redis.call('pttl', KEYS[1]);";

/// `RedissonWriteLock.unlockInnerAsync`. KEYS = `[N, channel, latch]`; ARGV = `[1,
/// internal lease, id:tid:write, publish command, latch TTL]`.
pub const REDISSON_WRITE_UNLOCK: &str = "local val = redis.call('get', KEYS[3]); \
if val ~= false then return tonumber(val); end; \
local mode = redis.call('hget', KEYS[1], 'mode'); \
if (mode == false) then \
  redis.call(ARGV[4], KEYS[2], ARGV[1]); \
  redis.call('set', KEYS[3], 1, 'px', ARGV[5]); \
  return nil; \
end; \
if (mode == 'write') then \
  local lockExists = redis.call('hexists', KEYS[1], ARGV[3]); \
  if (lockExists == 0) then \
    return nil; \
  else \
    local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1); \
    if (counter > 0) then \
      redis.call('pexpire', KEYS[1], ARGV[2]); \
      redis.call('set', KEYS[3], 0, 'px', ARGV[5]); \
      return 0; \
    else \
      redis.call('hdel', KEYS[1], ARGV[3]); \
      if (redis.call('hlen', KEYS[1]) == 1) then \
        redis.call('del', KEYS[1]); \
        redis.call(ARGV[4], KEYS[2], ARGV[1]); \
      else \
        redis.call('hset', KEYS[1], 'mode', 'read'); \
      end; \
      redis.call('set', KEYS[3], 1, 'px', ARGV[5]); \
      return 1; \
    end; \
  end; \
end; \
return nil;";

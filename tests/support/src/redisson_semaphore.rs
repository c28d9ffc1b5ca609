//! Redisson's `RSemaphore` scripts (`RedissonSemaphore`, 4.7), as Redisson sends them, for
//! the tests that run them against leasehold's `Semaphore` without a JVM
//! (`tests/semaphore_interop.rs`). Reproduced from
//! `redisson/src/main/java/org/redisson/RedissonSemaphore.java` with
//! `/work/shared/notes/redisson-family.md` §2: the same commands in the same order. Every
//! ARGV is decimal ASCII (`LongCodec`/`StringCodec`); the publish command is `publish`
//! or `spublish`.

/// `tryAcquireAsync(permits)`. KEYS = `[N]`; ARGV = `[permits]`. 1 = taken, 0 = not.
pub const REDISSON_SEM_TRY_ACQUIRE: &str = "local value = redis.call('get', KEYS[1]); \
if (value ~= false and tonumber(value) >= tonumber(ARGV[1])) then \
  local val = redis.call('decrby', KEYS[1], ARGV[1]); \
  return 1; \
end; \
return 0;";

/// `releaseAsync(permits)`. KEYS = `[N, redisson_sc:{N}]`; ARGV = `[permits, publish
/// command]`. Publishes the new count (whatever its sign); answers nil.
pub const REDISSON_SEM_RELEASE: &str = "local value = redis.call('incrby', KEYS[1], ARGV[1]); \
redis.call(ARGV[2], KEYS[2], value);";

/// `trySetPermitsAsync(permits)`. KEYS = `[N, redisson_sc:{N}]`; ARGV = `[permits,
/// publish command]`. 1 = set (and published), 0 = the key exists.
pub const REDISSON_SEM_TRY_SET_PERMITS: &str = "local value = redis.call('get', KEYS[1]); \
if (value == false) then \
  redis.call('set', KEYS[1], ARGV[1]); \
  redis.call(ARGV[2], KEYS[2], ARGV[1]); \
  return 1; \
end; \
return 0;";

/// `addPermitsAsync(permits)`. KEYS = `[N, redisson_sc:{N}]`; ARGV = `[delta, publish
/// command]`. Publishes the new count, negative included (which makes Java's own
/// listener throw); answers nil.
pub const REDISSON_SEM_ADD_PERMITS: &str = "local value = redis.call('get', KEYS[1]); \
if (value == false) then \
  value = 0; \
end; \
redis.call('set', KEYS[1], value + ARGV[1]); \
redis.call(ARGV[2], KEYS[2], value + ARGV[1]);";

/// `drainPermitsAsync()`. KEYS = `[N]`. The count before (0 for a missing key); the count
/// is 0 afterwards.
pub const REDISSON_SEM_DRAIN: &str = "local value = redis.call('get', KEYS[1]); \
if (value == false) then \
  return 0; \
end; \
redis.call('set', KEYS[1], 0); \
return value;";

//! Redisson's `RCountDownLatch` (`RedissonCountDownLatch`, 4.x) as Redisson sends it, for
//! the tests and benchmarks that run it against leasehold's `CountDownLatch` without a
//! JVM (`tests/latch_interop.rs`): its three scripts, byte for byte, and its `await`
//! loop ([`java_await`]). Checked against
//! `redisson/src/main/java/org/redisson/RedissonCountDownLatch.java` and
//! `pubsub/CountDownLatchPubSub.java`: KEYS are `[NAME, channel]` with the channel built
//! literally as `"redisson_countdownlatch__channel__{" + NAME + "}"`; the messages are
//! `0` (`ZERO_COUNT`: opens the client's local gate) and `1` (`NEW_COUNT`: closes it).

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use crate::raw::{raw_command, RespValue};

/// `countDownAsync` (sent with `evalWriteNoRetry`). KEYS = `[N, channel]`; ARGV =
/// `[0, publish command]`. Replies nil.
pub const REDISSON_COUNT_DOWN: &str = "local v = redis.call('decr', KEYS[1]);\
if v <= 0 then redis.call('del', KEYS[1]) end;\
if v == 0 then redis.call(ARGV[2], KEYS[2], ARGV[1]) end;";

/// `trySetCountAsync`. KEYS = `[N, channel]`; ARGV = `[1, count, publish command]`.
/// Replies 1 when set, 0 when a latch exists.
pub const REDISSON_TRY_SET_COUNT: &str = "if redis.call('exists', KEYS[1]) == 0 then \
redis.call('set', KEYS[1], ARGV[2]); \
redis.call(ARGV[3], KEYS[2], ARGV[1]); \
return 1 \
else \
return 0 \
end";

/// `deleteAsync`. KEYS = `[N, channel]`; ARGV = `[1, publish command]`. Replies 1 when
/// deleted (and `1` published), else 0.
pub const REDISSON_DELETE: &str = "if redis.call('del', KEYS[1]) == 1 then \
redis.call(ARGV[2], KEYS[2], ARGV[1]); \
return 1 \
else \
return 0 \
end";

/// The channel Redisson builds for the latch `name`.
pub fn redisson_latch_channel(name: &str) -> String {
    format!("redisson_countdownlatch__channel__{{{name}}}")
}

/// One Redisson client's view of the latch `name` on the server at `addr`, sending
/// Redisson's scripts with classic `PUBLISH`.
#[derive(Debug, Clone)]
pub struct JavaLatch {
    addr: String,
    name: String,
}

impl JavaLatch {
    /// The latch `name` on the server at `addr`.
    pub fn new(addr: &str, name: &str) -> Self {
        JavaLatch { addr: addr.to_owned(), name: name.to_owned() }
    }

    fn eval(&self, script: &str, args: &[&str]) -> RespValue {
        let channel = redisson_latch_channel(&self.name);
        let mut command: Vec<&[u8]> = vec![b"EVAL", script.as_bytes(), b"2", self.name.as_bytes(), channel.as_bytes()];
        command.extend(args.iter().map(|arg| arg.as_bytes()));
        raw_command(&self.addr, &command)
    }

    /// `trySetCount(count)`: whether it was set.
    pub fn try_set_count(&self, count: i64) -> bool {
        self.eval(REDISSON_TRY_SET_COUNT, &["1", &count.to_string(), "publish"]).as_int() == Some(1)
    }

    /// `countDown()`.
    pub fn count_down(&self) {
        let _ = self.eval(REDISSON_COUNT_DOWN, &["0", "publish"]);
    }

    /// `delete()`: whether there was a latch.
    pub fn delete(&self) -> bool {
        self.eval(REDISSON_DELETE, &["1", "publish"]).as_int() == Some(1)
    }

    /// `getCount()`: `GET` with `LongCodec` (a missing key is 0).
    pub fn count(&self) -> i64 {
        match raw_command(&self.addr, &[b"GET", self.name.as_bytes()]) {
            RespValue::Nil => 0,
            other => other.as_str().and_then(|text| text.parse().ok()).unwrap_or_else(|| panic!("a count: {other:?}")),
        }
    }
}

/// What [`java_await`] saw.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JavaAwait {
    /// Whether `await` returned (the count read 0) before the deadline.
    pub returned: bool,
    /// The payloads heard on the channel, in order.
    pub messages: Vec<String>,
}

/// Redisson's `await(time)` on a thread of its own (blocking): returns at once when the
/// count is 0; otherwise subscribes (classic `SUBSCRIBE`), reads the count again, calls
/// `subscribed` (also when it returns without waiting), and then loops `while getCount() > 0` waiting for its local gate to
/// open: only a `0` message opens it (a `1` closes it), so a `1` alone does not make it
/// read the count again, as in Java. Gives up at `within`.
///
/// # Panics
/// When the server cannot be reached.
pub fn java_await(latch: &JavaLatch, within: Duration, subscribed: impl FnOnce()) -> JavaAwait {
    let end = Instant::now() + within;
    let mut messages = Vec::new();
    if latch.count() <= 0 {
        subscribed();
        return JavaAwait { returned: true, messages };
    }
    let channel = redisson_latch_channel(&latch.name);
    let mut stream = TcpStream::connect(&latch.addr).unwrap_or_else(|e| panic!("connect {}: {e}", latch.addr));
    let subscribe = format!("*2\r\n$9\r\nSUBSCRIBE\r\n${}\r\n{channel}\r\n", channel.len());
    stream.write_all(subscribe.as_bytes()).expect("subscribe");
    let mut reader = BufReader::new(stream.try_clone().expect("clone"));
    let mut line = || {
        let mut text = String::new();
        reader.read_line(&mut text).map(|_| text.trim().to_owned())
    };
    stream.set_read_timeout(Some(within)).expect("timeout");
    let confirmation: Vec<String> = (0..6).filter_map(|_| line().ok()).collect();
    assert_eq!(confirmation.get(2).map(|s| s.to_lowercase()).as_deref(), Some("subscribe"), "{confirmation:?}");
    let mut subscribed = Some(subscribed);
    loop {
        if latch.count() <= 0 {
            if let Some(subscribed) = subscribed.take() {
                subscribed();
            }
            return JavaAwait { returned: true, messages };
        }
        // Told once the count read after subscribing was above 0: from here on only a
        // message makes it read the count again.
        if let Some(subscribed) = subscribed.take() {
            subscribed();
        }
        // Wait for the gate to open: messages until a `0`.
        loop {
            let left = end.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return JavaAwait { returned: false, messages };
            }
            stream.set_read_timeout(Some(left)).expect("timeout");
            let lines: Result<Vec<String>, _> = (0..7).map(|_| line()).collect();
            let Ok(lines) = lines else { return JavaAwait { returned: false, messages } };
            let payload = lines[6].clone();
            messages.push(payload.clone());
            if payload == "0" {
                break;
            }
        }
    }
}

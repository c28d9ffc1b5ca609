//! A Lua script with its SHA1 computed once, run with `EVALSHA` and reloaded on
//! `NOSCRIPT` (a restarted or flushed server has forgotten it).

use std::time::Duration;

use fred::prelude::{Client, FromValue, LuaInterface};
use fred::types::scripts::Script;
use fred::types::{Key, MultipleKeys, MultipleValues, Value};

use crate::error::{refused_before_running, Error, ErrorKind, Result};

/// One Lua script of this crate's `lua/` (see [`crate::scripts`]), ready to run.
#[derive(Debug)]
pub struct LuaScript {
    name: &'static str,
    source: &'static str,
    script: Script,
    /// The SHA1 as fred's shared string: each `EVALSHA` clones it (a reference count)
    /// instead of copying it.
    sha1: fred::bytes_utils::Str,
}

impl LuaScript {
    /// Wraps `source`, computing its SHA1 now.
    pub fn new(name: &'static str, source: &'static str) -> Self {
        let script = Script::from_lua(source);
        let sha1 = script.sha1().clone();
        LuaScript { name, source, script, sha1 }
    }

    /// The script's file name in this crate's `lua/`, e.g. `acquire.lua`.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// The script's Lua source.
    pub fn source(&self) -> &'static str {
        self.source
    }

    /// Loads the script into the server's script cache (`SCRIPT LOAD`, on every node of
    /// a cluster), bounded by `timeout`.
    ///
    /// # Errors
    /// [`ErrorKind::Timeout`], or the classified fred error.
    ///
    /// # Cancel safety
    /// Cancel safe: loading is idempotent.
    pub async fn load(&self, client: &Client, timeout: Duration) -> Result<()> {
        bounded(timeout, self.name, self.name, self.script.load(client)).await
    }

    /// The SHA1 that `EVALSHA` uses.
    pub fn sha1(&self) -> &str {
        self.script.sha1()
    }

    /// Runs the script with `EVALSHA`, loading it first when the server answers
    /// `NOSCRIPT`, and gives up after `timeout`.
    ///
    /// fred ignores per-command options on `EVALSHA`, so the bound is a
    /// `tokio::time::timeout` around the call.
    ///
    /// # Errors
    /// [`ErrorKind::Timeout`] after `timeout`; otherwise the classified fred error
    /// ([`Error::from_fred`]), with `key` attached.
    ///
    /// # Cancel safety
    /// Dropping the future does not take the command back: once written, it runs on the
    /// server. That is why acquire and release set absolute counts (see `lua/`): a replay is
    /// harmless.
    pub async fn run<R, K, V>(&self, client: &Client, key: &str, timeout: Duration, keys: K, args: V) -> Result<R>
    where
        R: FromValue,
        K: Into<MultipleKeys> + Send,
        V: TryInto<MultipleValues> + Send,
        V::Error: Into<fred::error::Error> + Send,
    {
        let keys: MultipleKeys = keys.into();
        let args: MultipleValues = args.try_into().map_err(|e| Error::from_fred(e.into()).with_key(key))?;
        // What fred's `evalsha_with_reload` does (one copy of the keys and arguments per
        // send, another only after NOSCRIPT), made anew for each send of the retry loop.
        // Boxed: fred's script future is several KB, and every acquire and release
        // future (and so every task waiting on a lock) would otherwise carry it inline.
        let call = || {
            Box::pin(async {
                match self.script.evalsha::<R, _, _, _>(client, keys.clone(), args.clone()).await {
                    Err(error) if error.details().starts_with("NOSCRIPT") => {
                        // On every primary of a cluster (`script_load_cluster`).
                        self.script.load(client).await?;
                        self.script.evalsha(client, keys.clone(), args.clone()).await
                    }
                    other => other,
                }
            })
        };
        bounded_retry(timeout, self.name, key, call).await
    }

    /// [`LuaScript::run`] with KEYS and ARGV made by `build`, already in fred's types
    /// (shared byte strings and integers: nothing is copied or formatted per call).
    /// `build` runs once per send (a redirect or `TRYAGAIN` sends again, see
    /// [`bounded_retry`]), and once more if the server answered `NOSCRIPT` and the
    /// script was loaded, so no argument is cloned for a retry that rarely happens.
    ///
    /// # Errors
    /// As [`LuaScript::run`].
    ///
    /// # Cancel safety
    /// As [`LuaScript::run`].
    pub async fn run_with<R, B>(&self, client: &Client, key: &str, timeout: Duration, build: B) -> Result<R>
    where
        R: FromValue,
        B: Fn() -> (Vec<Key>, Vec<Value>) + Send + Sync,
    {
        let build = &build;
        // Boxed for the reason `run` gives.
        bounded_retry(timeout, self.name, key, || Box::pin(self.send_with(client, build))).await
    }

    /// [`LuaScript::run_with`] with the call inline in the caller's future, not boxed: for
    /// a call awaited once and not kept by waiting tasks (the simple lock's release), where
    /// the box's allocation and the copy of fred's future into it cost more than the
    /// future's size.
    ///
    /// # Errors
    /// As [`LuaScript::run`].
    ///
    /// # Cancel safety
    /// As [`LuaScript::run`].
    pub(crate) async fn run_with_inline<R, B>(
        &self,
        client: &Client,
        key: &str,
        timeout: Duration,
        build: B,
    ) -> Result<R>
    where
        R: FromValue,
        B: Fn() -> (Vec<Key>, Vec<Value>) + Send + Sync,
    {
        let build = &build;
        bounded_retry(timeout, self.name, key, || self.send_with(client, build)).await
    }

    /// One send of [`LuaScript::run_with`]: `EVALSHA`, and after `NOSCRIPT` a load and
    /// a second `EVALSHA`.
    async fn send_with<R, B>(&self, client: &Client, build: &B) -> Result<R, fred::error::Error>
    where
        R: FromValue,
        B: Fn() -> (Vec<Key>, Vec<Value>) + Send + Sync,
    {
        let (keys, args) = build();
        match client.evalsha::<R, _, _, _>(self.sha1.clone(), keys, Value::Array(args)).await {
            Err(error) if error.details().starts_with("NOSCRIPT") => {
                // On every primary of a cluster (`script_load_cluster`).
                self.script.load(client).await?;
                let (keys, args) = build();
                client.evalsha::<R, _, _, _>(self.sha1.clone(), keys, Value::Array(args)).await
            }
            result => result,
        }
    }
}

/// Like [`bounded`], but sends the call again (made anew by `make`) while the server
/// refuses it without running it ([`refused_before_running`]: a cluster redirect, which
/// fred was told not to follow, `TRYAGAIN` during a slot migration, `CLUSTERDOWN` during
/// a failover), after a pause of 5 ms doubling up to 100 ms, all within `timeout`. When
/// the time runs out between two refusals, the last refusal is returned (its
/// [`Error::is_not_sent`] says nothing ran).
///
/// # Errors
/// As [`bounded`].
///
/// # Cancel safety
/// As cancel safe as the calls `make` returns: dropping it drops the one in flight.
pub async fn bounded_retry<T, F, Fut>(timeout: Duration, what: &str, key: &str, mut make: F) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, fred::error::Error>>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    let mut pause = Duration::from_millis(5);
    loop {
        // At the deadline itself (one clock read per send, not two).
        match tokio::time::timeout_at(deadline, make()).await {
            Ok(Ok(value)) => return Ok(value),
            Ok(Err(error)) if refused_before_running(&error) => {
                if tokio::time::Instant::now() + pause >= deadline {
                    return Err(Error::from_fred(error).with_key(key));
                }
                tracing::debug!(target: crate::TARGET, key, error = %error, "refused before running; sending again");
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(Duration::from_millis(100));
            }
            Ok(Err(error)) => return Err(Error::from_fred(error).with_key(key)),
            Err(_) => {
                return Err(
                    Error::new(ErrorKind::Timeout, format!("{what} did not answer within {timeout:?}")).with_key(key)
                )
            }
        }
    }
}

/// Awaits a fred call for at most `timeout`, turning the outcome into leasehold's
/// [`Error`] (with `key` attached): the one place that bounds and classifies calls.
///
/// # Errors
/// [`ErrorKind::Timeout`] after `timeout`, naming `what`; otherwise the classified fred
/// error.
///
/// # Cancel safety
/// As cancel safe as `call`: dropping it drops `call`.
pub async fn bounded<T>(
    timeout: Duration,
    what: &str,
    key: &str,
    call: impl std::future::Future<Output = Result<T, fred::error::Error>>,
) -> Result<T> {
    match tokio::time::timeout(timeout, call).await {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(error)) => Err(Error::from_fred(error).with_key(key)),
        Err(_) => {
            Err(Error::new(ErrorKind::Timeout, format!("{what} did not answer within {timeout:?}")).with_key(key))
        }
    }
}

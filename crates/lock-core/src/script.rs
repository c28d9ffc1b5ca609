//! A Lua script with its SHA1 computed once, run with `EVALSHA` and reloaded on
//! `NOSCRIPT` (a restarted or flushed server has forgotten it).

use std::time::Duration;

use fred::prelude::{Client, FromValue, LuaInterface};
use fred::types::scripts::Script;
use fred::types::{Key, MultipleKeys, MultipleValues, Value};

use crate::error::{Error, ErrorKind, Result};

/// One Lua script of `lua/`, ready to run.
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

    /// The script's file name in `lua/`, e.g. `acquire.lua`.
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
        // Boxed: fred's script future is several KB, and every acquire and release
        // future (and so every task waiting on a lock) would otherwise carry it inline.
        let call = Box::pin(self.script.evalsha_with_reload::<R, K, V>(client, keys, args));
        bounded(timeout, self.name, key, call).await
    }

    /// [`LuaScript::run`] with KEYS and ARGV made by `build`, already in fred's types
    /// (shared byte strings and integers: nothing is copied or formatted per call).
    /// `build` runs once, and once more if the server answered `NOSCRIPT` and the script
    /// was loaded, so no argument is cloned for a retry that rarely happens.
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
        // Boxed for the reason `run` gives.
        let call = Box::pin(async {
            let (keys, args) = build();
            match client.evalsha::<R, _, _, _>(self.sha1.clone(), keys, Value::Array(args)).await {
                Err(error) if error.details().starts_with("NOSCRIPT") => {
                    // What fred's `evalsha_with_reload` does, without its up-front clones.
                    self.script.load(client).await?;
                    let (keys, args) = build();
                    client.evalsha::<R, _, _, _>(self.sha1.clone(), keys, Value::Array(args)).await
                }
                result => result,
            }
        });
        bounded(timeout, self.name, key, call).await
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

//! [`Target`]: where a program (a benchmark, a demo) finds Redis: `REDIS_URL`, or a
//! throwaway `redis-server` it starts itself.

use crate::RedisServer;

/// The Redis server a program runs against: `REDIS_URL` when set, else a throwaway
/// `redis-server` started here (killed when this value is dropped).
#[derive(Debug)]
pub struct Target {
    server: Option<RedisServer>,
    url: String,
}

impl Target {
    /// `REDIS_URL` if set and not blank, else a fresh local server on a free port.
    ///
    /// # Panics
    /// When no `REDIS_URL` is given and `redis-server` cannot be started.
    pub fn from_env() -> Self {
        match std::env::var("REDIS_URL") {
            Ok(url) if !url.trim().is_empty() => Target { server: None, url },
            _ => {
                let server = RedisServer::start();
                let url = server.url();
                Target { server: Some(server), url }
            }
        }
    }

    /// The URL to connect to.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// `host:port` of the server (from the URL when it is `REDIS_URL`).
    pub fn addr(&self) -> String {
        match &self.server {
            Some(server) => server.addr(),
            None => {
                let rest = self.url.split_once("://").map_or(self.url.as_str(), |(_, rest)| rest);
                let host = rest.split('/').next().unwrap_or(rest);
                host.rsplit_once('@').map_or(host, |(_, host)| host).to_owned()
            }
        }
    }

    /// `true` when this program started the server (so it may flush it).
    pub fn is_own(&self) -> bool {
        self.server.is_some()
    }

    /// One line saying which server this is.
    pub fn describe(&self) -> String {
        match &self.server {
            Some(server) => format!("throwaway redis-server started by this program on {}", server.addr()),
            None => format!("REDIS_URL={}", self.url),
        }
    }
}

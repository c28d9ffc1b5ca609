//! Connecting, within one budget, and saying why it failed: refused, timed out, not
//! Redis, refused by the server (its words), or a bad URL.
//!
//! `--timeout` bounds the whole connect: the library's `connect` makes two connections,
//! reads the pub/sub mode and loads the scripts, each step bounded by the command
//! timeout (a server that answers each step slowly could take several). Here the
//! whole call runs under one deadline; what is left of it when the deadline passes is
//! dropped (its half-made connections with it) and the process exits.

use std::fmt;
use std::time::Duration;

use leasehold::fred::error::ErrorKind as FredKind;
use leasehold::{Client, ClientBuilder};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::time::Instant;

use crate::exit;

/// Why connecting failed, worded for the operator.
#[derive(Debug)]
pub(crate) enum ConnectError {
    /// Nothing listens there (`ECONNREFUSED`).
    Refused(String),
    /// No working connection within the budget; `tls` for a `rediss://` URL (a server
    /// without TLS on that port never answers a TLS handshake).
    TimedOut { budget: Duration, tls: bool },
    /// Something answered, but not in Redis's protocol: the protocol error, and the
    /// first line it answered to a `PING` when it could be read.
    NotRedis { error: String, answer: Option<String> },
    /// The server refused the credentials (`NOAUTH`, `WRONGPASS`): its words.
    Auth(String),
    /// The server answered the connection with another error (`DENIED`, `NOPERM`,
    /// `LOADING`, ...): its words.
    Server(String),
    /// The connection closed before the server answered.
    Closed(String),
    /// The host name could not be resolved.
    Unresolved(String),
    /// The TLS handshake failed.
    Tls(String),
    /// The URL or a setting was refused before anything was sent.
    Usage(String),
    /// Anything else: the library's words and fred's.
    Other(String),
}

impl ConnectError {
    /// The exit code: 64 for a URL or setting refused before anything was sent, else
    /// 69 (`EX_UNAVAILABLE`): no working connection to Redis.
    pub(crate) fn exit_code(&self) -> u8 {
        match self {
            ConnectError::Usage(_) => exit::USAGE,
            _ => exit::UNAVAILABLE,
        }
    }
}

impl fmt::Display for ConnectError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConnectError::Refused(detail) => write!(f, "connection refused: nothing listens there ({detail})"),
            ConnectError::TimedOut { budget, tls } => {
                write!(f, "timed out: no working connection to Redis within {budget:?} (--timeout)")?;
                if *tls {
                    f.write_str("; the URL asks for TLS: does the server speak TLS on that port?")?;
                }
                Ok(())
            }
            ConnectError::NotRedis { error, answer: Some(answer) } => {
                write!(f, "not Redis: to PING it answered {answer:?} ({error})")
            }
            ConnectError::NotRedis { error, answer: None } => {
                write!(f, "not Redis: the answer is not in Redis's protocol ({error})")
            }
            ConnectError::Auth(words) => write!(f, "authentication failed: the server said {words:?}"),
            ConnectError::Server(words) => write!(f, "the server refused the connection: it said {words:?}"),
            ConnectError::Closed(detail) => {
                write!(f, "the connection closed before Redis answered (not Redis, or TLS on one side only?): {detail}")
            }
            ConnectError::Unresolved(detail) => write!(f, "the host name could not be resolved: {detail}"),
            ConnectError::Tls(detail) => write!(f, "the TLS handshake failed: {detail}"),
            ConnectError::Usage(detail) => write!(f, "invalid URL or setting: {detail}"),
            ConnectError::Other(detail) => f.write_str(detail),
        }
    }
}

/// Connects with `builder` within `budget`, all steps included.
///
/// # Cancel safety
/// Dropping the future drops the half-made connections (as the library's `connect`).
pub(crate) async fn connect(builder: ClientBuilder, url: &str, budget: Duration) -> Result<Client, ConnectError> {
    let deadline = Instant::now() + budget;
    let error = match tokio::time::timeout_at(deadline, builder.connect()).await {
        Ok(Ok(client)) => return Ok(client),
        Ok(Err(error)) => error,
        Err(_) => return Err(timed_out(budget, url)),
    };
    match classify(&error, budget) {
        ConnectError::TimedOut { .. } => Err(timed_out(budget, url)),
        ConnectError::NotRedis { error, answer: None } => {
            // Ask it once more, by hand, for its own words: what a `PING` gets.
            let answer = match plain_address(url) {
                Some(address) => tokio::time::timeout_at(deadline, first_line(&address)).await.ok().flatten(),
                None => None,
            };
            Err(ConnectError::NotRedis { error, answer })
        }
        failure => Err(failure),
    }
}

/// [`ConnectError::TimedOut`] for `url`.
fn timed_out(budget: Duration, url: &str) -> ConnectError {
    ConnectError::TimedOut { budget, tls: url.starts_with("rediss://") }
}

/// What went wrong, from the library's error and fred's under it. A timeout of a step
/// inside (the library's or fred's, both the same budget) is the budget's.
fn classify(error: &leasehold::Error, budget: Duration) -> ConnectError {
    if error.is_timeout() {
        return ConnectError::TimedOut { budget, tls: false };
    }
    let Some(fred) = error.fred_error() else {
        return if error.is_invalid_argument() {
            ConnectError::Usage(error.to_string())
        } else {
            ConnectError::Other(error.to_string())
        };
    };
    let details = fred.details().to_owned();
    let lower = details.to_ascii_lowercase();
    match fred.kind() {
        FredKind::Url | FredKind::Config => ConnectError::Usage(details),
        FredKind::Auth => ConnectError::Auth(details),
        FredKind::Protocol | FredKind::Parse => ConnectError::NotRedis { error: details, answer: None },
        FredKind::Tls => ConnectError::Tls(details),
        FredKind::Timeout => ConnectError::TimedOut { budget, tls: false },
        _ if lower.contains("connectionrefused") || lower.contains("connection refused") => {
            ConnectError::Refused(io_words(&details))
        }
        _ if lower.contains("lookup") || lower.contains("not known") || lower.contains("resolve") => {
            ConnectError::Unresolved(io_words(&details))
        }
        FredKind::IO | FredKind::Canceled
            if ["closed", "reset", "eof", "broken pipe", "aborted"].iter().any(|word| lower.contains(word)) =>
        {
            ConnectError::Closed(io_words(&details))
        }
        _ if error.server_code().is_some() => ConnectError::Server(details),
        _ => ConnectError::Other(format!("{error}: {details}")),
    }
}

/// The words of an I/O error in fred's text, which is the error's `Debug`
/// (`Os { code: 111, kind: ConnectionRefused, message: "Connection refused" }`): its
/// message, else the text as it is.
fn io_words(details: &str) -> String {
    ["message: \"", "error: \""]
        .iter()
        .find_map(|start| {
            let from = details.find(start)? + start.len();
            let len = details[from..].find('"')?;
            Some(details[from..from + len].to_owned())
        })
        .unwrap_or_else(|| details.to_owned())
}

/// `host:port` of a plain `redis://` URL (the one form a hand-made `PING` can ask:
/// no TLS, no cluster or Sentinel discovery), else `None`.
fn plain_address(url: &str) -> Option<String> {
    let rest = url.strip_prefix("redis://")?;
    let authority = rest.split(['/', '?', '#']).next()?;
    // Credentials end at the last `@` (a password may hold one).
    let host_port = authority.rsplit_once('@').map_or(authority, |(_, host)| host);
    if host_port.is_empty() {
        return None;
    }
    // `[::1]:6380`, `[::1]`, `host:6380`, `host`.
    let has_port = match host_port.rfind(']') {
        Some(bracket) => host_port[bracket..].contains(':'),
        None => host_port.contains(':'),
    };
    Some(if has_port { host_port.to_owned() } else { format!("{host_port}:6379") })
}

/// Connects to `address`, sends `PING` and returns the first line of the answer
/// (printable characters only, at most 80), `None` when nothing could be read.
async fn first_line(address: &str) -> Option<String> {
    let mut stream = tokio::net::TcpStream::connect(address).await.ok()?;
    stream.write_all(b"PING\r\n").await.ok()?;
    let mut answer = Vec::with_capacity(256);
    let mut buffer = [0u8; 256];
    while answer.len() < 256 && !answer.contains(&b'\n') {
        let read = stream.read(&mut buffer).await.ok()?;
        if read == 0 {
            break;
        }
        answer.extend_from_slice(&buffer[..read]);
    }
    let line = answer.split(|&b| b == b'\n').next().unwrap_or_default();
    let text: String = String::from_utf8_lossy(line).chars().filter(|c| !c.is_control()).take(80).collect();
    (!text.is_empty()).then_some(text)
}

#[cfg(test)]
mod tests {
    use super::plain_address;

    #[test]
    fn io_errors_in_their_own_words() {
        let refused = r#"Os { code: 111, kind: ConnectionRefused, message: "Connection refused" }"#;
        assert_eq!(super::io_words(refused), "Connection refused");
        let lookup = r#"Custom { kind: Uncategorized, error: "failed to lookup address information" }"#;
        assert_eq!(super::io_words(lookup), "failed to lookup address information");
        assert_eq!(super::io_words("Connection closed."), "Connection closed.");
    }

    #[test]
    fn plain_addresses_of_urls() {
        assert_eq!(plain_address("redis://127.0.0.1:7000").as_deref(), Some("127.0.0.1:7000"));
        assert_eq!(plain_address("redis://u:p@w@host:7000/2?x=1").as_deref(), Some("host:7000"));
        assert_eq!(plain_address("redis://host").as_deref(), Some("host:6379"));
        assert_eq!(plain_address("redis://[::1]:7000").as_deref(), Some("[::1]:7000"));
        assert_eq!(plain_address("redis://[::1]").as_deref(), Some("[::1]:6379"));
        assert_eq!(plain_address("rediss://host:7000"), None);
        assert_eq!(plain_address("redis-cluster://host:7000"), None);
        assert_eq!(plain_address("redis://"), None);
    }
}

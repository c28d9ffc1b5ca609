//! One command over a plain TCP connection (RESP2), independent of the client under test.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::time::Duration;

/// A decoded RESP2 reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RespValue {
    /// `+OK` and other simple strings.
    Simple(String),
    /// `-ERR ...` replies.
    Error(String),
    /// `:n` integers.
    Integer(i64),
    /// `$n` bulk strings (lossy UTF-8).
    Bulk(String),
    /// `$-1` / `*-1`.
    Nil,
    /// `*n` arrays.
    Array(Vec<RespValue>),
}

impl RespValue {
    /// The integer, if this is one.
    pub fn as_int(&self) -> Option<i64> {
        match self {
            RespValue::Integer(n) => Some(*n),
            _ => None,
        }
    }

    /// The text of a simple or bulk string.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            RespValue::Simple(s) | RespValue::Bulk(s) => Some(s),
            _ => None,
        }
    }
}

/// Sends one command to `addr` (`host:port`) on a new connection and returns its reply.
///
/// # Panics
/// When the server cannot be reached or answers garbage; this is test support.
pub fn raw_command(addr: &str, args: &[&[u8]]) -> RespValue {
    let mut stream = TcpStream::connect(addr).unwrap_or_else(|e| panic!("connect {addr}: {e}"));
    let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
    stream.write_all(&encode(args)).unwrap_or_else(|e| panic!("write: {e}"));
    let mut reader = BufReader::new(stream);
    read_value(&mut reader)
}

/// Sends `commands` to `addr` on one new connection, in order, and returns their
/// replies (for state that lives on the connection, such as `READONLY` on a cluster
/// replica).
///
/// # Panics
/// As [`raw_command`].
pub fn raw_commands(addr: &str, commands: &[&[&[u8]]]) -> Vec<RespValue> {
    let mut stream = TcpStream::connect(addr).unwrap_or_else(|e| panic!("connect {addr}: {e}"));
    let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
    let mut out = Vec::new();
    for args in commands {
        out.extend(encode(args));
    }
    stream.write_all(&out).unwrap_or_else(|e| panic!("write: {e}"));
    let mut reader = BufReader::new(stream);
    commands.iter().map(|_| read_value(&mut reader)).collect()
}

/// Encodes a command as a RESP array of bulk strings.
pub(crate) fn encode(args: &[&[u8]]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for arg in args {
        out.extend_from_slice(format!("${}\r\n", arg.len()).as_bytes());
        out.extend_from_slice(arg);
        out.extend_from_slice(b"\r\n");
    }
    out
}

pub(crate) fn read_line(reader: &mut impl BufRead) -> Option<String> {
    let mut line = Vec::new();
    match reader.read_until(b'\n', &mut line) {
        Ok(0) | Err(_) => None,
        Ok(_) => {
            while line.last().is_some_and(|b| *b == b'\n' || *b == b'\r') {
                line.pop();
            }
            Some(String::from_utf8_lossy(&line).into_owned())
        }
    }
}

fn read_value(reader: &mut impl BufRead) -> RespValue {
    let line = read_line(reader).unwrap_or_else(|| panic!("connection closed"));
    let (kind, rest) = line.split_at(1);
    match kind {
        "+" => RespValue::Simple(rest.to_owned()),
        "-" => RespValue::Error(rest.to_owned()),
        ":" => RespValue::Integer(rest.parse().unwrap_or_else(|e| panic!("bad integer {rest}: {e}"))),
        "$" => {
            let len: i64 = rest.parse().unwrap_or_else(|e| panic!("bad length {rest}: {e}"));
            let Ok(len) = usize::try_from(len) else { return RespValue::Nil };
            let mut buf = vec![0u8; len + 2];
            reader.read_exact(&mut buf).unwrap_or_else(|e| panic!("read: {e}"));
            buf.truncate(len);
            RespValue::Bulk(String::from_utf8_lossy(&buf).into_owned())
        }
        "*" => {
            let len: i64 = rest.parse().unwrap_or_else(|e| panic!("bad length {rest}: {e}"));
            let Ok(len) = usize::try_from(len) else { return RespValue::Nil };
            RespValue::Array((0..len).map(|_| read_value(reader)).collect())
        }
        other => panic!("unexpected RESP type {other:?} in {line:?}"),
    }
}

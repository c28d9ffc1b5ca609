//! A minimal JSON writer for `--json` output (objects, arrays, strings, integers): the
//! output needs no parser, so `serde_json` and its derive would only add build time.

use std::fmt::{self, Write};

/// One JSON value.
pub(crate) enum Json {
    Null,
    Bool(bool),
    Int(i64),
    Str(String),
    Arr(Vec<Json>),
    /// Fields in the order given (stable output).
    Obj(Vec<(&'static str, Json)>),
}

impl Json {
    /// A string value.
    pub(crate) fn str(text: impl Into<String>) -> Json {
        Json::Str(text.into())
    }

    /// An integer or `null`.
    pub(crate) fn opt_int(value: Option<i64>) -> Json {
        value.map_or(Json::Null, Json::Int)
    }

    /// A string or `null`.
    pub(crate) fn opt_str(value: Option<&str>) -> Json {
        value.map_or(Json::Null, Json::str)
    }
}

impl fmt::Display for Json {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Json::Null => f.write_str("null"),
            Json::Bool(b) => write!(f, "{b}"),
            Json::Int(n) => write!(f, "{n}"),
            Json::Str(s) => write_str(f, s),
            Json::Arr(items) => {
                f.write_char('[')?;
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        f.write_char(',')?;
                    }
                    write!(f, "{item}")?;
                }
                f.write_char(']')
            }
            Json::Obj(fields) => {
                f.write_char('{')?;
                for (i, (name, value)) in fields.iter().enumerate() {
                    if i > 0 {
                        f.write_char(',')?;
                    }
                    write_str(f, name)?;
                    write!(f, ":{value}")?;
                }
                f.write_char('}')
            }
        }
    }
}

/// `s` as a JSON string: quotes, backslashes and control characters escaped.
fn write_str(f: &mut fmt::Formatter<'_>, s: &str) -> fmt::Result {
    f.write_char('"')?;
    for c in s.chars() {
        match c {
            '"' => f.write_str("\\\"")?,
            '\\' => f.write_str("\\\\")?,
            '\n' => f.write_str("\\n")?,
            '\r' => f.write_str("\\r")?,
            '\t' => f.write_str("\\t")?,
            c if u32::from(c) < 0x20 => write!(f, "\\u{:04x}", u32::from(c))?,
            c => f.write_char(c)?,
        }
    }
    f.write_char('"')
}

#[cfg(test)]
mod tests {
    use super::Json;

    #[test]
    fn writes_valid_json_with_escapes() {
        let value = Json::Obj(vec![
            ("name", Json::str("a\"b\\c\nd\u{1}")),
            ("n", Json::Int(-3)),
            ("none", Json::Null),
            ("list", Json::Arr(vec![Json::Bool(true), Json::opt_int(Some(7))])),
            ("text", Json::opt_str(Some("t"))),
            ("no_text", Json::opt_str(None)),
        ]);
        assert_eq!(
            value.to_string(),
            r#"{"name":"a\"b\\c\nd\u0001","n":-3,"none":null,"list":[true,7],"text":"t","no_text":null}"#
        );
    }
}

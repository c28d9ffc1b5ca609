//! Assembles the whole Lua scripts from `lua/templates/` and the shared steps in
//! `lua/fragments/` (this crate's; the source, edited by hand). Not part of the library:
//! `examples/sync_lua.rs` (run by `bash scripts/sync-lua.sh`) writes its output to the
//! checked-in copies `lua/*.lua`, which `src/scripts.rs` compiles in, and
//! `tests/lua_copies.rs` fails when a copy differs from it. Both pull this file in with
//! `#[path = "../tools/assemble.rs"] mod assemble;`, so there is one assembler and no
//! build script runs in a downstream build.
//!
//! The include syntax (documented for contributors in `docs/architecture/scripts.md`,
//! "Fragments"):
//!
//! - A line `--#include fragments/NAME.lua` (the path relative to this crate's `lua/`)
//!   is replaced by the fragment's lines. The include line's leading whitespace is put in
//!   front of every non-empty line of the fragment, so a fragment can be included inside
//!   a block. Fragments may include fragments.
//! - Parameters: `--#include fragments/NAME.lua flag=purged` replaces `{{flag}}` in the
//!   fragment by `purged`. A fragment line that names a parameter the include does not
//!   set is left out (an optional line).
//! - A fragment's include may pass its own parameters on: `--#include fragments/NAME.lua
//!   grant={{grant}}` sets the inner `grant` to the outer one's value, and sets nothing
//!   when the outer include did not set it (so the inner optional lines go too).
//! - A fragment line starting with `--!` (after its indentation) documents the fragment
//!   for its readers and is left out of every script.
//!
//! Everything else is copied byte for byte.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

/// How deep fragments may include fragments (deeper is taken for a cycle).
const MAX_DEPTH: usize = 8;

/// Every script, file name (`acquire.lua`) -> whole text, assembled from the templates
/// of `lua` (this crate's `lua/` folder) and their fragments.
///
/// # Errors
/// A file that cannot be read, an include without a path or with a parameter that is
/// not `name=value`, fragments nested deeper than [`MAX_DEPTH`].
pub(crate) fn assemble_all(lua: &Path) -> Result<BTreeMap<String, String>, String> {
    let templates = lua.join("templates");
    let entries = fs::read_dir(&templates).map_err(|e| format!("read {}: {e}", templates.display()))?;
    let mut scripts = BTreeMap::new();
    for entry in entries {
        let path = entry.map_err(|e| format!("read {}: {e}", templates.display()))?.path();
        if path.extension().is_none_or(|ext| ext != "lua") {
            continue;
        }
        let name = path
            .file_name()
            .and_then(|name| name.to_str())
            .ok_or_else(|| format!("{}: not a UTF-8 file name", path.display()))?
            .to_owned();
        let text = read(&path)?;
        scripts.insert(name, assemble(lua, &path, &text, &BTreeMap::new(), "", 0)?);
    }
    Ok(scripts)
}

fn read(path: &Path) -> Result<String, String> {
    fs::read_to_string(path).map_err(|e| format!("read {}: {e}", path.display()))
}

/// `text` with every include replaced; `params` fill the `{{name}}`s of a fragment,
/// `indent` goes in front of each non-empty line. `from` names the file in errors.
fn assemble(
    lua: &Path,
    from: &Path,
    text: &str,
    params: &BTreeMap<String, String>,
    indent: &str,
    depth: usize,
) -> Result<String, String> {
    if depth > MAX_DEPTH {
        return Err(format!("{}: fragments nested deeper than {MAX_DEPTH} (a cycle?)", from.display()));
    }
    let fragment = depth > 0;
    let mut out = String::with_capacity(text.len());
    for line in text.split_inclusive('\n') {
        let body = line.trim_start_matches([' ', '\t']);
        let own_indent = &line[..line.len() - body.len()];
        if fragment && body.starts_with("--!") {
            continue;
        }
        if let Some(directive) = body.strip_prefix("--#include ") {
            let mut words = directive.split_whitespace();
            let path = words.next().ok_or_else(|| format!("{}: `--#include` without a path", from.display()))?;
            let mut inner = BTreeMap::new();
            for word in words {
                let (name, value) = word
                    .split_once('=')
                    .ok_or_else(|| format!("{}: include parameter `{word}` is not name=value", from.display()))?;
                // A fragment passes its own parameters on (`grant={{grant}}`); one its
                // includer did not set is not passed (the inner optional lines go).
                let value = if fragment { substitute(value, params) } else { Some(value.to_owned()) };
                if let Some(value) = value {
                    inner.insert(name.to_owned(), value);
                }
            }
            let included: PathBuf = lua.join(path);
            let text = read(&included)?;
            let inner_indent = format!("{indent}{own_indent}");
            out.push_str(&assemble(lua, &included, &text, &inner, &inner_indent, depth + 1)?);
            continue;
        }
        let Some(line) = (if fragment { substitute(line, params) } else { Some(line.to_owned()) }) else {
            continue;
        };
        if !indent.is_empty() && !line.trim().is_empty() {
            out.push_str(indent);
        }
        out.push_str(&line);
    }
    Ok(out)
}

/// `line` with each `{{name}}` (a name of letters, digits and `_`) replaced by its
/// parameter; `None` (leave the line out) when a name has no parameter. Other braces, as
/// in a nested Lua table, stay as they are.
fn substitute(line: &str, params: &BTreeMap<String, String>) -> Option<String> {
    let mut out = String::with_capacity(line.len());
    let mut rest = line;
    while let Some(start) = rest.find("{{") {
        let after = &rest[start + 2..];
        let name_len = after.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).unwrap_or(after.len());
        if name_len == 0 || !after[name_len..].starts_with("}}") {
            out.push_str(&rest[..start + 2]);
            rest = after;
            continue;
        }
        out.push_str(&rest[..start]);
        out.push_str(params.get(&after[..name_len])?);
        rest = &after[name_len + 2..];
    }
    out.push_str(rest);
    Some(out)
}

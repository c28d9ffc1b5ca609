//! Assembles the Lua scripts from `lua/templates/` and the shared steps in
//! `lua/fragments/` into `$OUT_DIR/lua/`, which `src/scripts.rs` compiles in.
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
//! - A fragment line starting with `--!` (after its indentation) documents the fragment
//!   for its readers and is left out of every script.
//!
//! Everything else is copied byte for byte. The whole scripts are checked in as
//! `lua/*.lua` (this crate's and the workspace's), and `tests/lua_copies.rs` fails when
//! they differ from what this assembles (`bash scripts/sync-lua.sh` writes them).

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

/// How deep fragments may include fragments (a cycle fails the build).
const MAX_DEPTH: usize = 8;

fn main() {
    let lua = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR")).join("lua");
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("OUT_DIR")).join("lua");
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=lua/templates");
    println!("cargo:rerun-if-changed=lua/fragments");
    fs::create_dir_all(&out).unwrap_or_else(|e| panic!("create {}: {e}", out.display()));
    let templates = lua.join("templates");
    let mut names: Vec<PathBuf> = fs::read_dir(&templates)
        .unwrap_or_else(|e| panic!("read {}: {e}", templates.display()))
        .map(|entry| entry.expect("directory entry").path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "lua"))
        .collect();
    names.sort();
    for template in names {
        let text = read(&template);
        let script = assemble(&lua, &template, &text, &BTreeMap::new(), "", 0);
        let name = template.file_name().expect("a file name");
        let target = out.join(name);
        // Written only when changed, so that an unchanged script does not rebuild the crate.
        if fs::read_to_string(&target).ok().as_deref() != Some(script.as_str()) {
            fs::write(&target, script).unwrap_or_else(|e| panic!("write {}: {e}", target.display()));
        }
    }
}

fn read(path: &Path) -> String {
    fs::read_to_string(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
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
) -> String {
    assert!(depth <= MAX_DEPTH, "{}: fragments nested deeper than {MAX_DEPTH} (a cycle?)", from.display());
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
            let path = words.next().unwrap_or_else(|| panic!("{}: `--#include` without a path", from.display()));
            let mut inner = BTreeMap::new();
            for word in words {
                let (name, value) = word
                    .split_once('=')
                    .unwrap_or_else(|| panic!("{}: include parameter `{word}` is not name=value", from.display()));
                inner.insert(name.to_owned(), value.to_owned());
            }
            let included = lua.join(path);
            let text = read(&included);
            let inner_indent = format!("{indent}{own_indent}");
            out.push_str(&assemble(lua, &included, &text, &inner, &inner_indent, depth + 1));
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
    out
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

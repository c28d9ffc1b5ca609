//! The Lua scripts are edited as templates (`lua/templates/`) and shared steps
//! (`lua/fragments/`); their one assembled copy is checked in as this crate's
//! `lua/*.lua`, which the package carries and `src/scripts.rs` compiles in with
//! `include_str!` (there is no build script). This test fails when a checked-in script
//! differs from the assembly of its template: run `bash scripts/sync-lua.sh` after
//! editing a template or a fragment. It needs only the crate's own files, so it passes
//! in the packaged crate too.

use std::collections::BTreeMap;
use std::path::Path;

#[path = "../tools/assemble.rs"]
mod assemble;

const FIX: &str = "edit lua/templates/ or lua/fragments/, then run `bash scripts/sync-lua.sh`";

fn lua_files(dir: &Path) -> BTreeMap<String, String> {
    let entries = std::fs::read_dir(dir).unwrap_or_else(|e| panic!("read {}: {e}", dir.display()));
    let mut files = BTreeMap::new();
    for entry in entries {
        let path = entry.expect("directory entry").path();
        if path.extension().is_some_and(|ext| ext == "lua") {
            let name = path.file_name().and_then(|n| n.to_str()).expect("UTF-8 file name").to_owned();
            let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
            files.insert(name, text);
        }
    }
    files
}

#[test]
fn checked_in_scripts_are_their_assembly() {
    let lua = Path::new(env!("CARGO_MANIFEST_DIR")).join("lua");
    let assembled = assemble::assemble_all(&lua).unwrap_or_else(|e| panic!("assembling the scripts: {e}"));
    for (name, text) in &assembled {
        assert!(!text.contains("--#include") && !text.contains("\n--!"), "{name}: a directive was left in");
    }
    let checked_in = lua_files(&lua);
    assert_eq!(
        checked_in.keys().collect::<Vec<_>>(),
        assembled.keys().collect::<Vec<_>>(),
        "crates/lock-core/lua holds other scripts than its templates make: {FIX}"
    );
    for (name, text) in &assembled {
        assert!(checked_in.get(name) == Some(text), "crates/lock-core/lua/{name} differs from its assembly: {FIX}");
    }
}

#[test]
fn the_compiled_scripts_are_the_checked_in_ones() {
    let lua = Path::new(env!("CARGO_MANIFEST_DIR")).join("lua");
    let checked_in = lua_files(&lua);
    let compiled: BTreeMap<String, String> =
        lock_core::scripts::all().iter().map(|s| (s.name().to_owned(), s.source().to_owned())).collect();
    assert_eq!(
        compiled.keys().collect::<Vec<_>>(),
        checked_in.keys().collect::<Vec<_>>(),
        "lock_core::scripts::all() must list every script of crates/lock-core/lua"
    );
    for (name, text) in &compiled {
        assert!(checked_in.get(name) == Some(text), "lock_core::scripts compiled another {name} than lua/{name}");
    }
}

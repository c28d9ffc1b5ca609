//! The scripts compiled into `lock-core` are assembled at build time (`build.rs`) from
//! `lua/templates/` and the shared steps in `lua/fragments/`; the whole scripts are also
//! checked in, in this crate's `lua/` (which its package carries) and in the workspace's
//! top-level `lua/`, for readers. This test fails when a checked-in script differs from
//! its assembly: run `bash scripts/sync-lua.sh` after editing a template or a fragment.
//! In a packaged crate (no workspace around it) only the crate's own copy is compared.

use std::collections::BTreeMap;
use std::path::Path;

const FIX: &str = "run `bash scripts/sync-lua.sh`";

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

fn assert_same(dir: &str, checked_in: &BTreeMap<String, String>, assembled: &BTreeMap<String, String>) {
    let names = |m: &BTreeMap<String, String>| m.keys().cloned().collect::<Vec<_>>();
    assert_eq!(names(checked_in), names(assembled), "{dir} holds other scripts than the templates make: {FIX}");
    for (name, text) in assembled {
        assert!(checked_in.get(name) == Some(text), "{dir}/{name} differs from its assembly: {FIX}");
    }
}

#[test]
fn checked_in_scripts_are_their_assembly() {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let assembled: BTreeMap<String, String> =
        lock_core::scripts::all().iter().map(|s| (s.name().to_owned(), s.source().to_owned())).collect();
    let templates = lua_files(&crate_dir.join("lua/templates"));
    assert_eq!(
        templates.keys().collect::<Vec<_>>(),
        assembled.keys().collect::<Vec<_>>(),
        "lock_core::scripts::all() must list every template of crates/lock-core/lua/templates"
    );
    for (name, text) in &assembled {
        assert!(!text.contains("--#include") && !text.contains("\n--!"), "{name}: a directive was left in");
    }
    assert_same("crates/lock-core/lua", &lua_files(&crate_dir.join("lua")), &assembled);
    let workspace_lua = crate_dir.join("../../lua");
    if !workspace_lua.join("acquire.lua").is_file() {
        eprintln!("no workspace lua/ next to this crate (a packaged copy): nothing more to compare");
        return;
    }
    assert_same("lua", &lua_files(&workspace_lua), &assembled);
}

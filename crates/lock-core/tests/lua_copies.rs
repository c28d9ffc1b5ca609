//! The scripts compiled into `lock-core` are the workspace's top-level `lua/` files.
//!
//! `lua/` is where the scripts are read and edited; `crates/lock-core/lua/` is a
//! checked-in copy so that the packaged crate carries them (`cargo package` only ships
//! files inside the package). This test fails when the two differ: run
//! `bash scripts/sync-lua.sh` after editing `lua/`. In a packaged crate (no workspace
//! around it) there is nothing to compare and the test passes.

use std::collections::BTreeMap;
use std::path::Path;

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
fn compiled_scripts_are_the_workspace_lua_files() {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let workspace_lua = crate_dir.join("../../lua");
    let bundled = lua_files(&crate_dir.join("lua"));
    let compiled: BTreeMap<String, String> =
        lock_core::scripts::all().iter().map(|s| (s.name().to_owned(), s.source().to_owned())).collect();
    assert_eq!(compiled, bundled, "lock_core::scripts::all() must list every file of crates/lock-core/lua");
    if !workspace_lua.join("acquire.lua").is_file() {
        eprintln!("no workspace lua/ next to this crate (a packaged copy): nothing to compare");
        return;
    }
    let workspace = lua_files(&workspace_lua);
    let names = |m: &BTreeMap<String, String>| m.keys().cloned().collect::<Vec<_>>();
    assert_eq!(
        names(&bundled),
        names(&workspace),
        "crates/lock-core/lua and lua/ hold different files: run `bash scripts/sync-lua.sh`"
    );
    for (name, text) in &workspace {
        assert!(
            bundled.get(name) == Some(text),
            "crates/lock-core/lua/{name} differs from lua/{name}: run `bash scripts/sync-lua.sh`"
        );
    }
}

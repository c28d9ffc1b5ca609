//! Writes the whole scripts, as `build.rs` assembles them from `lua/templates/` and
//! `lua/fragments/`, to the checked-in copies readers read: this crate's `lua/*.lua` and
//! the workspace's top-level `lua/*.lua` (when there is a workspace around the crate).
//! A `.lua` file there that no template makes any more is removed.
//!
//! Run it after editing a template or a fragment: `bash scripts/sync-lua.sh` (which runs
//! `cargo run -q -p leasehold-lock-core --example sync_lua`). `tests/lua_copies.rs` fails
//! until the copies match.

use std::collections::BTreeSet;
use std::path::Path;

fn main() -> std::io::Result<()> {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut dirs = vec![crate_dir.join("lua")];
    let workspace_lua = crate_dir.join("../../lua");
    if workspace_lua.is_dir() {
        dirs.push(workspace_lua);
    }
    let scripts = lock_core::scripts::all();
    let names: BTreeSet<&str> = scripts.iter().map(|s| s.name()).collect();
    for dir in &dirs {
        for entry in std::fs::read_dir(dir)? {
            let path = entry?.path();
            let stale = path.extension().is_some_and(|ext| ext == "lua")
                && path.file_name().and_then(|n| n.to_str()).is_some_and(|n| !names.contains(n));
            if stale {
                std::fs::remove_file(&path)?;
                println!("removed {}", path.display());
            }
        }
        let mut written = 0;
        for script in scripts {
            let path = dir.join(script.name());
            if std::fs::read_to_string(&path).ok().as_deref() != Some(script.source()) {
                std::fs::write(&path, script.source())?;
                println!("wrote {}", path.display());
                written += 1;
            }
        }
        println!("{}: {} scripts, {written} rewritten", dir.display(), scripts.len());
    }
    Ok(())
}

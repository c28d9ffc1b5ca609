//! Writes the whole scripts, assembled from `lua/templates/` and `lua/fragments/` (the
//! source), to their one checked-in copy: this crate's `lua/*.lua`, which
//! `src/scripts.rs` compiles in with `include_str!`. A `.lua` file there that no
//! template makes any more is removed.
//!
//! Run it after editing a template or a fragment: `bash scripts/sync-lua.sh` (which runs
//! `cargo run -q -p leasehold-lock-core --example sync_lua`). `tests/lua_copies.rs` fails
//! until the copies match. The assembler is `tools/assemble.rs`, shared with that test.

use std::path::Path;

#[path = "../tools/assemble.rs"]
mod assemble;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let lua = Path::new(env!("CARGO_MANIFEST_DIR")).join("lua");
    let scripts = assemble::assemble_all(&lua)?;
    for entry in std::fs::read_dir(&lua)? {
        let path = entry?.path();
        let stale = path.extension().is_some_and(|ext| ext == "lua")
            && path.file_name().and_then(|n| n.to_str()).is_some_and(|n| !scripts.contains_key(n));
        if stale {
            std::fs::remove_file(&path)?;
            println!("removed {}", path.display());
        }
    }
    let mut written = 0;
    for (name, text) in &scripts {
        let path = lua.join(name);
        if std::fs::read_to_string(&path).ok().as_deref() != Some(text.as_str()) {
            std::fs::write(&path, text)?;
            println!("wrote {}", path.display());
            written += 1;
        }
    }
    println!("{}: {} scripts, {written} rewritten", lua.display(), scripts.len());
    Ok(())
}

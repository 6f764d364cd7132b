//! `cargo xtask results-schema`: writes `docs/results.schema.json` from the
//! results model (`harness::results`), the file `harness/tests/results_schema.rs`
//! checks is current.

use anyhow::{Context, Result};
use std::path::Path;

/// Where the generated schema lives, relative to the project root.
pub const PATH: &str = "docs/results.schema.json";

pub fn run(root: &Path) -> Result<()> {
    let path = root.join(PATH);
    std::fs::write(&path, harness::results::schema_text())
        .with_context(|| format!("writing {}", path.display()))?;
    println!("written: {}", path.display());
    Ok(())
}

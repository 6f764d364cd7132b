//! `cargo xtask ci`: the full check CI runs (and a developer before pushing).

use anyhow::Result;
use xshell::{cmd, Shell};

/// fmt, clippy (-D warnings), the CI's own lint (actionlint, workflow
/// schema, shellcheck), 20 s of fuzzing, then all tests with real VMs enabled.
pub fn run(sh: &Shell) -> Result<()> {
    cmd!(sh, "cargo fmt --all -- --check").run()?;
    cmd!(sh, "cargo clippy --workspace --all-targets -- -D warnings").run()?;
    cmd!(sh, "bash ci/lint.sh").run()?;
    // A short fuzz of the guest-output parsers (a finding fails CI and is
    // saved in the corpus, so `cargo test` replays it from then on).
    crate::fuzz::run(
        sh,
        &crate::project_root(),
        &["--seconds".into(), "20".into()],
    )?;
    let _vm = sh.push_env("HARNESS_VM_TESTS", "1");
    cmd!(sh, "cargo test --workspace").run()?;
    Ok(())
}

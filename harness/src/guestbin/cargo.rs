//! The `cargo build` of the static guest binaries. The harness' build
//! script compiles this file too (`#[path]`), so the command it runs and the
//! one this crate documents and tests are the same code.

use std::path::Path;
use std::process::Command;

/// The target triple guest binaries are built for.
pub const GUEST_TARGET: &str = "x86_64-unknown-linux-gnu";

/// Variables a build script inherits from the outer cargo that would change
/// a nested build: flags meant for the harness (`CARGO_ENCODED_RUSTFLAGS`
/// wins over `RUSTFLAGS`), its target dir and target, and clippy's wrapper
/// (`cargo clippy` would lint guest-tests and fingerprint it differently).
pub const OUTER_CARGO_ENV: &[&str] = &[
    "CARGO_ENCODED_RUSTFLAGS",
    "CARGO_BUILD_RUSTFLAGS",
    "CARGO_TARGET_DIR",
    "CARGO_BUILD_TARGET",
    "CARGO_BUILD_TARGET_DIR",
    "RUSTC_WORKSPACE_WRAPPER",
];

/// The `cargo build` command for the guest binaries (pure: returned, not
/// run): a release build of `guest-tests` for [`GUEST_TARGET`] with
/// `+crt-static`, in `target_dir` (never the host build's, so its flags and
/// lock never mix with the host build's).
pub fn build_command(workspace: &Path, target_dir: &Path) -> Command {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut c = Command::new(cargo);
    c.current_dir(workspace)
        .args([
            "build",
            "--quiet",
            "--release",
            "--package",
            "guest-tests",
            "--bins",
        ])
        .args(["--target", GUEST_TARGET])
        .arg("--target-dir")
        .arg(target_dir);
    for var in OUTER_CARGO_ENV {
        c.env_remove(var);
    }
    c.env("RUSTFLAGS", "-C target-feature=+crt-static");
    c
}

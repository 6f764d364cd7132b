//! `cargo xtask matrix [ARGS]`: builds the harness in release mode and
//! execs its `matrix` subcommand with ARGS (the guest binaries are built
//! into the harness; it fetches the kernels itself).

use anyhow::Result;
use xshell::{cmd, Shell};

pub fn run(sh: &Shell, args: &[String]) -> Result<()> {
    cmd!(sh, "cargo build --quiet --release --package harness").run()?;
    let bin = sh.current_dir().join("target/release/harness");
    exec(&bin, args)
}

#[cfg(unix)]
fn exec(bin: &std::path::Path, args: &[String]) -> Result<()> {
    use std::os::unix::process::CommandExt;
    let err = std::process::Command::new(bin)
        .arg("matrix")
        .args(args)
        .exec();
    Err(anyhow::anyhow!("cannot exec {}: {err}", bin.display()))
}

//! The static guest binaries: built from this workspace's `guest-tests`
//! crate with `+crt-static` into a target dir of their own (so the host
//! build's flags never mix with them), or taken from a directory given in
//! `HARNESS_GUEST_BIN_DIR`.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Errors building or locating guest binaries.
#[derive(Debug, thiserror::Error)]
pub enum GuestBinError {
    /// `cargo build` failed.
    #[error("building the guest binaries failed ({status}); command: {command}")]
    Build {
        /// Exit status.
        status: String,
        /// The command line, to rerun by hand.
        command: String,
    },
    /// cargo could not be started.
    #[error("cannot run cargo to build the guest binaries: {0}")]
    Cargo(#[source] std::io::Error),
    /// A binary is missing.
    #[error("guest binary {name:?} not found in {dir}")]
    Missing {
        /// Its name.
        name: String,
        /// Where it was looked for.
        dir: PathBuf,
    },
    /// A binary is not a static x86-64 ELF executable.
    #[error("{path}: {why}; guest binaries must be static x86-64 executables (build with RUSTFLAGS='-C target-feature=+crt-static' or gcc -static)")]
    NotStatic {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        why: String,
    },
}

/// The target triple guest binaries are built for.
pub const GUEST_TARGET: &str = "x86_64-unknown-linux-gnu";

/// The workspace this harness was built from.
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."))
}

/// The `cargo build` command for the guest binaries (pure: returned, not run).
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
        .arg(target_dir)
        .env("RUSTFLAGS", "-C target-feature=+crt-static");
    c
}

/// Where the guest binaries are.
#[derive(Debug, Clone)]
pub struct GuestBins {
    /// Directory holding `guest-init`, `smoke`, ...
    pub dir: PathBuf,
}

impl GuestBins {
    /// `HARNESS_GUEST_BIN_DIR` if set, else builds them (incrementally)
    /// under `<workspace>/target/guest`.
    pub fn locate_or_build() -> Result<GuestBins, GuestBinError> {
        if let Some(dir) = std::env::var_os("HARNESS_GUEST_BIN_DIR") {
            return Ok(GuestBins { dir: dir.into() });
        }
        let ws = workspace_root();
        let target_dir = ws.join("target").join("guest");
        let mut cmd = build_command(&ws, &target_dir);
        let status = cmd.status().map_err(GuestBinError::Cargo)?;
        if !status.success() {
            return Err(GuestBinError::Build {
                status: status.to_string(),
                command: format!("{cmd:?}"),
            });
        }
        Ok(GuestBins {
            dir: target_dir.join(GUEST_TARGET).join("release"),
        })
    }

    /// Path of a built-in binary, checked to be static.
    pub fn path(&self, name: &str) -> Result<PathBuf, GuestBinError> {
        let p = self.dir.join(name);
        if !p.is_file() {
            return Err(GuestBinError::Missing {
                name: name.into(),
                dir: self.dir.clone(),
            });
        }
        check_static(&p)?;
        Ok(p)
    }
}

/// Checks an ELF file is a static x86-64 executable: no `PT_INTERP`
/// (a dynamic binary cannot run in the initramfs, which has no libc).
pub fn check_static(path: &Path) -> Result<(), GuestBinError> {
    let bytes = std::fs::read(path).map_err(|e| GuestBinError::NotStatic {
        path: path.into(),
        why: format!("cannot read: {e}"),
    })?;
    elf_static(&bytes).map_err(|why| GuestBinError::NotStatic {
        path: path.into(),
        why,
    })
}

fn elf_static(b: &[u8]) -> Result<(), String> {
    if b.len() < 64 || &b[..4] != b"\x7fELF" {
        return Err("not an ELF file".into());
    }
    if b[4] != 2 || b[5] != 1 || u16::from_le_bytes([b[18], b[19]]) != 62 {
        return Err("not a little-endian 64-bit x86-64 ELF".into());
    }
    let rd64 = |o: usize| u64::from_le_bytes(b[o..o + 8].try_into().unwrap_or([0; 8]));
    let rd16 = |o: usize| u16::from_le_bytes([b[o], b[o + 1]]);
    let (phoff, phentsize, phnum) = (
        rd64(0x20) as usize,
        rd16(0x36) as usize,
        rd16(0x38) as usize,
    );
    for i in 0..phnum {
        let o = phoff.saturating_add(i.saturating_mul(phentsize));
        let Some(ty) = b.get(o..o + 4) else {
            return Err("truncated program headers".into());
        };
        if u32::from_le_bytes(ty.try_into().unwrap_or([0; 4])) == 3 {
            return Err("dynamically linked (has an ELF interpreter)".into());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dynamic_host_binaries_are_refused() {
        let e = check_static(Path::new("/bin/sh")).unwrap_err().to_string();
        assert!(e.contains("dynamically linked"), "{e}");
        let e = elf_static(b"#!/bin/sh\necho hi\n").unwrap_err();
        assert!(e.contains("not an ELF"));
    }

    #[test]
    fn build_command_is_static_and_separate() {
        let c = build_command(Path::new("/ws"), Path::new("/ws/target/guest"));
        let args: Vec<_> = c
            .get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        assert!(args
            .windows(2)
            .any(|w| w == ["--target-dir", "/ws/target/guest"]));
        assert!(args.windows(2).any(|w| w == ["--target", GUEST_TARGET]));
        assert!(c.get_envs().any(|(k, v)| k == "RUSTFLAGS"
            && v.is_some_and(|v| v.to_string_lossy().contains("crt-static"))));
    }
}

//! The static guest binaries: built from this workspace's `guest-tests`
//! crate with `+crt-static` by the build script (`guestbin/cargo.rs`: a
//! target dir of its own, so the host build's flags never mix with them),
//! embedded in the binary and written into the cache once
//! (`<cache>/guest-bins/<sha256>/`); or taken from a directory given in
//! `HARNESS_GUEST_BIN_DIR`. Nothing is built at run time.

mod cargo;

use crate::kernel::cache::{Cache, CacheError};
use crate::kernel::embedded::{materialise, Tree};
use std::path::{Path, PathBuf};

pub use cargo::{build_command, GUEST_TARGET, OUTER_CARGO_ENV};

/// Environment variable naming a directory of guest binaries to use
/// instead of the embedded ones.
pub const GUEST_BIN_DIR_ENV: &str = "HARNESS_GUEST_BIN_DIR";

/// Errors locating guest binaries.
#[derive(Debug, thiserror::Error)]
pub enum GuestBinError {
    /// The embedded binaries could not be written into the cache.
    #[error("writing the guest binaries into the cache: {0}")]
    Cache(#[from] CacheError),
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

include!(concat!(env!("OUT_DIR"), "/guest_bins.rs"));

mod listed {
    include!(concat!(env!("OUT_DIR"), "/guest_cases.rs"));
}

/// The cases of futex binary `name`, as its `--list` printed them when
/// this harness was built; `None` for a binary that lists none (smoke,
/// topology, bench, faults).
pub fn cases(name: &str) -> Option<&'static [&'static str]> {
    listed::GUEST_CASES
        .iter()
        .find(|(b, _)| *b == name)
        .map(|(_, c)| *c)
}

/// The guest binaries built into this harness (every one of
/// `guest_tests::binaries::ALL`), with their hash.
pub fn embedded() -> &'static Tree {
    guest_bins()
}

/// Where the guest binaries are.
#[derive(Debug, Clone)]
pub struct GuestBins {
    /// Directory holding `guest-init`, `smoke`, ...
    pub dir: PathBuf,
    /// Whether [`GuestBins::path`] checks the file (not for a plan of
    /// where they would be: `--dry-run`).
    checked: bool,
}

impl GuestBins {
    /// `HARNESS_GUEST_BIN_DIR` if set, else the embedded binaries, written
    /// into the default cache the first time (see [`GuestBins::embedded_in`]).
    /// The name is historical: nothing is built any more.
    pub fn locate_or_build() -> Result<GuestBins, GuestBinError> {
        if let Some(dir) = std::env::var_os(GUEST_BIN_DIR_ENV) {
            return Ok(GuestBins {
                dir: dir.into(),
                checked: true,
            });
        }
        GuestBins::embedded_in(&Cache::from_env()?)
    }

    /// The embedded binaries in `<cache>/guest-bins/<sha256>/` (written,
    /// executable, unless they are there already).
    pub fn embedded_in(cache: &Cache) -> Result<GuestBins, GuestBinError> {
        let dir = materialise(cache, "guest-bins", embedded(), 0o755)?;
        Ok(GuestBins { dir, checked: true })
    }

    /// Where the binaries would be, not checked (`--dry-run`: nothing is
    /// unpacked for a plan).
    pub fn planned(dir: PathBuf) -> GuestBins {
        GuestBins {
            dir,
            checked: false,
        }
    }

    /// Checks a binary from elsewhere (busybox) to be static, as
    /// [`GuestBins::path`] does its own: not in a plan.
    pub fn check_external(&self, path: &Path) -> Result<(), GuestBinError> {
        if self.checked {
            check_static(path)?;
        }
        Ok(())
    }

    /// Path of a built-in binary, checked to be static.
    pub fn path(&self, name: &str) -> Result<PathBuf, GuestBinError> {
        let p = self.dir.join(name);
        if !self.checked {
            return Ok(p);
        }
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
    fn every_guest_binary_is_embedded_static() {
        let t = embedded();
        let names: Vec<&str> = t.files.iter().map(|(n, _)| *n).collect();
        let all: Vec<&str> = guest_tests::binaries::ALL.iter().map(|b| b.name).collect();
        assert_eq!(names, all);
        for (name, bytes) in t.files {
            elf_static(bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
        }
        t.assert_hash();
    }

    #[test]
    fn embedded_binaries_are_written_once_into_the_cache() {
        let dir = tempfile::tempdir().unwrap();
        let cache = Cache::at(dir.path());
        let bins = GuestBins::embedded_in(&cache).unwrap();
        assert_eq!(
            bins.dir,
            dir.path().join("guest-bins").join(embedded().hash)
        );
        let smoke = bins.path("smoke").unwrap();
        let mode = std::fs::metadata(&smoke).unwrap().permissions();
        assert_eq!(
            std::os::unix::fs::PermissionsExt::mode(&mode) & 0o111,
            0o111
        );
        assert_eq!(GuestBins::embedded_in(&cache).unwrap().dir, bins.dir);
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
        // The outer build's flags and wrapper are removed, not inherited.
        for var in ["CARGO_ENCODED_RUSTFLAGS", "RUSTC_WORKSPACE_WRAPPER"] {
            assert!(c.get_envs().any(|(k, v)| k == var && v.is_none()), "{var}");
        }
    }
}

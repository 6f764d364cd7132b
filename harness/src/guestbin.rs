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
    use object::elf::{FileHeader64, EM_X86_64, PT_INTERP};
    use object::read::elf::{FileHeader, ProgramHeader};
    use object::{FileKind, LittleEndian as LE};
    let header = match FileKind::parse(b) {
        // A truncated header is no ELF file, as an unreadable one.
        Ok(FileKind::Elf64) => FileHeader64::<LE>::parse(b).map_err(|_| "not an ELF file")?,
        Ok(FileKind::Elf32) => return Err("not a little-endian 64-bit x86-64 ELF".into()),
        _ => return Err("not an ELF file".into()),
    };
    if header.endian().is_err() || header.e_machine(LE) != EM_X86_64 {
        return Err("not a little-endian 64-bit x86-64 ELF".into());
    }
    let phdrs = header
        .program_headers(LE, b)
        .map_err(|_| "truncated program headers")?;
    if phdrs.iter().any(|ph| ph.p_type(LE) == PT_INTERP) {
        return Err("dynamically linked (has an ELF interpreter)".into());
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
        // This test program, linked as the host links it: dynamic.
        let me = std::env::current_exe().unwrap();
        let e = check_static(&me).unwrap_err().to_string();
        assert!(e.contains("dynamically linked"), "{e}");
    }

    #[test]
    fn damaged_copies_of_a_static_binary_are_refused() {
        use object::elf;
        let (_, smoke) = embedded()
            .files
            .iter()
            .find(|(n, _)| *n == "smoke")
            .unwrap();
        let with = |at: usize, bytes: &[u8]| {
            let mut b = smoke.to_vec();
            b[at..at + bytes.len()].copy_from_slice(bytes);
            elf_static(&b)
        };
        // The first program header's p_type becomes PT_INTERP.
        let phoff = {
            use object::read::elf::FileHeader;
            let h = elf::FileHeader64::<object::LittleEndian>::parse(*smoke).unwrap();
            h.e_phoff(object::LittleEndian) as usize
        };
        let other = Err("not a little-endian 64-bit x86-64 ELF".to_string());
        for (what, got, want) in [
            ("as it is", elf_static(smoke), Ok(())),
            // e_ident[EI_CLASS], e_ident[EI_DATA], e_machine.
            ("32-bit class", with(4, &[elf::ELFCLASS32]), other.clone()),
            ("big-endian", with(5, &[elf::ELFDATA2MSB]), other.clone()),
            ("aarch64", with(18, &elf::EM_AARCH64.to_le_bytes()), other),
            (
                "header cut",
                elf_static(&smoke[..40]),
                Err("not an ELF file".into()),
            ),
            (
                "program headers cut",
                elf_static(&smoke[..64]),
                Err("truncated program headers".into()),
            ),
            (
                "a PT_INTERP",
                with(phoff, &elf::PT_INTERP.to_le_bytes()),
                Err("dynamically linked (has an ELF interpreter)".into()),
            ),
        ] {
            assert_eq!(got, want, "{what}");
        }
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

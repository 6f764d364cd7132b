//! The static guest binaries, one set per guest architecture: built from
//! this workspace's `guest-tests` crate with `+crt-static` by the build
//! script (`guestbin/cargo.rs`: a target dir of its own, so the host
//! build's flags never mix with them; the arm64 set cross-built when the
//! machine has the toolchain), embedded in the binary and written into the
//! cache once (`<cache>/guest-bins/<sha256>/`, the set's own hash); or taken
//! from a directory given in `HARNESS_GUEST_BIN_DIR` (x86-64) or
//! `HARNESS_GUEST_BIN_DIR_ARM64`. Nothing is built at run time.

mod cargo;

use crate::arch::Arch;
use crate::kernel::cache::{Cache, CacheError};
use crate::kernel::embedded::{materialise, Tree};
use std::path::{Path, PathBuf};

pub use cargo::{
    build_command, build_command_for, find_rustc, has_std, target_libdir, CrossTarget, Missing,
    Rustc, DEBIAN_RUSTC, GUEST_TARGET, OUTER_CARGO_ENV,
};

/// Environment variable naming a directory of x86-64 guest binaries to use
/// instead of the embedded ones.
pub const GUEST_BIN_DIR_ENV: &str = "HARNESS_GUEST_BIN_DIR";
/// The same for arm64 guest binaries.
pub const GUEST_BIN_DIR_ARM64_ENV: &str = "HARNESS_GUEST_BIN_DIR_ARM64";

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
    /// A binary is not a static ELF executable of the guest's architecture.
    #[error("{path}: {why}; guest binaries must be static {} executables (build with RUSTFLAGS='-C target-feature=+crt-static' or gcc -static)", arch_words(*arch))]
    NotStatic {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        why: String,
        /// The architecture it was checked for.
        arch: Arch,
    },
    /// This harness was built on a machine without the toolchain for
    /// `arch`: its table of `arch` binaries is empty.
    #[error("{}", not_built_in(*arch))]
    NotBuiltIn {
        /// The guest architecture asked for.
        arch: Arch,
    },
}

/// How messages name an architecture's binaries.
fn arch_words(arch: Arch) -> &'static str {
    match arch {
        Arch::X86_64 => "x86-64",
        Arch::Arm64 => "arm64 (aarch64)",
    }
}

/// What to install, and that the harness must then be built again (the
/// set is embedded at build time).
fn not_built_in(arch: Arch) -> String {
    let t = cross_target(arch);
    format!(
        "this harness was built without {arch} guest binaries (the machine that built it had no {} toolchain): \
         run `harness setup --arch {arch}` (it installs {}; on Debian after `dpkg --add-architecture {}`; \
         a rustup toolchain may take `rustup target add {}` instead of the Rust packages), \
         then rebuild or reinstall the harness (`cargo build`, or `cargo install --path harness`) so it embeds them; \
         or set {} to a directory of static {arch} guest binaries",
        t.triple,
        t.packages.join(" "),
        arch.debian(),
        t.triple,
        bin_dir_env(arch),
    )
}

include!(concat!(env!("OUT_DIR"), "/guest_bins.rs"));
include!(concat!(env!("OUT_DIR"), "/guest_bins_arm64.rs"));

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

/// The x86-64 guest binaries built into this harness (every one of
/// `guest_tests::binaries::ALL`), with their hash.
pub fn embedded() -> &'static Tree {
    guest_bins()
}

/// The `arch` guest binaries built into this harness: every one of
/// `guest_tests::binaries::ALL`, or none (arm64, built without its
/// toolchain: see [`built_in`]).
pub fn embedded_for(arch: Arch) -> &'static Tree {
    match arch {
        Arch::X86_64 => guest_bins(),
        Arch::Arm64 => guest_bins_arm64(),
    }
}

/// Whether this harness has the `arch` guest binaries built in.
pub fn built_in(arch: Arch) -> bool {
    !embedded_for(arch).files.is_empty()
}

/// How the build script builds the `arch` set.
pub fn cross_target(arch: Arch) -> &'static CrossTarget {
    match arch {
        Arch::X86_64 => &cargo::X86_64,
        Arch::Arm64 => &cargo::ARM64,
    }
}

/// The variable naming a directory of `arch` guest binaries that replace
/// the embedded ones.
pub fn bin_dir_env(arch: Arch) -> &'static str {
    match arch {
        Arch::X86_64 => GUEST_BIN_DIR_ENV,
        Arch::Arm64 => GUEST_BIN_DIR_ARM64_ENV,
    }
}

/// Where the embedded `arch` binaries are (or would be) in `cache`, not
/// written (a plan's path); [`GuestBinError::NotBuiltIn`] without them.
pub fn embedded_dir(cache: &Cache, arch: Arch) -> Result<PathBuf, GuestBinError> {
    if !built_in(arch) {
        return Err(GuestBinError::NotBuiltIn { arch });
    }
    Ok(cache.path("guest-bins").join(embedded_for(arch).hash))
}

/// Where the guest binaries are.
#[derive(Debug, Clone)]
pub struct GuestBins {
    /// Directory holding `guest-init`, `smoke`, ...
    pub dir: PathBuf,
    /// Whether [`GuestBins::path`] checks the file (not for a plan of
    /// where they would be: `--dry-run`).
    checked: bool,
    /// The architecture they are for.
    arch: Arch,
}

impl GuestBins {
    /// The x86-64 binaries: [`GuestBins::locate_for`] `X86_64`. The name is
    /// historical: nothing is built any more.
    pub fn locate_or_build() -> Result<GuestBins, GuestBinError> {
        GuestBins::locate_for(Arch::X86_64)
    }

    /// The `arch` binaries: the directory in [`bin_dir_env`] if set, else
    /// the embedded ones, written into the default cache the first time (see
    /// [`GuestBins::embedded_in_for`]).
    pub fn locate_for(arch: Arch) -> Result<GuestBins, GuestBinError> {
        if let Some(dir) = std::env::var_os(bin_dir_env(arch)).filter(|d| !d.is_empty()) {
            return Ok(GuestBins {
                dir: dir.into(),
                checked: true,
                arch,
            });
        }
        GuestBins::embedded_in_for(&Cache::from_env()?, arch)
    }

    /// The embedded x86-64 binaries in the cache
    /// ([`GuestBins::embedded_in_for`] `X86_64`).
    pub fn embedded_in(cache: &Cache) -> Result<GuestBins, GuestBinError> {
        GuestBins::embedded_in_for(cache, Arch::X86_64)
    }

    /// The embedded `arch` binaries in `<cache>/guest-bins/<sha256>/`
    /// (written, executable, unless they are there already);
    /// [`GuestBinError::NotBuiltIn`] when this harness has none.
    pub fn embedded_in_for(cache: &Cache, arch: Arch) -> Result<GuestBins, GuestBinError> {
        if !built_in(arch) {
            return Err(GuestBinError::NotBuiltIn { arch });
        }
        let dir = materialise(cache, "guest-bins", embedded_for(arch), 0o755)?;
        Ok(GuestBins {
            dir,
            checked: true,
            arch,
        })
    }

    /// Where x86-64 binaries would be, not checked ([`GuestBins::planned_for`]).
    pub fn planned(dir: PathBuf) -> GuestBins {
        GuestBins::planned_for(dir, Arch::X86_64)
    }

    /// Where the `arch` binaries would be, not checked (`--dry-run`:
    /// nothing is unpacked for a plan).
    pub fn planned_for(dir: PathBuf, arch: Arch) -> GuestBins {
        GuestBins {
            dir,
            checked: false,
            arch,
        }
    }

    /// The architecture these binaries are for.
    pub fn arch(&self) -> Arch {
        self.arch
    }

    /// Checks a binary from elsewhere (busybox) to be static and of this
    /// set's architecture, as [`GuestBins::path`] does its own: not in a plan.
    pub fn check_external(&self, path: &Path) -> Result<(), GuestBinError> {
        if self.checked {
            check_static_for(path, self.arch)?;
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
        check_static_for(&p, self.arch)?;
        Ok(p)
    }
}

/// Checks an ELF file is a static x86-64 executable
/// ([`check_static_for`] `X86_64`).
pub fn check_static(path: &Path) -> Result<(), GuestBinError> {
    check_static_for(path, Arch::X86_64)
}

/// Checks an ELF file is a static executable for `arch`: its
/// [`Arch::elf_machine`], no `PT_INTERP` (a dynamic binary cannot run in
/// the initramfs, which has no libc).
pub fn check_static_for(path: &Path, arch: Arch) -> Result<(), GuestBinError> {
    let not_static = |why| GuestBinError::NotStatic {
        path: path.into(),
        why,
        arch,
    };
    let bytes = std::fs::read(path).map_err(|e| not_static(format!("cannot read: {e}")))?;
    elf_static_for(&bytes, arch).map_err(not_static)
}

#[cfg(test)]
fn elf_static(b: &[u8]) -> Result<(), String> {
    elf_static_for(b, Arch::X86_64)
}

fn elf_static_for(b: &[u8], arch: Arch) -> Result<(), String> {
    use object::elf::{FileHeader64, PT_INTERP};
    use object::read::elf::{FileHeader, ProgramHeader};
    use object::{FileKind, LittleEndian as LE};
    let other = || format!("not a little-endian 64-bit {} ELF", arch_words(arch));
    let header = match FileKind::parse(b) {
        // A truncated header is no ELF file, as an unreadable one.
        Ok(FileKind::Elf64) => FileHeader64::<LE>::parse(b).map_err(|_| "not an ELF file")?,
        Ok(FileKind::Elf32) => return Err(other()),
        _ => return Err("not an ELF file".into()),
    };
    if header.endian().is_err() || header.e_machine(LE) != arch.elf_machine() {
        return Err(other());
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
    fn arm64_binaries_are_checked_for_their_machine() {
        let (_, smoke) = embedded()
            .files
            .iter()
            .find(|(n, _)| *n == "smoke")
            .unwrap();
        // The x86-64 smoke is no arm64 binary, and the message says which.
        assert_eq!(
            elf_static_for(smoke, Arch::Arm64),
            Err("not a little-endian 64-bit arm64 (aarch64) ELF".to_string())
        );
        let mut b = smoke.to_vec();
        b[18..20].copy_from_slice(&object::elf::EM_AARCH64.to_le_bytes());
        assert_eq!(elf_static_for(&b, Arch::Arm64), Ok(()));
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("smoke");
        std::fs::write(&p, smoke).unwrap();
        let e = check_static_for(&p, Arch::Arm64).unwrap_err().to_string();
        assert!(
            e.ends_with("guest binaries must be static arm64 (aarch64) executables (build with RUSTFLAGS='-C target-feature=+crt-static' or gcc -static)"),
            "{e}"
        );
        let bins = GuestBins::planned_for(d.path().into(), Arch::Arm64);
        assert_eq!(bins.arch(), Arch::Arm64);
        // A plan checks nothing; the same directory as a checked set does.
        assert!(bins.path("smoke").is_ok());
        let checked = GuestBins {
            checked: true,
            ..bins
        };
        assert!(matches!(
            checked.path("smoke"),
            Err(GuestBinError::NotStatic {
                arch: Arch::Arm64,
                ..
            })
        ));
    }

    #[test]
    fn every_arm64_guest_binary_is_embedded_static_when_built_in() {
        let t = embedded_for(Arch::Arm64);
        if !built_in(Arch::Arm64) {
            // Built without the toolchain: asked for, the set says what to do.
            let dir = tempfile::tempdir().unwrap();
            let e = GuestBins::embedded_in_for(&Cache::at(dir.path()), Arch::Arm64).unwrap_err();
            assert!(matches!(e, GuestBinError::NotBuiltIn { arch: Arch::Arm64 }));
            assert!(embedded_dir(&Cache::at(dir.path()), Arch::Arm64).is_err());
            return;
        }
        let names: Vec<&str> = t.files.iter().map(|(n, _)| *n).collect();
        let all: Vec<&str> = guest_tests::binaries::ALL.iter().map(|b| b.name).collect();
        assert_eq!(names, all);
        for (name, bytes) in t.files {
            elf_static_for(bytes, Arch::Arm64).unwrap_or_else(|e| panic!("{name}: {e}"));
        }
        t.assert_hash();
        assert_ne!(t.hash, embedded().hash);
        let dir = tempfile::tempdir().unwrap();
        let cache = Cache::at(dir.path());
        let bins = GuestBins::embedded_in_for(&cache, Arch::Arm64).unwrap();
        assert_eq!(bins.dir, dir.path().join("guest-bins").join(t.hash));
        assert_eq!(embedded_dir(&cache, Arch::Arm64).unwrap(), bins.dir);
        assert!(bins.path("guest-init").is_ok());
    }

    #[test]
    fn without_arm64_binaries_the_error_says_what_to_install_and_to_rebuild() {
        let e = GuestBinError::NotBuiltIn { arch: Arch::Arm64 }.to_string();
        for part in [
            "this harness was built without arm64 guest binaries",
            "harness setup --arch arm64",
            "gcc-aarch64-linux-gnu libc6-dev-arm64-cross rustc-web libstd-rust-web-dev:arm64",
            "dpkg --add-architecture arm64",
            "rustup target add aarch64-unknown-linux-gnu",
            "then rebuild or reinstall the harness",
            "HARNESS_GUEST_BIN_DIR_ARM64",
        ] {
            assert!(e.contains(part), "{part:?} not in {e}");
        }
        assert_eq!(bin_dir_env(Arch::X86_64), "HARNESS_GUEST_BIN_DIR");
        assert!(built_in(Arch::X86_64));
    }

    /// `name -> number` of a kernel syscall table's entries whose ABI is
    /// one of `abis` (`<nr> <abi> <name> [<entry> ...]`).
    fn syscall_table(text: &str, abis: &[&str]) -> std::collections::BTreeMap<String, i64> {
        text.lines()
            .map(|l| l.split('#').next().unwrap_or(""))
            .filter_map(|l| {
                let mut w = l.split_whitespace();
                let (nr, abi, name) = (w.next()?, w.next()?, w.next()?);
                abis.contains(&abi)
                    .then(|| Some((name.to_string(), nr.parse().ok()?)))
                    .flatten()
            })
            .collect()
    }

    #[test]
    fn syscall_tables_are_read_by_abi() {
        let t = syscall_table(
            "# comment\n98\ttime32\tfutex\tsys_futex_time32\n98\t64\tfutex\tsys_futex\n454\tcommon\tfutex_wake\tsys_futex_wake\n512\tx32\trt_sigaction\n",
            &["common", "64"],
        );
        assert_eq!(
            t.into_iter().collect::<Vec<_>>(),
            [("futex".to_string(), 98), ("futex_wake".to_string(), 454)]
        );
    }

    /// Both of the guest's syscall tables against the kernel's own, in a
    /// 7.3 work tree a build left in the cache (`7.3`, `7.3-gdb`, which
    /// `cargo xtask ci` builds, or `7.3` for arm64: every one holds both
    /// architectures' tables).
    #[test]
    fn guest_syscall_numbers_match_the_73_tree() {
        let on = std::env::var("HARNESS_KBUILD_TESTS").is_ok_and(|v| v == "1");
        assert!(
            on || std::env::var_os("CI").is_none(),
            "CI must run the real-tree tests: set HARNESS_KBUILD_TESTS=1 (cargo xtask ci does)"
        );
        if !on {
            eprintln!("skipped: set HARNESS_KBUILD_TESTS=1 (needs the 7.3 tree of `harness kernel build 7.3`)");
            return;
        }
        let cache = Cache::from_env().unwrap();
        use crate::kernel::build::{arch_name, work_rel};
        let trees: Vec<_> = [
            arch_name("7.3", Arch::X86_64),
            arch_name("7.3-gdb", Arch::X86_64),
            arch_name("7.3", Arch::Arm64),
        ]
        .iter()
        .map(|name| cache.path(work_rel(name)).join("src"))
        .collect();
        let src = trees
            .iter()
            .find(|src| src.join("Makefile").is_file())
            .unwrap_or_else(|| {
                panic!("none of {trees:?} has a Makefile: run `harness kernel build 7.3`")
            });
        let makefile = std::fs::read_to_string(src.join("Makefile"))
            .unwrap_or_else(|e| panic!("{}: {e}", src.display()));
        assert!(
            makefile.contains("\nVERSION = 7\nPATCHLEVEL = 3\n"),
            "{}: not a 7.3 tree",
            src.display()
        );
        use guest_tests::sys::nr;
        // arm64's 64-bit ABIs: arch/arm64/kernel/Makefile.syscalls.
        let arm64_abis = ["common", "64", "renameat", "rlimit", "memfd_secret"];
        for (file, abis, ours) in [
            (
                "arch/x86/entry/syscalls/syscall_64.tbl",
                &["common", "64"][..],
                nr::x86_64::TABLE,
            ),
            ("scripts/syscall.tbl", &arm64_abis[..], nr::generic::TABLE),
        ] {
            let path = src.join(file);
            let text = std::fs::read_to_string(&path)
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            let kernel = syscall_table(&text, abis);
            for (name, number) in ours {
                assert_eq!(kernel.get(*name), Some(number), "{file}: {name}");
            }
        }
    }
}

//! The kernel's own futex selftests (`tools/testing/selftests/futex/functional`),
//! built from a kernel source tree and run through the harness next to ours.
//!
//! * Source: Debian's `linux-source-X.Y` (fetched and verified through
//!   [`DebianMirror`](crate::kernel::debian::DebianMirror), the tarball
//!   unpacked into a temporary directory, a few big directories the build
//!   never reads left out) or a local kernel tree
//!   (the one a source-built kernel uses; it must be pristine: `make O=`
//!   refuses trees configured in place).
//! * Build: with the tree's own Makefiles: `make O=<obj> headers`, then
//!   `make -C tools/testing/selftests/futex/functional OUTPUT=<out>
//!   KHDR_INCLUDES="-isystem <obj>/usr/include" CC="gcc -static"`. The MPOL
//!   part of `futex_numa_mpol` needs libnuma >= 2.0.18: a newer Debian
//!   suite's `libnuma-dev` .deb is fetched (verified like everything else from
//!   the archive) and unpacked for its static `libnuma.a`, never installed.
//! * Cache: `<cache>/kselftest/futex/<key>/` with the static binaries and a
//!   `manifest.json`; `key` hashes the source identity, the gcc version, the
//!   libnuma package and [`RECIPE`].
//! * arm64 guests ([`prepare_for`] with [`Arch::Arm64`](crate::arch::Arch)):
//!   cross-built (`ARCH=arm64` headers, `CC="aarch64-linux-gnu-gcc
//!   -static"`), keyed with the architecture, without libnuma for now.
//! * Run: in the order and with the arguments of the tree's `run.sh`, then
//!   the other `TEST_GEN_PROGS` the kselftest runner would run (minus manual
//!   tools, see [`MANUAL_TOOLS`]). Each program prints KTAP (`TAP version
//!   13`) which guest-init nests as is.
//! * Compare: [`MAPPING`] says which of our cases check the behaviour an
//!   upstream case checks; [`compare()`] puts both verdicts side by side.

mod build;
mod catalog;
mod compare;
mod libnuma;
mod mapping;
mod source;
mod suite;

pub use build::{
    build, build_for, cache_key, compiler, gcc_version, make_commands, make_commands_for, prepare,
    prepare_for, static_elf_of, Build, Manifest, RECIPE,
};
pub use catalog::CASES;
pub use compare::{compare, compare_junit, read_junit, JunitCase, Verdict};
pub use libnuma::{
    fetch_libnuma, suite_packages, LibNuma, ISOC23_SHIM, LIBNUMA_MIN, LIBNUMA_SUITES,
};
pub use mapping::{mapping_for, pattern_matches, MAPPING};
pub use source::{source_spec, tree_hash, unpack_debian_source, SourceSpec};
pub use suite::{programs, resolve_suite, Program, MANUAL_TOOLS, PROGRAM_TIMEOUT};

use std::io;
use std::path::{Path, PathBuf};

/// The built-in suite that runs the upstream futex selftests.
pub const SUITE_FUTEX: &str = "kselftest-futex";

/// Where the futex functional selftests live in a kernel tree.
pub const FUTEX_DIR: &str = "tools/testing/selftests/futex/functional";

/// Errors preparing the upstream selftests.
#[derive(Debug, thiserror::Error)]
pub enum KselftestError {
    /// Bad `--kselftest-tree` value.
    #[error("kselftest source {given:?}: {why}")]
    BadSource {
        /// What was given.
        given: String,
        /// Why it does not work.
        why: String,
    },
    /// A file given to `kselftest compare` is not JUnit XML.
    #[error("{}:{line}:{col}: not a JUnit document: {why}", file.display())]
    BadJunit {
        /// The file.
        file: PathBuf,
        /// 1-based line of the error.
        line: u32,
        /// 1-based column.
        col: u32,
        /// What the XML parser says.
        why: String,
    },
    /// No source given and none derivable from the kernel.
    #[error("suite {suite} needs a kernel source tree: pass --kselftest-tree DIR or --kselftest-tree debian:X.Y (the kernel {kernel:?} names no version)")]
    NoSource {
        /// The suite.
        suite: String,
        /// The kernel spec.
        kernel: String,
    },
    /// Debian archive trouble.
    #[error(transparent)]
    Debian(#[from] crate::kernel::debian::DebianError),
    /// Cache trouble.
    #[error(transparent)]
    Cache(#[from] crate::kernel::cache::CacheError),
    /// A file operation failed.
    #[error("{what} {path}: {source}")]
    Io {
        /// What was being done.
        what: &'static str,
        /// On what.
        path: PathBuf,
        /// Why it failed.
        #[source]
        source: io::Error,
    },
    /// Unpacking Debian's source tarball failed.
    #[error("unpacking the source tarball of {deb}: {source}")]
    Unpack {
        /// The `linux-source` package.
        deb: PathBuf,
        /// Why.
        #[source]
        source: crate::kernel::source::SourceError,
    },
    /// A download failed.
    #[error("downloading {url}: {why}")]
    Download {
        /// The URL.
        url: String,
        /// Why.
        why: String,
    },
    /// A build step failed.
    #[error("{step} failed ({status}); last output:\n{tail}\nfull log: {log}")]
    Build {
        /// The step.
        step: String,
        /// Its exit status.
        status: String,
        /// The end of its output.
        tail: String,
        /// The full log.
        log: PathBuf,
    },
    /// The build produced nothing runnable.
    #[error("the build of {dir} produced no test programs (log: {log})")]
    NoPrograms {
        /// The selftest directory.
        dir: PathBuf,
        /// The build log.
        log: PathBuf,
    },
    /// The tree's kselftest_harness.h has no timeout line we know.
    #[error("{path}: no `#define TEST_TIMEOUT_DEFAULT 30` line: this kselftest_harness.h is not the one the build knows how to give a TCG timeout (see kselftest::build::TEST_TIMEOUT_SECS)")]
    HarnessHeader {
        /// The header read.
        path: PathBuf,
    },
    /// A built program is not static.
    #[error(transparent)]
    Bin(#[from] crate::guestbin::GuestBinError),
    /// Not a kselftest suite, and not a built-in one either.
    #[error(transparent)]
    Suite(#[from] crate::suite::SuiteError),
}

fn io_err<'a>(what: &'static str, path: &'a Path) -> impl FnOnce(io::Error) -> KselftestError + 'a {
    move |source| KselftestError::Io {
        what,
        path: path.to_path_buf(),
        source,
    }
}

/// Options of [`prepare`].
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Debian mirror override (as `--debian-mirror`).
    pub mirror: Option<String>,
    /// Rebuild even when cached.
    pub rebuild: bool,
    /// `make -j`; 0: the number of CPUs.
    pub jobs: usize,
}

/// Is `suite` one of the suites of this module?
pub fn is_kselftest_suite(suite: &str) -> bool {
    suite == SUITE_FUTEX
}

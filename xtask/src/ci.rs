//! `cargo xtask ci`: the full check CI runs (and a developer before pushing).

use anyhow::Result;
use xshell::{cmd, Shell};

/// `harness setup --yes --arch arm64` (what is missing installed, nothing
/// when all is there), the tests' own tools (`ci/install-test-deps.sh`),
/// fmt, clippy (-D warnings), the CI's own lint (actionlint, workflow
/// schema, shellcheck), 60 s of fuzzing (dev build), `harness kernel
/// build 7.3-gdb` and `7.3 --arch arm64`, then all tests with real VMs
/// enabled, on Debian's kernels and on those two, and the
/// real-kernel-tree configuration tests.
pub fn run(sh: &Shell) -> Result<()> {
    // One clean CI build is several GB of target/ (a CI machine once ran out
    // of disk linking the tests): no incremental state, which a one-off
    // build never reuses, and the free space said up front.
    let _incremental = sh.push_env("CARGO_INCREMENTAL", "0");
    let root = crate::project_root();
    cmd!(sh, "df -h {root}").run()?;
    // QEMU (from backports where the release's is too old for TCG),
    // virtiofsd, gpgv and the keyring, static glibc, the kernel build
    // tools, and arm64 guests' QEMU, firmware and cross toolchain: a fresh
    // machine gets them here, a ready one is told so. The builds below
    // rerun the harness' build script (apt's database changed), which then
    // embeds the arm64 guest binaries.
    cmd!(
        sh,
        "cargo run --quiet -p harness -- setup --yes --arch arm64"
    )
    .run()?;
    // What only the tests need (headless Chromium for the HTML report's
    // browser test): the CI's dependency, not the users', so not `setup`'s.
    cmd!(sh, "bash ci/install-test-deps.sh").run()?;
    cmd!(sh, "cargo fmt --all -- --check").run()?;
    cmd!(sh, "cargo clippy --workspace --all-targets -- -D warnings").run()?;
    cmd!(sh, "bash ci/lint.sh").run()?;
    // A short fuzz of the guest-output parsers (a finding fails CI and is
    // saved in the corpus, so `cargo test` replays it from then on). Here,
    // in this dev build of xtask, with its overflow checks and debug
    // assertions: about 8,700 inputs in 60 s, where the optimised `fuzz`
    // profile of `cargo xtask fuzz` does 18,000 in 20 s but first costs
    // CI a 4.6-minute build of its own (measured on 2 cores).
    crate::fuzz::fuzz_loop(&root, &["--seconds".into(), "60".into()])?;
    // The source-built kernel the VM tests also boot (LKDTM faults,
    // virtiofs built in, upstream selftests with IA32 compat): `7.3-gdb`,
    // which is `7.3` plus DWARF and the kernel's gdb scripts, so that one
    // x86-64 build serves every source-kernel test, the gdb test's
    // included (a second build, `7.3` beside `7.3-gdb`, cost CI about 6
    // minutes more from an empty cache). Built once into the user's cache
    // (336 s measured on 2 idle cores, the source's import included; a
    // cache hit in well under a second after that).
    let start = std::time::Instant::now();
    cmd!(sh, "cargo run --quiet -p harness -- kernel build 7.3-gdb").run()?;
    eprintln!(
        "xtask ci: source:7.3-gdb ready in {:.0} s",
        start.elapsed().as_secs_f64()
    );
    // The same definition cross-built for arm64 (its own fragment, work
    // tree and image; about 4 min on 2 idle cores without ccache, measured
    // 323 s from an empty cache, the source's import included).
    let start = std::time::Instant::now();
    cmd!(
        sh,
        "cargo run --quiet -p harness -- kernel build 7.3 --arch arm64"
    )
    .run()?;
    eprintln!(
        "xtask ci: source:7.3 for arm64 ready in {:.0} s",
        start.elapsed().as_secs_f64()
    );
    let _src = sh.push_env("HARNESS_SOURCE_KERNEL", "source:7.3-gdb");
    let _src_arm64 = sh.push_env("HARNESS_SOURCE_KERNEL_ARM64", "source:7.3");
    let _vm = sh.push_env("HARNESS_VM_TESTS", "1");
    // Fragment merging and the required-option check on the real 7.3 tree
    // (every shipped definition configures cleanly; a dropped option is
    // named with its `depends on`): a few minutes, on the tree just built.
    let _kbuild = sh.push_env("HARNESS_KBUILD_TESTS", "1");
    cmd!(sh, "cargo test --workspace").run()?;
    cmd!(sh, "du -sh {root}/target").run()?;
    Ok(())
}

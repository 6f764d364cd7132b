//! `harness doctor`: everything the harness may need from this host, one
//! [`Row`] each with its status and the exact fix. [`probe()`] gathers the
//! [`Facts`] (programs on a `PATH`, files under a prefix, QEMU and its
//! version, KVM, virtiofsd, the Debian mirror, the cache), [`rows`] judges
//! them (pure), and [`missing_for_default_run`] says what stops
//! `harness run --kernel debian:7.3.4 --suite smoke`. `harness setup`
//! ([`crate::setup`]) plans its installs from the same facts. The arm64
//! rows (QEMU's aarch64 emulator, the cross toolchain the build embeds the
//! arm64 guest binaries with, the firmware) say "arm64 guests only" and
//! never stop the default run.

pub mod os;
pub mod probe;

use crate::arch::Arch;
use crate::host::{self, Kvm, Qemu};
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

pub use os::{Distro, OsRelease};
pub use probe::{probe, Probe};

/// The Debian/Ubuntu package of `qemu-system-x86_64`.
pub const QEMU_PACKAGE: &str = "qemu-system-x86";
/// The Debian/Ubuntu package of `qemu-system-aarch64`.
pub const QEMU_ARM64_PACKAGE: &str = "qemu-system-arm";
/// The virtiofsd release `harness setup` builds where no package has it.
pub const VIRTIOFSD_VERSION: &str = "1.14.0";
/// Below this much free space in the cache a Debian kernel may not fit.
pub const MIN_FREE_BYTES: u64 = 512 << 20;
/// Below this much free space a kernel built from source may not fit
/// (a tree and its objects take 1 to 3 GiB).
pub const LOW_FREE_BYTES: u64 = 4 << 30;

/// What a row says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// Present and fit.
    Ok,
    /// Absent (or unusable).
    Missing,
    /// Present, but with a known problem.
    Warning,
}

impl Status {
    /// `ok`, `missing`, `warning`.
    pub fn name(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::Missing => "missing",
            Status::Warning => "warning",
        }
    }
}

/// What needs a thing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Need {
    /// `harness run --kernel debian:7.3.4 --suite smoke` fails without it.
    DefaultRun,
    /// Kernels built from source (`source:`), the kselftest suites, bisect.
    KernelBuilds,
    /// `--share` and the per-cell artifacts share.
    Shares,
    /// arm64 guests (`--arch arm64`) only: never the default run.
    Arm64Guests,
    /// Runs work without it, less well (unverified downloads, TCG).
    Recommended,
    /// Used when present.
    Optional,
}

impl Need {
    /// The table's "needed for" column.
    pub fn label(self) -> &'static str {
        match self {
            Need::DefaultRun => "every run",
            Need::KernelBuilds => "source kernels",
            Need::Shares => "shares",
            Need::Arm64Guests => "arm64 guests only",
            Need::Recommended => "recommended",
            Need::Optional => "optional",
        }
    }
}

/// How a requirement is looked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Check {
    /// An executable on `PATH`.
    Program(&'static str),
    /// An absolute file (under the probe's prefix).
    File(&'static str),
}

/// A program or file one package provides.
#[derive(Debug, Clone, Copy)]
pub struct Requirement {
    /// The row's name.
    pub what: &'static str,
    /// How it is found.
    pub check: Check,
    /// The Debian and Ubuntu package that provides it.
    pub package: &'static str,
    /// What needs it.
    pub need: Need,
    /// What the harness does with it.
    pub purpose: &'static str,
}

const fn req(
    what: &'static str,
    check: Check,
    package: &'static str,
    need: Need,
    purpose: &'static str,
) -> Requirement {
    Requirement {
        what,
        check,
        package,
        need,
        purpose,
    }
}

/// glibc's static library, which the static guest binaries link.
pub const LIBC_A: &str = "/usr/lib/x86_64-linux-gnu/libc.a";

/// The programs and files checked, in the table's order (QEMU, KVM,
/// virtiofsd, the mirror and the cache have rows of their own).
#[rustfmt::skip]
pub const REQUIREMENTS: &[Requirement] = &[
    // Needed to build the harness itself (its build script links the static
    // guest binaries), and by every run of a harness built from this tree.
    req("gcc", Check::Program("gcc"), "gcc", Need::DefaultRun, "links the guest binaries when the harness is built; compiles kernels"),
    req("libc.a", Check::File(LIBC_A), "libc6-dev", Need::DefaultRun, "glibc's static library: the guest binaries built into the harness are static"),
    req("gpgv", Check::Program("gpgv"), "gpgv", Need::Recommended, "checks the signature of Debian's package index"),
    req("Debian archive keyring", Check::File(crate::kernel::archive::DEFAULT_KEYRING), "debian-archive-keyring", Need::Recommended, "the keys that signature is checked with"),
    req("make", Check::Program("make"), "make", Need::KernelBuilds, "kernel and selftest builds"),
    req("flex", Check::Program("flex"), "flex", Need::KernelBuilds, "kernel builds (Kconfig)"),
    req("bison", Check::Program("bison"), "bison", Need::KernelBuilds, "kernel builds (Kconfig)"),
    req("bc", Check::Program("bc"), "bc", Need::KernelBuilds, "kernel builds"),
    req("libelf headers", Check::File("/usr/include/libelf.h"), "libelf-dev", Need::KernelBuilds, "kernel builds (objtool)"),
    req("libssl headers", Check::File("/usr/include/openssl/ssl.h"), "libssl-dev", Need::KernelBuilds, "kernel builds (signing tools)"),
    req("git", Check::Program("git"), "git", Need::KernelBuilds, "kernel source trees, patches, bisect"),
    req("ccache", Check::Program("ccache"), "ccache", Need::Optional, "faster kernel rebuilds"),
];

/// What building virtiofsd with cargo needs (where no package has it).
#[rustfmt::skip]
pub const VIRTIOFSD_BUILD_DEPS: &[Requirement] = &[
    req("libcap-ng headers", Check::File("/usr/include/cap-ng.h"), "libcap-ng-dev", Need::Shares, "building virtiofsd"),
    req("libseccomp headers", Check::File("/usr/include/seccomp.h"), "libseccomp-dev", Need::Shares, "building virtiofsd"),
];

/// What arm64 guests need besides QEMU's aarch64 emulator and an aarch64
/// Rust std (rows of their own): the cross linker and static glibc the
/// build script links the arm64 guest binaries with. Paths as in `guestbin/cargo.rs`'s `ARM64`.
#[rustfmt::skip]
pub const ARM64_REQUIREMENTS: &[Requirement] = &[
    req("aarch64 gcc", Check::Program("aarch64-linux-gnu-gcc"), "gcc-aarch64-linux-gnu", Need::Arm64Guests, "links the arm64 guest binaries when the harness is built"),
    req("aarch64 libc.a", Check::File("/usr/aarch64-linux-gnu/lib/libc.a"), "libc6-dev-arm64-cross", Need::Arm64Guests, "glibc's static library for arm64: the arm64 guest binaries are static"),
];

/// Programs looked up only for what they tell (`sudo` for setup, `cargo`
/// for building virtiofsd, `rustup` for adding the aarch64 std), not shown
/// as rows.
pub const HELPERS: &[&str] = &["sudo", "cargo", "rustup"];

/// QEMU as found.
#[derive(Debug, Clone)]
pub enum QemuFact {
    /// Found, with its version.
    Found(Qemu),
    /// Not on `PATH` (nor at `$HARNESS_QEMU`).
    Missing {
        /// What was looked for.
        binary: String,
    },
    /// Found but `--version` failed or printed no version.
    Unusable {
        /// The binary.
        path: PathBuf,
        /// What went wrong.
        why: String,
    },
}

/// The Debian mirror as found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MirrorFact {
    /// Its URL.
    pub url: String,
    /// Where the URL came from (`--debian-mirror`, the environment, an apt file).
    pub found_in: String,
    /// The answer to a short request; none when not asked (offline probe).
    pub answer: Option<Result<(), String>>,
}

/// The cache directory as found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CacheFact {
    /// The directory.
    pub dir: PathBuf,
    /// Whether a file can be created in it, and if not, why.
    pub writable: Result<(), String>,
    /// Free bytes for this user (statvfs), when known.
    pub free_bytes: Option<u64>,
}

/// Everything probed; [`rows`] and `setup::plan` are pure functions of it.
#[derive(Debug, Clone)]
pub struct Facts {
    /// `/etc/os-release`, when readable.
    pub os: Option<OsRelease>,
    /// QEMU.
    pub qemu: QemuFact,
    /// KVM.
    pub kvm: Kvm,
    /// virtiofsd's path, or why there is none.
    pub virtiofsd: Result<PathBuf, String>,
    /// The programs of [`REQUIREMENTS`] and [`HELPERS`] that were found.
    pub programs: BTreeMap<String, PathBuf>,
    /// The files of [`REQUIREMENTS`] and [`VIRTIOFSD_BUILD_DEPS`] that exist.
    pub files: BTreeSet<String>,
    /// The Debian mirror, or why none was found.
    pub mirror: Result<MirrorFact, String>,
    /// The cache, or why it has no directory.
    pub cache: Result<CacheFact, String>,
    /// Whether this process runs as root.
    pub is_root: bool,
    /// `qemu-system-aarch64`.
    pub qemu_arm64: QemuFact,
    /// The directory holding an aarch64 Rust std the build can use, or
    /// why there is none.
    pub arm64_rust_std: Result<PathBuf, String>,
    /// Where this harness's arm64 guest binaries come from (built in, or
    /// `$HARNESS_GUEST_BIN_DIR_ARM64`), or why it has none.
    pub arm64_guest_bins: Result<String, String>,
    /// dpkg's foreign architectures (`/var/lib/dpkg/arch`).
    pub foreign_archs: Vec<String>,
}

impl Facts {
    /// Whether `check` was found.
    pub fn has(&self, check: Check) -> bool {
        match check {
            Check::Program(p) => self.programs.contains_key(p),
            Check::File(f) => self.files.contains(f),
        }
    }

    /// QEMU's major version, when found.
    pub fn qemu_major(&self) -> Option<u32> {
        major(&self.qemu)
    }

    /// `qemu-system-aarch64`'s major version, when found.
    pub fn qemu_arm64_major(&self) -> Option<u32> {
        major(&self.qemu_arm64)
    }

    /// The release, when `harness setup` knows it.
    pub fn distro(&self) -> Option<Distro> {
        self.os.as_ref().and_then(|os| Distro::of(os).ok())
    }
}

fn major(q: &QemuFact) -> Option<u32> {
    match q {
        QemuFact::Found(q) => q.version.split('.').next()?.parse().ok(),
        _ => None,
    }
}

/// One row of the table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Row {
    /// What is checked (`QEMU`, `gpgv`, `libc.a`, ...).
    pub what: String,
    /// Ok, missing, warning.
    pub status: Status,
    /// What needs it.
    pub need: Need,
    /// What was found, or why not.
    pub found: String,
    /// The exact fix, when not ok.
    pub fix: Option<String>,
    /// Whether `harness setup` runs that fix here.
    pub by_setup: bool,
}

impl Row {
    fn new(what: &str, status: Status, need: Need, found: impl Into<String>) -> Row {
        Row {
            what: what.to_string(),
            status,
            need,
            found: found.into(),
            fix: None,
            by_setup: false,
        }
    }

    fn fix(mut self, fix: impl Into<String>) -> Row {
        self.fix = Some(fix.into());
        self
    }

    /// The fix is one `harness setup` runs (on the releases it knows).
    fn by_setup(mut self, facts: &Facts) -> Row {
        self.by_setup = facts.distro().is_some();
        self
    }
}

/// The command that installs `packages` here: `apt-get install` on Debian
/// and Ubuntu, the package names to look for elsewhere.
pub fn install_fix(facts: &Facts, packages: &str) -> String {
    match facts.distro() {
        Some(_) => format!("apt-get install {packages}"),
        None => format!("install {packages} (Debian's package names)"),
    }
}

/// The table: one row per thing the harness may need (pure).
pub fn rows(facts: &Facts) -> Vec<Row> {
    let mut out = vec![qemu_row(facts), kvm_row(&facts.kvm)];
    let mut requirements = REQUIREMENTS.iter();
    // gcc and libc.a first (every run), then the mirror and the cache.
    for r in requirements.by_ref().take(2) {
        out.push(requirement_row(facts, r));
    }
    out.push(mirror_row(&facts.mirror));
    out.push(cache_row(&facts.cache));
    for r in requirements.by_ref().take(2) {
        out.push(requirement_row(facts, r));
    }
    out.push(virtiofsd_row(facts));
    out.extend(requirements.map(|r| requirement_row(facts, r)));
    out.push(qemu_arm64_row(facts));
    out.extend(
        ARM64_REQUIREMENTS
            .iter()
            .map(|r| arm64_requirement_row(facts, r)),
    );
    out.push(arm64_rust_std_row(facts));
    out.push(arm64_guest_bins_row(facts));
    out
}

/// How the arm64 rows' fixes end: setup installs them only when asked.
const BY_SETUP_ARM64: &str = "(or `harness setup --arch arm64`)";

fn arm64_requirement_row(facts: &Facts, r: &Requirement) -> Row {
    let mut row = requirement_row(facts, r);
    if let Some(fix) = row.fix.take() {
        row.fix = Some(format!("{fix} {BY_SETUP_ARM64}"));
    }
    // Plain `harness setup` leaves them: its "still missing" is about x86.
    row.by_setup = false;
    row
}

fn qemu_arm64_row(facts: &Facts) -> Row {
    let name = "QEMU (arm64)";
    let row = |status, found: String| Row::new(name, status, Need::Arm64Guests, found);
    let fix = |old: bool| {
        let suite = facts.distro().and_then(|d| d.qemu_backports());
        let how = match (suite, old) {
            (Some(suite), _) => format!(
                "add `deb <apt's Debian mirror> {suite} main` to apt's sources, then apt-get install -t {suite} {QEMU_ARM64_PACKAGE}"
            ),
            (None, false) => install_fix(facts, QEMU_ARM64_PACKAGE),
            (None, true) => format!("install QEMU >= {}", host::RELIABLE_TCG_QEMU_MAJOR),
        };
        format!("{how} {BY_SETUP_ARM64}")
    };
    match &facts.qemu_arm64 {
        QemuFact::Missing { binary } => {
            row(Status::Missing, format!("no {binary} on PATH")).fix(fix(false))
        }
        QemuFact::Unusable { path, why } => row(
            Status::Missing,
            format!("{}: --version failed: {why}", path.display()),
        )
        .fix(fix(false)),
        QemuFact::Found(q) => {
            let found = format!("{}, QEMU {}", q.path.display(), q.version);
            let major = facts.qemu_arm64_major().unwrap_or(0);
            if major < host::MIN_QEMU_MAJOR {
                row(
                    Status::Missing,
                    format!("{found}: need >= {}.0", host::MIN_QEMU_MAJOR),
                )
                .fix(fix(false))
            } else if major < host::RELIABLE_TCG_QEMU_MAJOR && Arch::host() != Some(Arch::Arm64) {
                // An arm64 guest on another host is always emulated.
                row(
                    Status::Warning,
                    format!("{found}: arm64 guests run under TCG here, and QEMU < {} is unreliable there", host::RELIABLE_TCG_QEMU_MAJOR),
                )
                .fix(fix(true))
            } else {
                row(Status::Ok, found)
            }
        }
    }
}

/// The fix for a missing aarch64 Rust std on this release.
fn arm64_rust_std_fix(facts: &Facts) -> String {
    let target = Arch::Arm64.rust_target();
    match facts.distro().and_then(|d| d.arm64_rust_std_packages()) {
        Some(packages) => format!(
            "dpkg --add-architecture arm64 && apt-get update && apt-get install {} (or, where rustup can add targets, rustup target add {target}) {BY_SETUP_ARM64}",
            packages.join(" ")
        ),
        None => format!("rustup target add {target} {BY_SETUP_ARM64}"),
    }
}

fn arm64_rust_std_row(facts: &Facts) -> Row {
    let name = "aarch64 Rust std";
    match &facts.arm64_rust_std {
        Ok(dir) => Row::new(
            name,
            Status::Ok,
            Need::Arm64Guests,
            dir.display().to_string(),
        ),
        Err(why) => Row::new(name, Status::Missing, Need::Arm64Guests, why.clone())
            .fix(arm64_rust_std_fix(facts)),
    }
}

fn arm64_guest_bins_row(facts: &Facts) -> Row {
    let name = "arm64 guest binaries";
    match &facts.arm64_guest_bins {
        Ok(from) => Row::new(name, Status::Ok, Need::Arm64Guests, from.clone()),
        Err(why) => Row::new(name, Status::Missing, Need::Arm64Guests, why.clone()).fix(format!(
            "once the arm64 rows above are ok, build or install the harness again (`cargo build`, `cargo install --path harness`): its build embeds them; or set {} to a directory of static arm64 guest binaries",
            crate::guestbin::GUEST_BIN_DIR_ARM64_ENV
        )),
    }
}

/// The rows that stop the default run (`harness run --kernel debian:7.3.4
/// --suite smoke`): missing and needed by every run.
pub fn missing_for_default_run(rows: &[Row]) -> Vec<&Row> {
    rows.iter()
        .filter(|r| r.status == Status::Missing && r.need == Need::DefaultRun)
        .collect()
}

fn requirement_row(facts: &Facts, r: &Requirement) -> Row {
    if facts.has(r.check) {
        let found = match r.check {
            Check::Program(p) => facts.programs[p].display().to_string(),
            Check::File(f) => f.to_string(),
        };
        return Row::new(r.what, Status::Ok, r.need, found);
    }
    let found = match r.check {
        Check::Program(p) => format!("no {p} on PATH ({})", r.purpose),
        Check::File(f) => format!("no {f} ({})", r.purpose),
    };
    let row = Row::new(r.what, Status::Missing, r.need, found).fix(install_fix(facts, r.package));
    // Setup leaves what is optional.
    match r.need {
        Need::Optional => row,
        _ => row.by_setup(facts),
    }
}

/// The fix for a missing or too old QEMU on this release.
fn qemu_fix(facts: &Facts, old: bool) -> String {
    let distro = facts.distro();
    if let Some(suite) = distro.as_ref().and_then(Distro::qemu_backports) {
        return format!(
            "add `deb <apt's Debian mirror> {suite} main` to apt's sources, then apt-get install -t {suite} {QEMU_PACKAGE}"
        );
    }
    match (old, distro) {
        (false, _) => install_fix(facts, QEMU_PACKAGE),
        (true, Some(d)) if d.qemu_unreliable_without_fix() => {
            "this release's archive has no newer QEMU: use KVM, or a newer release (Ubuntu 24.04: QEMU 8.2)".to_string()
        }
        (true, _) => format!("install QEMU >= {}", host::RELIABLE_TCG_QEMU_MAJOR),
    }
}

fn qemu_row(facts: &Facts) -> Row {
    let row = |status, found: String| Row::new("QEMU", status, Need::DefaultRun, found);
    match &facts.qemu {
        QemuFact::Missing { binary } if binary.contains('/') => row(
            Status::Missing,
            format!("$HARNESS_QEMU={binary} is not an executable"),
        )
        .fix(format!(
            "point HARNESS_QEMU at a QEMU, or unset it and {}",
            qemu_fix(facts, false)
        )),
        QemuFact::Missing { binary } => row(Status::Missing, format!("no {binary} on PATH"))
            .fix(qemu_fix(facts, false))
            .by_setup(facts),
        QemuFact::Unusable { path, why } => row(
            Status::Missing,
            format!("{}: --version failed: {why}", path.display()),
        )
        .fix(qemu_fix(facts, false))
        .by_setup(facts),
        QemuFact::Found(q) => {
            let found = format!("{}, QEMU {}", q.path.display(), q.version);
            if facts.qemu_major().unwrap_or(0) < host::MIN_QEMU_MAJOR {
                row(
                    Status::Missing,
                    format!("{found}: need >= {}.0", host::MIN_QEMU_MAJOR),
                )
                .fix(qemu_fix(facts, false))
                .by_setup(facts)
            } else if let Some(note) = host::tcg_note(q) {
                let mut r =
                    row(Status::Warning, format!("{found}: {note}")).fix(qemu_fix(facts, true));
                r.by_setup = facts.distro().and_then(|d| d.qemu_backports()).is_some();
                r
            } else {
                row(Status::Ok, found)
            }
        }
    }
}

fn kvm_row(kvm: &Kvm) -> Row {
    match kvm {
        Kvm::Usable => Row::new("KVM", Status::Ok, Need::Recommended, "hardware KVM: /dev/kvm"),
        Kvm::Unusable(why) => Row::new(
            "KVM",
            Status::Warning,
            Need::Recommended,
            format!("TCG will be used (software emulation, slower): {why}"),
        )
        .fix("none needed; for KVM: load kvm_intel or kvm_amd and give this user read-write /dev/kvm (ci/enable-kvm.sh)"),
    }
}

fn virtiofsd_row(facts: &Facts) -> Row {
    match &facts.virtiofsd {
        Ok(p) => Row::new(
            "virtiofsd",
            Status::Ok,
            Need::Shares,
            p.display().to_string(),
        ),
        Err(why) => {
            let fix = match facts.distro() {
                Some(d) if d.packages_virtiofsd() => install_fix(facts, "virtiofsd"),
                _ => format!(
                    "{} && cargo install --locked virtiofsd --version {VIRTIOFSD_VERSION}",
                    install_fix(facts, "libcap-ng-dev libseccomp-dev")
                ),
            };
            Row::new("virtiofsd", Status::Missing, Need::Shares, why.clone())
                .fix(fix)
                .by_setup(facts)
        }
    }
}

fn mirror_row(mirror: &Result<MirrorFact, String>) -> Row {
    let name = "Debian mirror";
    let name_one = "name a reachable one: --debian-mirror URL or HARNESS_DEBIAN_MIRROR=URL (the directory holding dists/ and pool/)";
    match mirror {
        Err(why) => Row::new(name, Status::Missing, Need::DefaultRun, why.clone()).fix(name_one),
        Ok(m) => {
            let at = format!("{} (from {})", m.url, m.found_in);
            match &m.answer {
                None => Row::new(
                    name,
                    Status::Ok,
                    Need::DefaultRun,
                    format!("{at}, not asked"),
                ),
                Some(Ok(())) => {
                    Row::new(name, Status::Ok, Need::DefaultRun, format!("{at}, answers"))
                }
                Some(Err(e)) => Row::new(
                    name,
                    Status::Missing,
                    Need::DefaultRun,
                    format!("{at} does not answer: {e}"),
                )
                .fix(format!("check the network, or {name_one}")),
            }
        }
    }
}

fn cache_row(cache: &Result<CacheFact, String>) -> Row {
    let name = "cache directory";
    let elsewhere = "set HARNESS_CACHE_DIR to a writable directory with a few GiB free";
    let c = match cache {
        Err(why) => {
            return Row::new(name, Status::Missing, Need::DefaultRun, why.clone()).fix(elsewhere)
        }
        Ok(c) => c,
    };
    let dir = c.dir.display();
    if let Err(why) = &c.writable {
        return Row::new(
            name,
            Status::Missing,
            Need::DefaultRun,
            format!("{dir}: not writable: {why}"),
        )
        .fix(elsewhere);
    }
    let gib = |b: u64| b as f64 / (1u64 << 30) as f64;
    match c.free_bytes {
        None => Row::new(
            name,
            Status::Ok,
            Need::DefaultRun,
            format!("{dir}, free space unknown"),
        ),
        Some(b) if b < MIN_FREE_BYTES => Row::new(
            name,
            Status::Missing,
            Need::DefaultRun,
            format!("{dir}: only {:.2} GiB free", gib(b)),
        )
        .fix(format!("free space there, or {elsewhere}")),
        Some(b) if b < LOW_FREE_BYTES => Row::new(
            name,
            Status::Warning,
            Need::DefaultRun,
            format!(
                "{dir}: {:.1} GiB free; a kernel built from source takes 1 to 3 GiB",
                gib(b)
            ),
        )
        .fix(format!("free space there, or {elsewhere}")),
        Some(b) => Row::new(
            name,
            Status::Ok,
            Need::DefaultRun,
            format!("{dir}, {:.1} GiB free", gib(b)),
        ),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Facts of a host that has everything (Debian 12 with backports' QEMU).
    pub(crate) fn complete() -> Facts {
        let mut programs: BTreeMap<String, PathBuf> = BTreeMap::new();
        let mut files = BTreeSet::new();
        for r in REQUIREMENTS
            .iter()
            .chain(VIRTIOFSD_BUILD_DEPS)
            .chain(ARM64_REQUIREMENTS)
        {
            match r.check {
                Check::Program(p) => {
                    programs.insert(p.into(), format!("/usr/bin/{p}").into());
                }
                Check::File(f) => {
                    files.insert(f.to_string());
                }
            }
        }
        programs.insert("cargo".into(), "/root/.cargo/bin/cargo".into());
        Facts {
            os: Some(OsRelease::parse(
                "ID=debian\nVERSION_ID=\"12\"\nVERSION_CODENAME=bookworm\n",
            )),
            qemu: QemuFact::Found(Qemu {
                path: "/usr/bin/qemu-system-x86_64".into(),
                version: "10.0.2".into(),
            }),
            kvm: Kvm::Usable,
            virtiofsd: Ok("/root/.cargo/bin/virtiofsd".into()),
            programs,
            files,
            mirror: Ok(MirrorFact {
                url: "http://mirror.example/debian".into(),
                found_in: "/etc/apt/sources.list.d/debian.sources".into(),
                answer: Some(Ok(())),
            }),
            cache: Ok(CacheFact {
                dir: "/root/.cache/futex-harness".into(),
                writable: Ok(()),
                free_bytes: Some(100 << 30),
            }),
            is_root: true,
            qemu_arm64: QemuFact::Found(Qemu {
                path: "/usr/bin/qemu-system-aarch64".into(),
                version: "10.0.2".into(),
            }),
            arm64_rust_std: Ok("/usr/lib/rustlib/aarch64-unknown-linux-gnu/lib".into()),
            arm64_guest_bins: Ok("built into this harness".into()),
            foreign_archs: vec!["arm64".into()],
        }
    }

    fn row<'a>(rows: &'a [Row], what: &str) -> &'a Row {
        rows.iter().find(|r| r.what == what).unwrap()
    }

    #[test]
    fn a_complete_host_is_all_ok() {
        let rows = rows(&complete());
        for r in &rows {
            assert_eq!(r.status, Status::Ok, "{r:?}");
            assert_eq!(r.fix, None);
        }
        assert!(missing_for_default_run(&rows).is_empty());
        // Every requirement, QEMU, KVM, virtiofsd, the mirror and the cache;
        // the arm64 ones, QEMU (arm64), the aarch64 std and the binaries.
        assert_eq!(
            rows.len(),
            REQUIREMENTS.len() + 5 + ARM64_REQUIREMENTS.len() + 3
        );
    }

    #[test]
    fn qemu_7_2_on_bookworm_points_at_backports() {
        let mut f = complete();
        f.qemu = QemuFact::Found(Qemu {
            path: "/usr/bin/qemu-system-x86_64".into(),
            version: "7.2.19".into(),
        });
        let rows = rows(&f);
        let q = row(&rows, "QEMU");
        assert_eq!(q.status, Status::Warning);
        assert!(q.found.contains("QEMU 7.2.19"), "{}", q.found);
        assert!(q
            .fix
            .as_deref()
            .unwrap()
            .contains("apt-get install -t bookworm-backports qemu-system-x86"));
        assert!(missing_for_default_run(&rows).is_empty());
        f.qemu = QemuFact::Missing {
            binary: "qemu-system-x86_64".into(),
        };
        f.os = Some(OsRelease::parse("ID=debian\nVERSION_ID=13\n"));
        let rows = super::rows(&f);
        assert_eq!(
            row(&rows, "QEMU").fix.as_deref(),
            Some("apt-get install qemu-system-x86")
        );
        assert_eq!(missing_for_default_run(&rows)[0].what, "QEMU");
    }

    #[test]
    fn missing_things_say_their_fix() {
        let mut f = complete();
        f.programs.clear();
        f.files.clear();
        f.virtiofsd = Err("no virtiofsd".into());
        f.kvm = Kvm::Unusable("cannot open /dev/kvm".into());
        f.mirror = Err("no Debian mirror in apt's configuration".into());
        f.cache = Ok(CacheFact {
            dir: "/c".into(),
            writable: Err("read-only file system".into()),
            free_bytes: None,
        });
        let rows = rows(&f);
        let fix = |w: &str| row(&rows, w).fix.clone().unwrap();
        assert_eq!(fix("libc.a"), "apt-get install libc6-dev");
        assert_eq!(fix("gpgv"), "apt-get install gpgv");
        assert_eq!(
            fix("Debian archive keyring"),
            "apt-get install debian-archive-keyring"
        );
        assert_eq!(fix("make"), "apt-get install make");
        assert!(fix("virtiofsd").contains("cargo install --locked virtiofsd --version 1.14.0"));
        assert!(fix("Debian mirror").contains("HARNESS_DEBIAN_MIRROR"));
        assert!(fix("cache directory").contains("HARNESS_CACHE_DIR"));
        assert_eq!(row(&rows, "KVM").status, Status::Warning);
        let blocking: Vec<_> = missing_for_default_run(&rows)
            .iter()
            .map(|r| r.what.as_str())
            .collect();
        assert_eq!(
            blocking,
            ["gcc", "libc.a", "Debian mirror", "cache directory"]
        );
        f.os = Some(OsRelease::parse("ID=ubuntu\nVERSION_ID=\"24.04\"\n"));
        let fix_now = |f: &Facts, w: &str| row(&super::rows(f), w).fix.clone().unwrap();
        assert_eq!(fix_now(&f, "virtiofsd"), "apt-get install virtiofsd");
        f.os = Some(OsRelease::parse("ID=fedora\nVERSION_ID=40\n"));
        assert_eq!(fix_now(&f, "make"), "install make (Debian's package names)");
    }

    #[test]
    fn mirror_and_cache_rows() {
        let mut f = complete();
        f.mirror = Ok(MirrorFact {
            url: "http://127.0.0.1:9/debian".into(),
            found_in: "HARNESS_DEBIAN_MIRROR".into(),
            answer: Some(Err("connection refused".into())),
        });
        f.cache = Ok(CacheFact {
            dir: "/c".into(),
            writable: Ok(()),
            free_bytes: Some(1 << 30),
        });
        let rows = rows(&f);
        let m = row(&rows, "Debian mirror");
        assert_eq!(m.status, Status::Missing);
        assert!(m.found.contains("does not answer: connection refused"));
        let c = row(&rows, "cache directory");
        assert_eq!(c.status, Status::Warning);
        assert!(c.found.contains("1.0 GiB free"), "{}", c.found);
    }

    #[test]
    fn arm64_rows_never_stop_the_default_run() {
        let mut f = complete();
        f.qemu_arm64 = QemuFact::Missing {
            binary: "qemu-system-aarch64".into(),
        };
        f.programs.remove("aarch64-linux-gnu-gcc");
        f.files.clear();
        f.files.insert(LIBC_A.into());
        f.files
            .insert(crate::kernel::archive::DEFAULT_KEYRING.into());
        f.arm64_rust_std = Err("no aarch64 Rust std".into());
        f.arm64_guest_bins = Err("this harness was built without them".into());
        let rows = rows(&f);
        let arm64: Vec<&Row> = rows
            .iter()
            .filter(|r| r.need == Need::Arm64Guests)
            .collect();
        let names: Vec<&str> = arm64.iter().map(|r| r.what.as_str()).collect();
        assert_eq!(
            names,
            [
                "QEMU (arm64)",
                "aarch64 gcc",
                "aarch64 libc.a",
                "aarch64 Rust std",
                "arm64 guest binaries"
            ]
        );
        for r in &arm64 {
            assert_eq!(r.status, Status::Missing, "{r:?}");
            assert_eq!(r.need.label(), "arm64 guests only");
            assert!(!r.by_setup, "{r:?}");
        }
        assert!(missing_for_default_run(&rows).is_empty());
        let fix = |w: &str| row(&rows, w).fix.clone().unwrap();
        assert_eq!(
            fix("aarch64 gcc"),
            "apt-get install gcc-aarch64-linux-gnu (or `harness setup --arch arm64`)"
        );
        assert!(
            fix("QEMU (arm64)").contains("apt-get install -t bookworm-backports qemu-system-arm")
        );
        assert!(fix("aarch64 Rust std").starts_with(
            "dpkg --add-architecture arm64 && apt-get update && apt-get install rustc-web libstd-rust-web-dev:arm64"
        ));
        assert!(fix("arm64 guest binaries").contains("cargo install --path harness"));
        // Ubuntu: rustup's std.
        f.os = Some(OsRelease::parse("ID=ubuntu\nVERSION_ID=\"24.04\"\n"));
        assert_eq!(
            super::rows(&f)
                .into_iter()
                .find(|r| r.what == "aarch64 Rust std")
                .unwrap()
                .fix
                .unwrap(),
            "rustup target add aarch64-unknown-linux-gnu (or `harness setup --arch arm64`)"
        );
    }

    #[test]
    fn arm64_paths_are_the_builds() {
        let t = crate::guestbin::cross_target(Arch::Arm64);
        assert_eq!(
            ARM64_REQUIREMENTS[0].check,
            Check::Program(t.linker.unwrap())
        );
        assert_eq!(ARM64_REQUIREMENTS[1].check, Check::File(t.libc_a));
        assert_eq!(QEMU_ARM64_PACKAGE, Arch::Arm64.qemu_package());
        assert_eq!(QEMU_PACKAGE, Arch::X86_64.qemu_package());
        for r in ARM64_REQUIREMENTS {
            assert!(t.packages.contains(&r.package), "{}", r.package);
        }
    }
}

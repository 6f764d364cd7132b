//! What one cell (kernel x topology x suite) produced: the input of the
//! verdict, the JUnit writer and the terminal summary.

use crate::console::{ConsoleScan, ReportKind};
use crate::ktap::Document;
use std::path::PathBuf;
use std::time::{Duration, SystemTime};

/// How the VM ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VmEnd {
    /// guest-init ran the whole plan and exited through isa-debug-exit.
    Finished,
    /// guest-init reported an error of its own (bad plan, init failure).
    InitError(String),
    /// The kernel panicked (console and/or QMP GUEST_PANICKED).
    KernelPanic,
    /// The host watchdog killed the VM.
    Watchdog(Duration),
    /// The harness ended the VM early: the kernel was wedged (see
    /// [`crate::vm::WedgeWatch`]).
    Wedged(Wedge),
    /// QEMU exited otherwise (reboot, crash, bad arguments).
    QemuExited {
        /// Exit status (or signal, negated).
        status: i32,
        /// The tail of QEMU's stderr.
        stderr: String,
    },
    /// The harness was interrupted (SIGINT/SIGTERM).
    Interrupted,
}

/// Why a guest counts as wedged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WedgeWhy {
    /// The running test is this long past its timeout and guest-init's
    /// grace without a result line.
    Unanswered(Duration),
    /// The test timed out, a task of it outlived SIGKILL, and the kernel
    /// reports a CPU spinning.
    CpuHeld,
    /// The second test in a row timed out after the report.
    TimeoutsInARow,
    /// guest-init finished the plan and the guest did not power off in
    /// this long.
    NoPoweroff(Duration),
}

/// A guest the harness found wedged and ended ([`crate::vm::WedgeWatch`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Wedge {
    /// The first report of the kernel's trouble (`None`: it said nothing).
    pub report: Option<ReportKind>,
    /// The test running when that report came (or that left a task
    /// spinning): what wedged the kernel.
    pub by: Option<String>,
    /// The test running (or timed out) when the harness ended the guest.
    pub test: Option<String>,
    /// Why this is a wedge.
    pub why: WedgeWhy,
}

/// Everything one cell produced.
#[derive(Debug, Clone)]
pub struct CellResult {
    /// Unique cell name, e.g. `debian-7.3.4/nodes2/smoke`.
    pub name: String,
    /// Kernel spec as given (`debian:7.3.4`, `path:...`).
    pub kernel: String,
    /// Topology name or spec.
    pub topology: String,
    /// Suite name.
    pub suite: String,
    /// `kvm` or `tcg`.
    pub accel: String,
    /// `qemu-system-x86_64 --version` first line.
    pub qemu_version: String,
    /// Names of the top-level tests in the plan, in order.
    pub planned: Vec<String>,
    /// How the VM ended.
    pub end: VmEnd,
    /// The KTAP results.
    pub ktap: Document,
    /// Console findings.
    pub console: ConsoleScan,
    /// Where the full console log was kept.
    pub console_log: Option<PathBuf>,
    /// Wall-clock time of the cell.
    pub duration: Duration,
    /// When the cell started.
    pub started: SystemTime,
    /// QEMU's CPU time over the cell (every vCPU thread), if it was read:
    /// what the scheduler learns a cell's demand from.
    pub qemu_cpu: Option<Duration>,
    /// The known failures declared for this cell's suite and kernel
    /// (reported as xfail when one matches exactly; as stale when none
    /// of a run's cells matched it).
    pub known_failures: Vec<KnownFailure>,
    /// Things the harness did that the reader should know (KVM fell back
    /// to TCG, QMP saw a panic, ...).
    pub notes: Vec<String>,
    /// Where the cell's time went (its last boot's phases and binaries).
    pub profile: crate::profile::CellProfile,
    /// The boots that crashed with a known signature and were booted
    /// again (`crate::cell::boot_retry`), in order; empty for one boot.
    pub boot_retries: Vec<BootRetry>,
    /// QEMU's command line of the last boot, shell-quoted as in
    /// `qemu-argv.txt` (empty where no VM was started).
    pub qemu_command: String,
}

/// One boot that crashed before guest-init spoke, matched a known
/// signature and was booted again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BootRetry {
    /// The signature's name (`qemu7-tcg-debian-6.12`).
    pub signature: String,
    /// Which boot of the cell crashed (1: the first).
    pub attempt: u32,
    /// The console line that matched, printable and bounded (guest output).
    pub line: String,
}

/// A failure the matrix declares known (`known_failures:` of a suite): one
/// exact failure message of one case on named kernels. It turns that
/// failure into an expected failure ([`crate::verdict::CaseStatus::Xfail`]),
/// never a pass or a plain skip; any other failure of the case stays a
/// failure.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KnownFailure {
    /// Glob (`*`, `?`) over case names such as `futex_priv_hash/global.priv_hash`.
    pub case: String,
    /// Why it is accepted.
    pub reason: String,
    /// Only under this accelerator (`tcg`, `kvm`), if given.
    pub accel: Option<String>,
    /// The failure's one-line message, a glob: a different failure of the
    /// same case is a new finding, not this one.
    pub message: String,
    /// The kernels (a matrix kernel's `name:`) it is seen on, as globs:
    /// at least one.
    pub kernels: Vec<String>,
    /// The suite that declares it.
    pub suite: String,
    /// Where it is declared (`matrix.yaml:85:9`): its identity in reports,
    /// and how a stale entry is found again.
    pub at: String,
    /// For a failure that fires in some runs only (a race): how often it
    /// was seen, as measured. A run in which it excused nothing reports it
    /// as unseen, not stale ([`crate::known::Staleness`]).
    pub intermittent: Option<String>,
}

impl KnownFailure {
    /// Whether the entry is meant for cells of the kernel named `name`.
    pub fn applies_to_kernel(&self, name: &str) -> bool {
        self.kernels.iter().any(|k| crate::glob::matches(k, name))
    }

    /// Whether the entry is meant for a cell of this accelerator.
    pub fn applies_to_accel(&self, accel: &str) -> bool {
        self.accel.as_deref().is_none_or(|a| a == accel)
    }

    /// Whether the entry excuses the failure `message` of case `case`
    /// under accelerator `accel` (the kernel is decided by the planner,
    /// [`KnownFailure::applies_to_kernel`]).
    pub fn excuses(&self, case: &str, message: &str, accel: &str) -> bool {
        self.applies_to_accel(accel)
            && crate::glob::matches(&self.case, case)
            && crate::glob::matches(&self.message, message)
    }

    /// The entry in one line: where, which case, which message.
    pub fn describe(&self) -> String {
        format!(
            "{} (suite {}, case {}, message {:?})",
            self.at, self.suite, self.case, self.message
        )
    }
}

/// A cell result for unit tests elsewhere in the crate.
#[cfg(test)]
pub(crate) mod tests_support {
    use super::*;

    /// A finished cell with no results, under TCG.
    pub(crate) fn cell_result() -> CellResult {
        CellResult {
            name: "k/t/s".into(),
            kernel: "k".into(),
            topology: "t".into(),
            suite: "s".into(),
            accel: "tcg".into(),
            qemu_version: "10".into(),
            planned: vec![],
            end: VmEnd::Finished,
            ktap: crate::ktap::parse(b""),
            console: crate::console::scan(b""),
            console_log: None,
            duration: Duration::ZERO,
            started: SystemTime::UNIX_EPOCH,
            qemu_cpu: None,
            known_failures: vec![],
            notes: vec![],
            profile: Default::default(),
            boot_retries: vec![],
            qemu_command: String::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::KnownFailure;

    #[test]
    fn kernel_globs_name_the_kernels_an_entry_is_for() {
        let k = KnownFailure {
            kernels: vec!["debian-7.3".into(), "source-7.3*".into()],
            ..Default::default()
        };
        assert!(k.applies_to_kernel("debian-7.3"));
        assert!(k.applies_to_kernel("source-7.3-debug"));
        assert!(!k.applies_to_kernel("debian-7.0"));
        assert!(!k.applies_to_kernel("debian-7.3.4-other"));
        // No kernel named: for none (the matrix refuses such an entry).
        assert!(!KnownFailure::default().applies_to_kernel("anything"));
    }
}

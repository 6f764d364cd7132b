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
    /// The harness ended the VM early: the console showed a stall report
    /// and the results stream stayed silent past the running test's
    /// timeout and guest-init's grace (see [`crate::vm::WedgeWatch`]).
    Wedged {
        /// The last stall report (hung task, soft lockup, RCU stall).
        report: ReportKind,
        /// The test running, as the plan names it.
        test: Option<String>,
        /// How long the results stream had been silent.
        quiet: Duration,
    },
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
    /// Failures that are known and accepted in this cell (e.g. upstream
    /// timing-sensitive tests under TCG): reported as skipped, with the
    /// reason and what happened, instead of failing the cell.
    pub known_failures: Vec<KnownFailure>,
    /// Things the harness did that the reader should know (KVM fell back
    /// to TCG, QMP saw a panic, ...).
    pub notes: Vec<String>,
    /// Where the cell's time went (its last boot's phases and binaries).
    pub profile: crate::profile::CellProfile,
}

/// A failure the matrix declares known (`known_failures:` of a suite).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KnownFailure {
    /// Glob (`*`, `?`) over case names such as `futex_priv_hash/global.priv_hash`.
    pub case: String,
    /// Why it is accepted.
    pub reason: String,
    /// Only under this accelerator (`tcg`, `kvm`), if given.
    pub accel: Option<String>,
    /// Only a failure whose one-line message matches this glob, if given:
    /// a different failure of the same case is a new finding, not this one.
    pub message: Option<String>,
    /// Only on kernels whose name (a matrix kernel's `name:`) matches one
    /// of these globs; empty: every kernel.
    pub kernels: Vec<String>,
}

impl KnownFailure {
    /// Whether the entry is meant for cells of the kernel named `name`.
    pub fn applies_to_kernel(&self, name: &str) -> bool {
        self.kernels.is_empty() || self.kernels.iter().any(|k| crate::glob::matches(k, name))
    }

    /// Whether the entry excuses the failure `message` of case `case`
    /// under accelerator `accel` (the kernel is decided by the planner,
    /// [`KnownFailure::applies_to_kernel`]).
    pub fn excuses(&self, case: &str, message: &str, accel: &str) -> bool {
        self.accel.as_deref().is_none_or(|a| a == accel)
            && crate::glob::matches(&self.case, case)
            && self
                .message
                .as_deref()
                .is_none_or(|m| crate::glob::matches(m, message))
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
        assert!(KnownFailure::default().applies_to_kernel("anything"));
    }
}

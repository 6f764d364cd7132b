//! What the runner tells its reporters: one typed stream of [`Event`]s per
//! run, the same for `run`, `matrix`, `bench` and `bisect`. A reporter
//! (terminal, JUnit, JSON, the exit status) is a [`crate::reporter::Reporter`]
//! that receives every event in order.
//!
//! Architecture invariant: events carry results, never file handles or
//! terminal state; the runner writes no report itself.

use crate::result::CellResult;
use crate::verdict::{Case, Counts};
use std::path::PathBuf;
use std::time::{Duration, SystemTime};

/// What a cell is, known before it runs (placeholders of unfinished cells
/// are built from it).
#[derive(Debug, Clone, PartialEq)]
pub struct CellMeta {
    /// Position in the run (0-based; the order reports list cells in).
    pub index: usize,
    /// Unique cell name, e.g. `debian-7.3/nodes2/futex`.
    pub name: String,
    /// Kernel as the user wrote it (`debian:7.3.4`, `source:7.3`).
    pub kernel: String,
    /// Kernel name in a matrix (else the same as `kernel`).
    pub kernel_name: String,
    /// Topology name or spec.
    pub topology: String,
    /// Suite name.
    pub suite: String,
    /// The expectations the futex binaries get (`--expect`), when known.
    pub expect: Option<String>,
    /// Where the cell's logs go.
    pub out_dir: PathBuf,
    /// The kernel's source and build and the VM's topology, for reports
    /// that describe them (KCIDB): set by [`crate::planner::cell`], `None`
    /// for a cell that was never planned.
    pub facts: Option<Box<CellFacts>>,
}

/// What a planned cell runs on, beyond its names (see [`CellMeta::facts`]).
#[derive(Debug, Clone, PartialEq)]
pub struct CellFacts {
    /// The kernel, when the front door said ([`crate::planner::CellRequest::kernel_facts`]).
    pub kernel: Option<KernelFacts>,
    /// The topology the VM has.
    pub topology: crate::topology::Topology,
    /// The guest architecture.
    pub arch: crate::arch::Arch,
}

/// Where a kernel's source came from and how its image was built, in the
/// terms of KernelCI's KCIDB (a checkout, a build); the JSON results file
/// carries it as is (`kernel_facts`, docs/results.md).
#[derive(
    Debug, Clone, PartialEq, Default, serde::Serialize, serde::Deserialize, schemars::JsonSchema,
)]
#[serde(default)]
pub struct KernelFacts {
    /// `debian`, `source`, `tree` or `path`.
    #[schemars(extend("enum" = ["debian", "source", "tree", "path"]))]
    pub kind: String,
    /// The architecture the image is for (`x86_64`, `arm64`); absent in
    /// results written before there were two, which were x86-64.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("enum" = ["x86_64", "arm64"]))]
    pub arch: Option<String>,
    /// Upstream version, when known.
    pub version: Option<String>,
    /// One line: package and ABI, definition and cache key, or file.
    pub description: String,
    /// What identifies the unpatched source: `debian:linux-<version>`
    /// (Debian's own build), the definition base's identity
    /// (`debian:<linux-source .deb>`, `git:<commit>`, `tree:<tree id>`),
    /// or `path:<sha256>` (a file of unknown source).
    pub source: String,
    /// What identifies the image: `debian:<package>`,
    /// `source:<definition>@<cache key>`, `tree:<dir>@<cache key>`,
    /// `path:<sha256>`.
    pub build: String,
    /// The configuration's name: the definition or the Debian package.
    pub config: String,
    /// The tree's name where it has a widely used one (`debian`).
    pub tree_name: Option<String>,
    /// A `git:` base's repository, when it is an `https://` URL.
    pub git_url: Option<String>,
    /// A `git:` base's branch or tag (not a commit hash).
    pub git_ref: Option<String>,
    /// A `git:` base's full commit hash.
    pub git_commit: Option<String>,
    /// The patches applied over the base, in order.
    pub patches: Vec<PatchFacts>,
    /// The compiler's version line, where the cache recorded it.
    pub compiler: Option<String>,
    /// Seconds the source build took (when the cache built it).
    #[schemars(range(min = 0))]
    pub build_seconds: Option<f64>,
    /// When that build started, seconds since the epoch.
    #[schemars(range(min = 0))]
    pub build_started: Option<f64>,
    /// The build log, relative to the cache's `kbuild/images/`
    /// (`<definition>/<key>/build.log`).
    pub build_log: Option<String>,
}

/// One patch of a kernel definition.
#[derive(
    Debug, Clone, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize, schemars::JsonSchema,
)]
pub struct PatchFacts {
    /// Name relative to `kernels/patches/`.
    pub name: String,
    /// SHA-256 of its content, hex.
    pub sha256: String,
}

/// How a cell ended, as far as the run is concerned: decided once, by
/// [`CellStatus::judge`], for every front door.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CellStatus {
    /// Every case as expected.
    Passed,
    /// A case failed (or the VM died under a test, or no case ran).
    Failed,
    /// The cell could not run (kernel fetch, QEMU, initramfs).
    Error(String),
    /// Stopped by SIGINT/SIGTERM while running.
    Interrupted,
    /// Never started (interrupted, `--fail-fast`).
    NotRun(String),
}

impl CellStatus {
    /// The status of a cell that ran: interrupted, else passed when at
    /// least one case was reported and none failed.
    pub fn judge(result: &CellResult, counts: &Counts) -> CellStatus {
        if result.end == crate::result::VmEnd::Interrupted {
            CellStatus::Interrupted
        } else if counts.fail == 0 && counts.pass + counts.skip > 0 {
            CellStatus::Passed
        } else {
            CellStatus::Failed
        }
    }
    /// The word used in reports (`status` property, JSON).
    pub fn word(&self) -> &'static str {
        match self {
            CellStatus::Passed => "passed",
            CellStatus::Failed => "failed",
            CellStatus::Error(_) => "error",
            CellStatus::Interrupted => "interrupted",
            CellStatus::NotRun(_) => "not-run",
        }
    }
    /// Whether this is what the run expects.
    pub fn ok(&self) -> bool {
        *self == CellStatus::Passed
    }
}

/// A finished (or never started) cell.
#[derive(Debug, Clone)]
pub struct CellOutcome {
    /// What the cell is.
    pub meta: CellMeta,
    /// How it ended.
    pub status: CellStatus,
    /// The cases reported (after `--test` filtering and known failures).
    pub cases: Vec<Case>,
    /// Their counts.
    pub counts: Counts,
    /// Wall time of the cell (zero when it did not run).
    pub duration: Duration,
    /// Everything the VM produced, when it ran (of a repeated cell: the
    /// last iteration's, which is the failing one under `--until-fail`).
    pub result: Option<Box<CellResult>>,
    /// Per-case counts of a repeated cell (`--repeat`, `--until-fail`).
    pub repeat: Option<Box<crate::repeat::RepeatSummary>>,
}

impl CellOutcome {
    /// A cell without results: an error before boot, or never started.
    pub fn without_result(meta: CellMeta, status: CellStatus) -> CellOutcome {
        CellOutcome {
            meta,
            status,
            cases: Vec::new(),
            counts: Counts::default(),
            duration: Duration::ZERO,
            result: None,
            repeat: None,
        }
    }

    /// Where the cell's time went, when it ran ([`crate::profile`]).
    pub fn times(&self) -> Option<crate::profile::CellTimes> {
        self.result.as_ref().map(|r| crate::profile::CellTimes {
            cell: self.meta.name.clone(),
            wall: self.duration,
            profile: r.profile.clone(),
        })
    }
}

/// The host the run uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostFacts {
    /// `qemu-system-x86_64 --version`'s first line.
    pub qemu_version: String,
    /// The harness's version.
    pub harness_version: String,
}

/// Where a run's time went.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct RunStats {
    /// Preparing: guest binaries, kernels, kselftest builds.
    pub prepare: Duration,
    /// From the first cell's start to the last cell's end.
    pub cells_wall: Duration,
    /// CPU seconds of the QEMUs (children reaped while cells ran).
    pub cells_cpu: f64,
}

/// One event of a run, in the order they happen.
#[derive(Debug, Clone)]
pub enum Event {
    /// The run begins: every cell it will report, in report order.
    RunStarted {
        /// The cells.
        cells: Vec<CellMeta>,
        /// The host.
        host: HostFacts,
        /// When.
        at: SystemTime,
    },
    /// A preparation step (building guest binaries, fetching a kernel).
    Step(String),
    /// A cell booted.
    CellStarted {
        /// Its index in [`Event::RunStarted`]'s cells.
        index: usize,
        /// Its name.
        name: String,
    },
    /// A line a running cell printed, as it came (only for cells that ask:
    /// `--live`); bounded and sanitised by [`crate::vm`].
    Live {
        /// The cell's index.
        index: usize,
        /// The line.
        line: crate::vm::LiveLine,
    },
    /// A cell finished, failed to start, or will never start.
    CellFinished(Box<CellOutcome>),
    /// Every cell has a [`Event::CellFinished`].
    RunFinished {
        /// Timings.
        stats: RunStats,
        /// Whether SIGINT/SIGTERM stopped the run.
        interrupted: bool,
    },
}

#[cfg(test)]
pub(crate) mod tests_support {
    use super::CellMeta;

    /// A cell `k/t/s` (kernel `k`, topology `t`, suite `s`), never planned.
    pub(crate) fn meta() -> CellMeta {
        CellMeta {
            index: 0,
            name: "k/t/s".into(),
            kernel: "k".into(),
            kernel_name: "k".into(),
            topology: "t".into(),
            suite: "s".into(),
            expect: None,
            out_dir: "/o".into(),
            facts: None,
        }
    }
}

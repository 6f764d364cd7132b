//! The raw `matrix.yaml` as written: serde structs with
//! `deny_unknown_fields`. Nothing here is runnable; [`super::model`]
//! validates it into a [`super::Matrix`].

use serde::Deserialize;

/// The whole file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawMatrix {
    /// Named kernels, in file order.
    pub kernels: Vec<RawKernel>,
    /// Named topologies, in file order.
    pub topologies: Vec<RawTopology>,
    /// Named suites; `smoke` and `futex` exist without being declared.
    #[serde(default)]
    pub suites: Vec<RawSuite>,
    /// Which cells run (default: every kernel x topology x suite).
    #[serde(default)]
    pub cells: RawCells,
    /// Per-cell settings, applied in order (later entries win).
    #[serde(default)]
    pub overrides: Vec<RawOverride>,
    /// virtiofs shares of every cell: `HOST[:GUEST[:ro|rw]]`, host paths
    /// relative to the matrix file's directory.
    #[serde(default)]
    pub shares: Vec<String>,
    /// Whether every cell gets its artifacts share (default true).
    pub artifacts: Option<bool>,
}

/// A kernel and the features it is expected to have.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawKernel {
    /// Name used in cell names and filters.
    pub name: String,
    /// Kernel spec: `debian:<ver>`, `source:<name>`, `path:<bzImage>`, `tree:<dir>`.
    pub spec: String,
    /// The architecture the image is for: `x86_64` (default) or `arm64`.
    #[serde(default)]
    pub arch: Option<String>,
    /// Expected features (docs/futex-abi.md section 4). Keys left out default to
    /// the version table when the spec names a version.
    #[serde(default)]
    pub features: RawFeatures,
}

/// Expected kernel features, mapping to `guest_tests::expect::Expect`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawFeatures {
    /// `prctl(PR_FUTEX_HASH)` known.
    pub prctl: Option<bool>,
    /// The private hash works.
    pub private_hash: Option<bool>,
    /// The immutable flag works (patched kernels only).
    pub immutable: Option<bool>,
    /// FUTEX2_NUMA accepted.
    pub numa: Option<bool>,
    /// FUTEX2_MPOL honoured.
    pub mpol: Option<bool>,
    /// Automatic growth trigger.
    pub growth: Option<RawGrowth>,
    /// futex_requeue rejects mismatched entry flags (stable fix 19f94b390586).
    pub requeue_same_flags: Option<bool>,
    /// An exiting thread's pending robust entry owned by another task
    /// without FUTEX_WAITERS wakes one waiter (7.3).
    pub robust_pending_owned: Option<bool>,
}

/// Which clones trigger private-hash allocation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RawGrowth {
    /// None.
    None,
    /// `CLONE_THREAD & CLONE_VM`.
    Thread,
    /// `CLONE_VM & !CLONE_VFORK`.
    VmNotVfork,
    /// Any `CLONE_VM`.
    AnyVm,
}

/// A topology from explicit nodes.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawTopology {
    /// Name used in cell names and filters.
    pub name: String,
    /// Nodes in id order.
    pub nodes: Vec<RawNode>,
    /// Optional distance matrix (10 on the diagonal).
    pub distances: Option<Vec<Vec<u8>>>,
    /// Possible-but-offline nodes after `nodes` (0 or 1).
    #[serde(default)]
    pub offline: usize,
}

/// One node.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawNode {
    /// vCPUs (0: a CPU-less node).
    #[serde(default)]
    pub cpus: u32,
    /// Memory such as `512M` or `1G` (`0`: a memory-less node).
    pub mem: String,
}

/// A suite: a built-in one by name, or a list of tests.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawSuite {
    /// Name used in cell names and filters.
    pub name: String,
    /// A built-in suite (`smoke`, `futex`, ...).
    pub builtin: Option<String>,
    /// Or: tests in order.
    pub tests: Option<Vec<RawTest>>,
    /// Relative cost for sharding (default: number of tests).
    pub weight: Option<u32>,
    /// Timing-sensitive: its cells run one at a time, on cores never
    /// overcommitted (`crate::schedule`).
    #[serde(default)]
    pub exclusive: bool,
    /// Failures accepted as known (reported as skipped with the reason).
    #[serde(default)]
    pub known_failures: Vec<RawKnownFailure>,
}

/// A known failure of a suite.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawKnownFailure {
    /// Glob over case names (`binary/case`).
    pub case: String,
    /// Why it is accepted (shown in the report).
    pub reason: String,
    /// Only under this accelerator (`tcg` or `kvm`); default: always.
    pub accel: Option<String>,
    /// Only a failure whose one-line message matches this glob; default:
    /// any failure of the case.
    pub message: Option<String>,
    /// Only on kernels whose name matches one of these globs; default:
    /// every kernel.
    pub kernel: Option<Vec<String>>,
    /// A failure that fires in some runs only: how often it was seen, as
    /// measured (`"3 of 6 full tiers"`).
    pub intermittent: Option<String>,
}

/// One test of a custom suite.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawTest {
    /// Built-in guest binary name (`smoke`, `futex-numa`, ...) or a host
    /// path of a static binary (contains a `/`).
    pub bin: String,
    /// Test name in reports (default: the binary name).
    pub name: Option<String>,
    /// Arguments.
    #[serde(default)]
    pub args: Vec<String>,
    /// Timeout such as `60s`, `10m` (default 120s).
    pub timeout: Option<String>,
}

/// Cell selection.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawCells {
    /// Suites of the product (default: every declared suite, or
    /// `smoke` and `futex` when none are declared).
    pub suites: Option<Vec<String>>,
    /// Cells removed from the product.
    #[serde(default)]
    pub exclude: Vec<RawRule>,
    /// Cells added back (any kernel/topology/suite combination).
    #[serde(default)]
    pub include: Vec<RawRule>,
}

/// A pattern over cells: every given field must match (globs `*`, `?`).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawRule {
    /// Kernel name glob.
    pub kernel: Option<String>,
    /// Topology name glob.
    pub topology: Option<String>,
    /// Suite name glob.
    pub suite: Option<String>,
}

/// Settings for the cells a rule matches.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawOverride {
    /// Kernel name glob.
    pub kernel: Option<String>,
    /// Topology name glob.
    pub topology: Option<String>,
    /// Suite name glob.
    pub suite: Option<String>,
    /// `auto`, `kvm` or `tcg`.
    pub accel: Option<String>,
    /// Multiplies in-guest timeouts and the watchdog.
    pub timeout_scale: Option<f64>,
    /// Extra kernel command line words.
    pub cmdline: Option<String>,
    /// Replaces the matching cells' shares (`[]`: none).
    pub shares: Option<Vec<String>>,
    /// Artifacts share on or off for the matching cells.
    pub artifacts: Option<bool>,
    /// Words appended to QEMU's argv (as `--qemu-arg`).
    pub qemu_args: Option<Vec<String>>,
}

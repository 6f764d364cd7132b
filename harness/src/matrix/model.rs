//! The validated matrix: the only type the runner accepts. Built from
//! [`RawMatrix`] by [`validate`], which runs one validator per section of
//! the file (`super::validate`); each error names the file, line and
//! column of the offending entry.

use super::schema::RawMatrix;
use super::validate::{self, Axes, CellDefaults, Ctx};
use super::MatrixError;
use crate::host::AccelChoice;
use crate::kernelspec::KernelSpec;
use crate::share::ShareSpec;
use crate::suite::{self, Binary, SuiteTest};
use crate::topology::Topology;
use guest_tests::expect::Expect;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// A validated matrix.
#[derive(Debug, Clone)]
pub struct Matrix {
    /// The file it came from.
    pub path: PathBuf,
    /// Kernels, in file order.
    pub kernels: Vec<Kernel>,
    /// Topologies, in file order.
    pub topologies: Vec<NamedTopology>,
    /// Suites, in file order (implicit built-ins after).
    pub suites: Vec<Suite>,
    /// Cells to run, in kernel, topology, suite order.
    pub cells: Vec<Cell>,
}

/// A kernel with its expected features.
#[derive(Debug, Clone)]
pub struct Kernel {
    /// Name.
    pub name: String,
    /// The spec as written.
    pub spec_text: String,
    /// Parsed spec.
    pub spec: KernelSpec,
    /// The architecture the image is for.
    pub arch: crate::arch::Arch,
    /// Expected features.
    pub expect: Expect,
}

/// A topology with its name.
#[derive(Debug, Clone)]
pub struct NamedTopology {
    /// Name.
    pub name: String,
    /// The topology.
    pub topology: Topology,
}

/// What a suite runs.
#[derive(Debug, Clone, PartialEq)]
pub enum SuiteKind {
    /// A built-in suite (`suite::builtin`), given the kernel's expectations.
    Builtin(String),
    /// Explicit tests; built-in `futex-*` binaries without `--expect` get
    /// the kernel's expectations appended.
    Custom(Vec<SuiteTest>),
}

/// A named suite.
#[derive(Debug, Clone)]
pub struct Suite {
    /// Name.
    pub name: String,
    /// What it runs.
    pub kind: SuiteKind,
    /// Relative cost for sharding.
    pub weight: u32,
    /// Its cells never run on overcommitted cores, one at a time
    /// (`exclusive: true`: timing-sensitive).
    pub exclusive: bool,
    /// Known failures (each with its case, message and kernel globs).
    pub known_failures: Vec<crate::result::KnownFailure>,
}

/// One cell: indices into the matrix plus per-cell settings.
#[derive(Debug, Clone, PartialEq)]
pub struct Cell {
    /// `kernel/topology/suite`.
    pub name: String,
    /// Index into [`Matrix::kernels`].
    pub kernel: usize,
    /// Index into [`Matrix::topologies`].
    pub topology: usize,
    /// Index into [`Matrix::suites`].
    pub suite: usize,
    /// Accelerator.
    pub accel: AccelChoice,
    /// Timeout scale.
    pub timeout_scale: f64,
    /// Extra kernel command line words.
    pub cmdline: Vec<String>,
    /// virtiofs shares; host paths made relative to the matrix file's
    /// directory, not yet checked on disk ([`ShareSpec::resolve`] runs when
    /// the cell does, so `--list` works before the directories exist).
    pub shares: Vec<ShareSpec>,
    /// Whether the cell gets its artifacts share (when virtiofs works).
    pub artifacts: bool,
    /// Words appended to QEMU's argv (`qemu_args:` of an override).
    pub qemu_args: Vec<String>,
}

impl Matrix {
    /// The suite's tests of a cell (the planner puts the topology check
    /// first), with the kernel's expectations.
    pub fn suite_tests(&self, cell: &Cell) -> Vec<SuiteTest> {
        let k = &self.kernels[cell.kernel];
        let expect = k.expect.encode();
        let mut tests = Vec::new();
        match &self.suites[cell.suite].kind {
            SuiteKind::Builtin(name) => {
                // Validated: the name is known.
                tests.extend(suite::builtin(name, Some(&expect)).unwrap_or_default())
            }
            SuiteKind::Custom(list) => tests.extend(list.iter().cloned().map(|mut t| {
                let futex = matches!(t.binary, Binary::Builtin(b) if b.starts_with("futex-"));
                if futex && !t.args.iter().any(|a| a == "--expect") {
                    t.args.extend(["--expect".to_string(), expect.clone()]);
                }
                t
            })),
        }
        tests
    }

    /// Expected cost of a cell for sharding: vCPUs x (1 + suite weight).
    pub fn cost(&self, cell: &Cell) -> u64 {
        let cpus = self.topologies[cell.topology].topology.cpus() as u64;
        cpus * (1 + self.suites[cell.suite].weight as u64)
    }
}

/// `60s`, `10m`, `1h`, `90` (seconds).
pub fn parse_duration(s: &str) -> Option<Duration> {
    let s = s.trim();
    let (num, mult) = match s.char_indices().last()? {
        (i, 's') => (&s[..i], 1),
        (i, 'm') => (&s[..i], 60),
        (i, 'h') => (&s[..i], 3600),
        _ => (s, 1),
    };
    let n: u64 = num.trim().parse().ok()?;
    (n > 0).then(|| Duration::from_secs(n * mult))
}

/// Validates a parsed matrix (`text` is the file's text, for positions),
/// section by section: cells and overrides check their globs against the
/// kernels, topologies and suites validated before them.
pub fn validate(raw: RawMatrix, path: &Path, text: &str) -> Result<Matrix, MatrixError> {
    let cx = Ctx { path, text };
    let kernels = validate::kernels(&cx, raw.kernels)?;
    let topologies = validate::topologies(&cx, raw.topologies)?;
    let suites = validate::suites(&cx, raw.suites, &kernels)?;
    let defaults = CellDefaults {
        shares: validate::shares(&cx, &raw.shares)?,
        artifacts: raw.artifacts.unwrap_or(true),
    };
    let axes = Axes {
        kernels: &kernels,
        topologies: &topologies,
        suites: &suites.all,
    };
    let cells = validate::cells(&cx, &raw.cells, &axes, &suites.default_product, &defaults)?;
    let cells = validate::overrides(&cx, &raw.overrides, &axes, cells)?;
    Ok(Matrix {
        path: path.to_path_buf(),
        kernels,
        topologies,
        suites: suites.all,
        cells,
    })
}

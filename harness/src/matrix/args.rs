//! The command line of `harness matrix` and `harness junit merge`: clap
//! types whose values are already the typed ones the door uses (the
//! parsers run at the edge, before the matrix file is read).

use crate::args::{ProfileArgs, ReportFiles};
use std::path::PathBuf;

/// `harness matrix`.
#[derive(Debug, Clone, clap::Args)]
pub struct MatrixArgs {
    /// The matrix file (default: ./matrix.yaml, else the built-in default matrix).
    #[arg(long, default_value = "matrix.yaml")]
    pub matrix: PathBuf,
    /// Cells at once: `auto` (a cell starts while the measured host CPU
    /// and the running cells' learned demand leave room for it; memory
    /// within ~75% of what is available), `vcpus` (declared vCPUs within
    /// the host's cores) or N cells.
    #[arg(
        short = 'j',
        long = "jobs",
        default_value = "auto",
        value_name = "auto|vcpus|N",
        value_parser = crate::schedule::Budget::parse_jobs
    )]
    pub jobs: crate::schedule::Admission,
    /// Under TCG: `auto` (every vCPU of a guest on one host thread,
    /// `single`, when cells share the host; `multi` when one runs at a
    /// time), `multi` (a host thread per vCPU) or `single`.
    #[arg(
        long,
        value_name = "auto|multi|single",
        default_value = "auto",
        value_parser = crate::schedule::TcgChoice::parse
    )]
    pub tcg_thread: crate::schedule::TcgChoice,
    /// Only kernels whose name matches (glob; repeatable or comma-separated).
    #[arg(long)]
    pub kernel: Vec<String>,
    /// Only topologies whose name matches (glob).
    #[arg(long)]
    pub topology: Vec<String>,
    /// Only suites whose name matches (glob).
    #[arg(long)]
    pub suite: Vec<String>,
    /// Only test cases whose `binary/case` name matches (glob); topology
    /// cases are always kept. `futex-numa/*` also skips the other binaries.
    #[arg(long = "test", value_name = "GLOB")]
    pub test: Option<String>,
    /// List the selected cells (with shard assignments) and exit.
    #[arg(long)]
    pub list: bool,
    /// Print each selected cell's plan (what would be fetched or built,
    /// its tests, initramfs, kernel command line, QEMU's argv) without
    /// doing anything: no QEMU needed, nothing fetched, built or written.
    #[arg(long, conflicts_with = "list")]
    pub dry_run: bool,
    /// With --list: list as JSON for a CI job matrix. Otherwise `--json
    /// FILE` writes the JSON results file (schema: docs/results.md).
    #[arg(long, value_name = "FILE", num_args = 0..=1)]
    pub json: Option<Option<PathBuf>>,
    /// Run shard I of N (1-based; deterministic, balanced by cost).
    #[arg(long, value_name = "I/N", value_parser = super::plan::parse_shard)]
    pub shard: Option<(usize, usize)>,
    /// Stop starting cells after the first unexpected result.
    #[arg(long, conflicts_with = "keep_going")]
    pub fail_fast: bool,
    /// Run every cell whatever happens (the default). `--no-fail-fast` is
    /// nextest's name for it.
    #[arg(long, visible_alias = "no-fail-fast")]
    pub keep_going: bool,
    /// Only the cells that did not pass in the last aggregate report under --out.
    #[arg(long)]
    pub rerun_failed: bool,
    /// QEMU's gdbstub for the one selected cell (a usage error unless the
    /// selection is exactly one cell): see `harness run --gdb`.
    #[arg(long, value_name = "SOCKET|PORT", num_args = 0..=1, default_missing_value = "")]
    pub gdb: Option<String>,
    /// With --gdb: start the guest at once instead of waiting for gdb.
    #[arg(long, requires = "gdb")]
    pub gdb_no_wait: bool,
    /// Reports and logs.
    #[arg(long, default_value = "target/matrix")]
    pub out: PathBuf,
    /// Learned cell costs to read and update (default: OUT/costs.json).
    /// Given explicitly, `--shard` balances by it too (every shard of a
    /// run must be given the same file).
    #[arg(long, value_name = "FILE")]
    pub costs: Option<PathBuf>,
    /// Boot every cell on its own. By default cells whose VM would be the
    /// same (kernel, topology, command line, shares: a kernel's `smoke`
    /// and `futex` cells) run their tests in one boot, each keeping its
    /// own verdict and report directory.
    #[arg(long)]
    pub boot_per_cell: bool,
    /// Debian mirror for `debian:` kernels.
    #[arg(long, value_name = "URL")]
    pub debian_mirror: Option<String>,
    /// The other report files (--html, --kcidb, --history).
    #[command(flatten)]
    pub reports: ReportFiles,
    /// Cost profile output (--profile).
    #[command(flatten)]
    pub profile: ProfileArgs,
}

impl MatrixArgs {
    /// `--gdb` and whether the guest waits for gdb.
    pub fn gdb(&self) -> Option<(String, bool)> {
        self.gdb.clone().map(|g| (g, !self.gdb_no_wait))
    }
}

/// `harness junit merge OUT IN...`.
#[derive(Debug, Clone, clap::Args)]
pub struct MergeArgs {
    /// The merged report.
    pub out: PathBuf,
    /// Reports to join (shard reports), in order.
    #[arg(required = true)]
    pub inputs: Vec<PathBuf>,
}

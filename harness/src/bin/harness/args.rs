//! The command line of the front doors that live in the library
//! (`matrix`, `junit merge`, `bench`): clap types here, plain requests there.

use harness::bench;
use harness::host::AccelChoice;
use harness::matrix::cli;
use std::path::PathBuf;

/// `harness matrix`.
#[derive(Debug, Clone, clap::Args)]
pub struct MatrixArgs {
    /// The matrix file.
    #[arg(long, default_value = "matrix.yaml")]
    pub matrix: PathBuf,
    /// Cells at once: `auto` (host cores and ~75% of available memory) or N.
    #[arg(short = 'j', long = "jobs", default_value = "auto")]
    pub jobs: String,
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
    /// With --list: list as JSON for a CI job matrix. Otherwise `--json
    /// FILE` writes the JSON results file (schema: docs/results.md).
    #[arg(long, value_name = "FILE", num_args = 0..=1)]
    pub json: Option<Option<PathBuf>>,
    /// Run shard I of N (1-based; deterministic, balanced by cost).
    #[arg(long, value_name = "I/N")]
    pub shard: Option<String>,
    /// Stop starting cells after the first unexpected result.
    #[arg(long, conflicts_with = "keep_going")]
    pub fail_fast: bool,
    /// Run every cell whatever happens (the default).
    #[arg(long)]
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
    /// Debian mirror for `debian:` kernels.
    #[arg(long, value_name = "URL")]
    pub debian_mirror: Option<String>,
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

impl MatrixArgs {
    /// The library's request.
    pub fn request(self) -> cli::Request {
        cli::Request {
            matrix: self.matrix,
            jobs: self.jobs,
            kernel: self.kernel,
            topology: self.topology,
            suite: self.suite,
            test: self.test,
            list: self.list,
            json: self.json,
            shard: self.shard,
            fail_fast: self.fail_fast,
            keep_going: self.keep_going,
            rerun_failed: self.rerun_failed,
            out: self.out,
            debian_mirror: self.debian_mirror,
            gdb: self.gdb.map(|g| (g, !self.gdb_no_wait)),
        }
    }
}

impl MergeArgs {
    /// The library's request.
    pub fn request(self) -> cli::MergeRequest {
        cli::MergeRequest {
            out: self.out,
            inputs: self.inputs,
        }
    }
}

/// `harness bench`.
#[derive(Debug, Clone, clap::Args)]
pub struct BenchArgs {
    /// Kernel (`debian:<v>`, `source:<definition>` or `path:<bzImage>`); repeatable.
    #[arg(long = "kernel", required = true)]
    pub kernels: Vec<String>,
    /// Topology `nodes=N,cpus=C,mem=SIZE`; repeatable.
    #[arg(long = "topology", default_value = "nodes=2,cpus=2,mem=512M")]
    pub topologies: Vec<String>,
    /// Built-in configuration set: standard, seed, numa (ignored with --config
    /// unless given explicitly too).
    #[arg(long)]
    pub set: Option<String>,
    /// A configuration `NAME[:KEY=VAL,...]` (see futex-bench --help); repeatable.
    #[arg(long = "config", value_name = "SPEC")]
    pub configs: Vec<String>,
    /// Configuration the ratios are relative to (default: the first).
    #[arg(long)]
    pub baseline: Option<String>,
    /// Rounds per configuration (interleaved).
    #[arg(long, default_value_t = 3)]
    pub rounds: usize,
    /// Seconds per round.
    #[arg(long, default_value_t = 1.0)]
    pub runtime: f64,
    /// Worker threads per hash configuration (default: one per vCPU).
    #[arg(long)]
    pub threads: Option<usize>,
    /// Futexes per thread (perf's default 1024).
    #[arg(long)]
    pub futexes: Option<usize>,
    /// Kernel expectations for futex-bench (`immutable=1` makes a missing
    /// immutable hash FAIL); default: from the kernel version.
    #[arg(long)]
    pub expect: Option<String>,
    /// Output directory (cells, bench.csv, bench.json, bench.svg).
    #[arg(long, default_value = "harness-out/bench")]
    pub out: PathBuf,
    /// Accelerator.
    #[arg(long, value_enum, default_value_t = AccelChoice::Auto)]
    pub accel: AccelChoice,
    /// Debian mirror for `debian:` kernels.
    #[arg(long, value_name = "URL")]
    pub debian_mirror: Option<String>,
    /// Do not run: write DIR/initramfs.cpio and DIR/argv (NUL-separated, a
    /// bare QEMU boot of the first kernel and topology with `--bare-suite`,
    /// serial ports to files, no QMP) and exit. Used by `cargo xtask bench-boot`.
    #[arg(long, value_name = "DIR")]
    pub emit_bare: Option<PathBuf>,
    /// Suite for --emit-bare.
    #[arg(long, default_value = "none")]
    pub bare_suite: String,
}

impl BenchArgs {
    /// The library's request.
    pub fn request(self) -> bench::Options {
        bench::Options {
            kernels: self.kernels,
            topologies: self.topologies,
            set: self.set,
            configs: self.configs,
            baseline: self.baseline,
            rounds: self.rounds,
            runtime: self.runtime,
            threads: self.threads,
            futexes: self.futexes,
            expect: self.expect,
            out: self.out,
            accel: self.accel,
            debian_mirror: self.debian_mirror,
            emit_bare: self.emit_bare,
            bare_suite: self.bare_suite,
        }
    }
}

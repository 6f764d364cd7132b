//! The command line of the front doors that live in the library
//! (`matrix`, `junit merge`, `bench`, `report kcidb`, `report html`, and
//! the `--kcidb` flags of `run` and `matrix`): clap types here, plain requests there.

use harness::args::{base_url, origin, HistoryArgs, KcidbArgs, ProfileArgs};
use harness::bench;
use harness::host::AccelChoice;
use harness::matrix::cli;
use harness::reporter::kcidb;
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
        value_parser = harness::schedule::Budget::parse_jobs
    )]
    pub jobs: harness::schedule::Admission,
    /// Under TCG: `auto` (every vCPU of a guest on one host thread,
    /// `single`, when cells share the host; `multi` when one runs at a
    /// time), `multi` (a host thread per vCPU) or `single`.
    #[arg(
        long,
        value_name = "auto|multi|single",
        default_value = "auto",
        value_parser = harness::schedule::TcgChoice::parse
    )]
    pub tcg_thread: harness::schedule::TcgChoice,
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
    /// Self-contained HTML report of the run (docs/report.md), rewritten
    /// as cells finish.
    #[arg(long, value_name = "FILE", conflicts_with = "list")]
    pub html: Option<PathBuf>,
    /// Run shard I of N (1-based; deterministic, balanced by cost).
    #[arg(long, value_name = "I/N", value_parser = harness::matrix::plan::parse_shard)]
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
    #[command(flatten)]
    pub kcidb: KcidbArgs,
    #[command(flatten)]
    pub profile: ProfileArgs,
    #[command(flatten)]
    pub history: HistoryArgs,
}

/// `harness history`: the runs of a history file.
#[derive(Debug, Clone, clap::Args)]
pub struct HistoryListArgs {
    #[command(flatten)]
    pub db: DbArgs,
    /// As JSON (one object per run).
    #[arg(long)]
    pub json: bool,
}

/// `--db FILE` / `--out DIR` of `history` and `compare`.
#[derive(Debug, Clone, clap::Args)]
pub struct DbArgs {
    /// The history file (default: <out>/history.sqlite).
    #[arg(long, value_name = "FILE")]
    pub db: Option<PathBuf>,
    /// The output directory of the runs (`--out` of run or matrix).
    #[arg(long, value_name = "DIR", default_value = "harness-out")]
    pub out: PathBuf,
}

impl DbArgs {
    /// The history file.
    pub fn path(&self) -> PathBuf {
        self.db
            .clone()
            .unwrap_or_else(|| self.out.join(harness::history::FILE_NAME))
    }
}

/// `harness compare A B`.
#[derive(Debug, Clone, clap::Args)]
pub struct CompareArgs {
    /// The earlier run: a JSON results file, a run id of the history,
    /// `last` or `previous`.
    pub a: String,
    /// The later run, the same way.
    pub b: String,
    #[command(flatten)]
    pub db: DbArgs,
    /// As JSON.
    #[arg(long)]
    pub json: bool,
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
            tcg_thread: self.tcg_thread,
            kernel: self.kernel,
            topology: self.topology,
            suite: self.suite,
            test: self.test,
            list: self.list,
            dry_run: self.dry_run,
            json: self.json,
            html: self.html,
            shard: self.shard,
            fail_fast: self.fail_fast,
            rerun_failed: self.rerun_failed,
            out: self.out,
            debian_mirror: self.debian_mirror,
            kcidb: self.kcidb.output(),
            gdb: self.gdb.map(|g| (g, !self.gdb_no_wait)),
            costs: self.costs,
            boot_per_cell: self.boot_per_cell,
            history: self.history.target(),
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
    /// Kernel (`debian:<v>`, `source:<definition>`, `path:<bzImage>` or
    /// `tree:<dir>`); repeatable.
    #[arg(long = "kernel", required = true)]
    pub kernels: Vec<String>,
    /// The `tree:` kernels start their config from FILE instead of
    /// tinyconfig (the guest fragment merged over it, the required options
    /// checked).
    #[arg(long, value_name = "FILE")]
    pub kernel_config: Option<PathBuf>,
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
    /// Also write the run's JSON results file (docs/results.md; its cells'
    /// `bench` rows are what `harness compare` tests for significance).
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
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
            kernel_config: self.kernel_config,
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

/// `harness report ...`.
#[derive(Debug, Clone, clap::Subcommand)]
pub enum ReportCommand {
    /// A KernelCI KCIDB document (schema 5.3, docs/kcidb.md); with
    /// --submit, posted to a KCIDB-ng service.
    Kcidb(KcidbReportArgs),
    /// One self-contained HTML page of one or more JSON results files
    /// (docs/report.md).
    Html(HtmlReportArgs),
}

impl ReportCommand {
    /// Runs the report.
    pub fn run(self) -> Result<(), harness::error::Error> {
        match self {
            ReportCommand::Kcidb(a) => a.run(),
            ReportCommand::Html(a) => a.run(),
        }
    }
}

/// `harness report html RESULTS.json... -o FILE`.
#[derive(Debug, Clone, clap::Args)]
pub struct HtmlReportArgs {
    /// JSON results files (`--json` of run or matrix), in order.
    #[arg(required = true, value_name = "RESULTS")]
    pub results: Vec<PathBuf>,
    /// Write the page here.
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: PathBuf,
}

impl HtmlReportArgs {
    /// Runs `harness report html`: a results file that cannot be read is
    /// a usage error naming it.
    pub fn run(self) -> Result<(), harness::error::Error> {
        use harness::error::Error;
        use harness::reporter::html;
        harness::outputs::check_file("--output", &self.output).map_err(Error::usage)?;
        let runs = self
            .results
            .iter()
            .map(|p| html::read(p))
            .collect::<Result<Vec<_>, _>>()
            .map_err(Error::usage)?;
        harness::reporter::write_atomic(&self.output, html::render(&runs).as_bytes())
            .map_err(Error::infra)
    }
}

/// `harness report kcidb`.
#[derive(Debug, Clone, clap::Args)]
pub struct KcidbReportArgs {
    /// The JSON results file of a run (`--json` of run or matrix).
    #[arg(long, value_name = "FILE")]
    pub results: PathBuf,
    /// The CI system's KCIDB origin name ([a-z0-9_]+).
    #[arg(long, value_name = "NAME", value_parser = origin)]
    pub origin: String,
    /// Write the document here (default: stdout, unless --submit).
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Where the cell directories are published (see `run --log-base-url`).
    #[arg(long, value_name = "URL", value_parser = base_url)]
    pub log_base_url: Option<String>,
    /// Post the document to this KCIDB-ng service (its base URL), with the
    /// token from $KCIDB_TOKEN, and wait for it to be processed.
    #[arg(long, value_name = "URL")]
    pub submit: Option<String>,
    /// Seconds to wait for the service to process the submission (0: do
    /// not ask).
    #[arg(long, value_name = "SECONDS", default_value_t = 60)]
    pub wait: u64,
}

impl KcidbReportArgs {
    /// Runs `harness report kcidb`.
    pub fn run(self) -> Result<(), harness::error::Error> {
        let req = kcidb::ReportRequest {
            results: self.results,
            options: kcidb::Options {
                origin: self.origin,
                log_base_url: self.log_base_url,
            },
            output: self.output,
            submit: self.submit,
            wait: std::time::Duration::from_secs(self.wait),
        };
        let doc = kcidb::report(&req, &mut |line| eprintln!("harness: kcidb: {line}"))?;
        if let Some(doc) = doc {
            // A closed pipe (`| head`) is not an error worth a panic.
            let _ = std::io::Write::write_all(&mut std::io::stdout(), &doc);
        }
        Ok(())
    }
}

/// The log filter with ureq's wire-level trace log (which shows request
/// headers unredacted, a KCIDB token among them) capped at its debug log.
pub fn cap_wire_log(filter: tracing_subscriber::EnvFilter) -> tracing_subscriber::EnvFilter {
    use tracing_subscriber::filter::LevelFilter;
    if filter
        .max_level_hint()
        .is_some_and(|l| l < LevelFilter::TRACE)
    {
        return filter;
    }
    ["ureq=debug", "ureq_proto=debug"]
        .iter()
        .filter_map(|d| d.parse().ok())
        .fold(filter, |f, d| f.add_directive(d))
}

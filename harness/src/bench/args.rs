//! The command line of `harness bench`: a clap type whose values are the
//! ones the door uses.

use crate::host::AccelChoice;
use std::path::PathBuf;

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
    /// The guest architecture (Debian's kernel of it, its QEMU and guest
    /// binaries).
    #[arg(long, value_parser = crate::args::arch_parser(), default_value_t = crate::arch::Arch::host_or_default())]
    pub arch: crate::arch::Arch,
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

//! The command line of `harness run` (its clap types; the debugging
//! flags are in [`super::debug`]).

use crate::host::AccelChoice;
use std::path::PathBuf;

/// `harness run`: one kernel in one topology, one suite.
#[derive(Debug, Clone, clap::Args)]
pub struct RunArgs {
    /// Kernel: `debian:<version>` (Debian's prebuilt cloud kernel),
    /// `path:<bzImage>`, `source:<name>` (kernels/<name>.yaml) or
    /// `tree:<dir>` (your kernel tree, built as it is, out of tree).
    #[arg(long)]
    pub kernel: String,
    /// With a `tree:` kernel: start its config from FILE instead of
    /// tinyconfig (the guest fragment is merged over it, the required
    /// options checked).
    #[arg(long, value_name = "FILE")]
    pub kernel_config: Option<PathBuf>,
    /// Topology: `nodes=N,cpus=C,mem=SIZE[,distance=D]` (C vCPUs and SIZE memory per node).
    #[arg(long, default_value = "nodes=1,cpus=2,mem=512M")]
    pub topology: String,
    /// Built-in suite (smoke, futex, none, fault-*).
    #[arg(long, default_value = "smoke")]
    pub suite: String,
    /// A static KTAP-speaking (or plain) guest binary to run too; repeatable.
    #[arg(long = "guest-bin", value_name = "PATH")]
    pub guest_bins: Vec<PathBuf>,
    /// Timeout for each --guest-bin, in seconds.
    #[arg(long, default_value_t = 120)]
    pub guest_bin_timeout: u64,
    /// An environment variable every test binary in the guest gets
    /// (repeatable), e.g. FUTEX_STRESS_ITERATIONS=50 or
    /// FUTEX_RACE_SERIALIZE=1 (README, "Suites and your own binaries").
    #[arg(long = "guest-env", value_name = "KEY=VALUE")]
    pub guest_env: Vec<String>,
    /// JUnit XML output (default: <out>/<cell>/junit.xml).
    #[arg(long)]
    pub junit: Option<PathBuf>,
    /// JSON results file (schema: docs/results.md).
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// The other report files (--html, --kcidb, --history).
    #[command(flatten)]
    pub reports: crate::args::ReportFiles,
    /// Cost profile output (--profile).
    #[command(flatten)]
    pub profile: crate::args::ProfileArgs,
    /// Directory for console logs, raw KTAP and QEMU's argv.
    #[arg(long, default_value = "harness-out")]
    pub out: PathBuf,
    /// The guest architecture: Debian's kernel of that architecture, its
    /// QEMU (`virt` for arm64) and guest binaries.
    #[arg(long, value_parser = crate::args::arch_parser(), default_value_t = crate::arch::Arch::host_or_default())]
    pub arch: crate::arch::Arch,
    /// Accelerator: auto uses KVM only where hardware KVM really works.
    #[arg(long, value_enum, default_value_t = AccelChoice::Auto)]
    pub accel: AccelChoice,
    /// Under TCG: one host thread per vCPU (`multi`, QEMU's default) or
    /// every vCPU on one thread in turns (`single`).
    #[arg(long, value_enum, default_value_t = crate::qemu::TcgThread::Multi)]
    pub tcg_thread: crate::qemu::TcgThread,
    /// Whole-VM watchdog in seconds (default: boot allowance + test timeouts).
    #[arg(long)]
    pub timeout: Option<u64>,
    /// Multiply every in-guest timeout by this factor (in (0, 100]).
    #[arg(long, default_value_t = 1.0, value_parser = timeout_scale)]
    pub timeout_scale: f64,
    /// Extra kernel command line words.
    #[arg(long, allow_hyphen_values = true)]
    pub append: Option<String>,
    /// Expected kernel features for the futex suites (`numa=1,private_hash=0,...`);
    /// default: from the kernel version's row of the ABI table.
    #[arg(long)]
    pub expect: Option<String>,
    /// Boot again up to this many times when the guest dies before
    /// guest-init reports anything with a known crash signature (QEMU 7's
    /// TCG crashing Debian's 6.12, docs/reliability.md); any other boot
    /// crash fails the cell at once.
    #[arg(long, default_value_t = crate::cell::DEFAULT_BOOT_RETRIES)]
    pub boot_retries: u32,
    /// Kernel source for the kselftest-* suites: `debian:X.Y` or a pristine
    /// kernel tree (default: Debian's linux-source of the kernel's series).
    #[arg(long, value_name = "TREE")]
    pub kselftest_tree: Option<String>,
    /// Skip the topology check.
    #[arg(long)]
    pub no_topology_check: bool,
    /// Debian mirror for `debian:` kernels (default: $HARNESS_DEBIAN_MIRROR,
    /// else the machine's apt configuration).
    #[arg(long, value_name = "URL")]
    pub debian_mirror: Option<String>,
    /// Share a host directory with the guest over virtiofs (repeatable):
    /// `HOST_DIR[:GUEST_PATH[:ro|rw]]`, default guest path `/mnt/<name>`.
    /// A `--guest-bin` inside a share runs from there, unpacked.
    #[arg(long = "share", value_name = "HOST_DIR[:GUEST_PATH[:ro|rw]]")]
    pub shares: Vec<String>,
    /// No per-cell artifacts share (`<out>/<cell>/artifacts`, guest
    /// `/harness/artifacts`, `$HARNESS_ARTIFACTS`), which is on by default
    /// when virtiofs works.
    #[arg(long)]
    pub no_artifacts: bool,
    /// Only test cases whose `binary/case` name matches (glob, as in the
    /// matrix); with one exact case of a futex binary only that case runs.
    #[arg(long = "test", value_name = "GLOB")]
    pub test: Option<String>,
    /// Repetition: --repeat N, --until-fail [--max N], --fresh-boot.
    #[command(flatten)]
    pub repeat: RepeatArgs,
    /// Debugging: --dry-run, --live, --exec, --shell, --gdb, --dump-on-panic, --qemu-arg.
    #[command(flatten)]
    pub debug: super::debug::DebugArgs,
}

/// `--timeout-scale`: a factor that leaves every timeout a real duration
/// (0, a negative, NaN or infinity would give each test no time or
/// forever; the same bound as matrix.yaml's `timeout_scale:`).
pub fn timeout_scale(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(f) if f.is_finite() && f > 0.0 && f <= 100.0 => Ok(f),
        _ => Err(format!(
            "expected a factor in (0, 100], e.g. 2.5 (got {s:?})"
        )),
    }
}

/// `--repeat N`, `--until-fail [--max N]`, `--fresh-boot` of `run`.
#[derive(Debug, Clone, clap::Args)]
pub struct RepeatArgs {
    /// Run the selected tests N times (in the same booted guest unless
    /// --fresh-boot) and report per case: runs, failures, first failing
    /// iteration.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=100_000),
          conflicts_with = "until_fail")]
    pub repeat: Option<u32>,
    /// Run the selected tests again and again until one fails (at most
    /// --max times); that iteration's console and KTAP are kept in
    /// <out>/<cell>/iteration-K/.
    #[arg(long)]
    pub until_fail: bool,
    /// With --until-fail: give up after this many iterations.
    #[arg(long, value_name = "N", requires = "until_fail",
          value_parser = clap::value_parser!(u32).range(1..=100_000),
          default_value_t = crate::repeat::DEFAULT_MAX)]
    pub max: u32,
    /// Boot a new VM for each iteration (a clean kernel each time) instead
    /// of looping in one guest.
    #[arg(long)]
    pub fresh_boot: bool,
}

impl RepeatArgs {
    /// The cell's repeat, `None` when not asked; `--fresh-boot` alone is a
    /// usage error.
    pub fn repeat(&self) -> Result<Option<crate::repeat::Repeat>, String> {
        let times = match (self.repeat, self.until_fail) {
            (Some(n), _) => n,
            (None, true) => self.max,
            (None, false) if self.fresh_boot => {
                return Err("--fresh-boot needs --repeat N or --until-fail".into())
            }
            (None, false) => return Ok(None),
        };
        Ok(Some(crate::repeat::Repeat {
            times,
            until_fail: self.until_fail,
            fresh_boot: self.fresh_boot,
        }))
    }
}

//! The command lines of `harness bisect` and `harness bisect-step`, and the
//! `bisect-step` argv the orchestrator hands to `git bisect run`.

use super::BadIf;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Options shared by `bisect` and `bisect-step`.
#[derive(clap::Args, Debug, Clone)]
pub struct CommonArgs {
    /// The kernel git repository to bisect (left as it was found).
    #[arg(long)]
    pub tree: PathBuf,
    /// Kernel definition (`kernels/<name>.yaml`) giving the config base,
    /// fragments, required options and expectations (its base and patches
    /// are not used).
    #[arg(long, default_value = "7.3")]
    pub kernel: String,
    /// The architecture each step builds for and boots (`arm64`: a cross
    /// build, `ARCH=arm64 CROSS_COMPILE=aarch64-linux-gnu-`).
    #[arg(long, value_parser = crate::args::arch_parser(), default_value_t = crate::arch::Arch::host_or_default())]
    pub arch: crate::arch::Arch,
    /// Topology: `nodes=N,cpus=C,mem=SIZE[,distance=D]` or a topology name
    /// from matrix.yaml (e.g. 2n2c).
    #[arg(long, default_value = "nodes=2,cpus=2,mem=512M")]
    pub topology: String,
    /// `suite[/case glob]`, e.g. `futex/futex-prctl/*` (the glob is matched
    /// against `binary/case` names; only binaries it can match run); for the
    /// bench suite `bench[/CONFIG glob]`, e.g. `bench/b1024,global`
    /// (comma-separated globs select any of them).
    #[arg(long)]
    pub test: String,
    /// The bisect directory: steps.jsonl, per-step logs and JUnit, the
    /// object directory, bisect.log.
    #[arg(long, default_value = "bisect-out")]
    pub out: PathBuf,
    /// Run each step this many times (flaky guard; with --metric, the runs
    /// whose median is compared with --threshold).
    #[arg(long, default_value_t = 1)]
    pub repeat: u32,
    /// With --repeat: a step is bad if any / all repetitions are bad (test
    /// bisection; with --metric the median of the repetitions decides).
    #[arg(long, value_enum, default_value_t = BadIf::Any, conflicts_with = "metric")]
    pub bad_if: BadIf,
    /// Performance bisection: the bench number a step is judged by (with
    /// --test bench[/CONFIG glob] and --threshold): ops_per_s_mean:CONFIG,
    /// per_thread_mean:CONFIG or ratio:CONFIG/BASELINE.
    #[arg(long, value_name = "NAME")]
    pub metric: Option<String>,
    /// With --metric: `<N` (bad when the median over --repeat runs is below
    /// N) or `>N` (bad above N); N may end in k, M or G. Quote it for the
    /// shell: --threshold '<0.8'.
    #[arg(long, allow_hyphen_values = true)]
    pub threshold: Option<String>,
    /// make -j (default: the number of CPUs).
    #[arg(long)]
    pub jobs: Option<usize>,
    /// Do not use ccache even when it is installed.
    #[arg(long)]
    pub no_ccache: bool,
    /// Multiply every in-guest timeout by this factor.
    #[arg(long, default_value_t = 1.0)]
    pub timeout_scale: f64,
    /// Testing: run this shell command in the tree instead of build + boot
    /// (exit 0 good, 125 skip, other bad).
    #[arg(long, hide = true)]
    pub step_command: Option<String>,
}

/// `harness bisect`.
#[derive(clap::Args, Debug, Clone)]
pub struct BisectArgs {
    /// Known good revision.
    #[arg(long)]
    pub good: String,
    /// Known bad revision.
    #[arg(long)]
    pub bad: String,
    /// Make every check and say what the bisection would do (the range,
    /// the steps, the build, each step's cell and QEMU's argv), touching
    /// nothing: the tree, --out and the cache stay as they are.
    #[arg(long)]
    pub dry_run: bool,
    /// The options shared with the other subcommand.
    #[command(flatten)]
    pub common: CommonArgs,
}

/// `harness bisect-step` (run by `git bisect run`).
#[derive(clap::Args, Debug, Clone)]
pub struct StepArgs {
    /// What the step is for: check-good, check-bad or bisect.
    #[arg(long, default_value = "bisect")]
    pub phase: String,
    /// The options shared with the other subcommand.
    #[command(flatten)]
    pub common: CommonArgs,
}

/// The `bisect-step` command for `c` in `phase`, run by the harness binary `exe`.
pub(super) fn step_command(exe: &Path, c: &CommonArgs, phase: &str) -> Command {
    let mut cmd = Command::new(exe);
    cmd.args(step_argv(c, phase));
    cmd
}

/// The `bisect-step` arguments for `c` (absolute paths).
pub fn step_argv(c: &CommonArgs, phase: &str) -> Vec<String> {
    let abs = |p: &Path| std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf());
    let mut v: Vec<String> = vec![
        "bisect-step".into(),
        "--phase".into(),
        phase.into(),
        "--tree".into(),
        abs(&c.tree).display().to_string(),
        "--kernel".into(),
        c.kernel.clone(),
        "--arch".into(),
        c.arch.name().into(),
        "--topology".into(),
        c.topology.clone(),
        "--test".into(),
        c.test.clone(),
        "--out".into(),
        abs(&c.out).display().to_string(),
        "--repeat".into(),
        c.repeat.to_string(),
        "--timeout-scale".into(),
        c.timeout_scale.to_string(),
    ];
    match (&c.metric, &c.threshold) {
        (Some(m), Some(t)) => v.extend([
            "--metric".into(),
            m.clone(),
            "--threshold".into(),
            t.clone(),
        ]),
        // --bad-if conflicts with --metric.
        _ => v.extend([
            "--bad-if".into(),
            match c.bad_if {
                BadIf::Any => "any".into(),
                BadIf::All => "all".into(),
            },
        ]),
    }
    if let Some(j) = c.jobs {
        v.extend(["--jobs".into(), j.to_string()]);
    }
    if c.no_ccache {
        v.push("--no-ccache".into());
    }
    if let Some(s) = &c.step_command {
        v.extend(["--step-command".into(), s.clone()]);
    }
    v
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// Arguments with `--test test` and the defaults (a small topology).
    pub(in crate::bisect) fn common(test: &str) -> CommonArgs {
        CommonArgs {
            tree: "t".into(),
            kernel: "7.3".into(),
            arch: crate::arch::Arch::X86_64,
            topology: "nodes=2,cpus=1,mem=256M".into(),
            test: test.into(),
            out: "o".into(),
            repeat: 1,
            bad_if: BadIf::Any,
            jobs: None,
            no_ccache: false,
            timeout_scale: 1.0,
            step_command: None,
            metric: None,
            threshold: None,
        }
    }

    #[test]
    fn step_argv_round_trips_the_options() {
        let mut c = common("futex/futex-prctl/*");
        c.repeat = 3;
        c.bad_if = BadIf::All;
        c.jobs = Some(2);
        c.no_ccache = true;
        c.step_command = Some("make test".into());
        let argv = step_argv(&c, "check-good");
        #[derive(clap::Parser)]
        struct P {
            #[command(subcommand)]
            s: S,
        }
        #[derive(clap::Subcommand)]
        enum S {
            BisectStep(StepArgs),
        }
        let p = <P as clap::Parser>::try_parse_from(std::iter::once("h".to_string()).chain(argv))
            .unwrap();
        let S::BisectStep(a) = p.s;
        assert_eq!(a.phase, "check-good");
        assert_eq!(a.common.repeat, 3);
        assert_eq!(a.common.bad_if, BadIf::All);
        assert_eq!(a.common.jobs, Some(2));
        assert!(a.common.no_ccache);
        assert_eq!(a.common.step_command.as_deref(), Some("make test"));
        assert_eq!(a.common.test, c.test);
        assert!(a.common.tree.is_absolute() && a.common.out.is_absolute());
        // A metric travels, --bad-if (which conflicts with it) does not.
        let mut c = common("bench/b1024");
        c.repeat = 3;
        c.metric = Some("ops_per_s_mean:b1024".into());
        c.threshold = Some("<1.2M".into());
        let argv = step_argv(&c, "bisect");
        assert!(!argv.contains(&"--bad-if".to_string()));
        let parse = |argv: Vec<String>| {
            <P as clap::Parser>::try_parse_from(std::iter::once("h".to_string()).chain(argv))
        };
        let S::BisectStep(a) = parse(argv.clone()).unwrap().s;
        assert_eq!(a.common.metric, c.metric);
        assert_eq!(a.common.threshold.as_deref(), Some("<1.2M"));
        let mut with_bad_if = argv;
        with_bad_if.extend(["--bad-if".into(), "all".into()]);
        let e = parse(with_bad_if).err().unwrap().to_string();
        assert!(e.contains("--bad-if") && e.contains("--metric"), "{e}");
    }
}

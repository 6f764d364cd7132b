//! `harness bisect`: find the commit of a kernel tree that broke a test.
//!
//! The orchestrator ([`run`]) refuses dirty trees, runs `git bisect start`,
//! checks that `--good` is good and `--bad` is bad by running one step at
//! each, then `git bisect run <harness> bisect-step ...`. Every step
//! ([`step`], the hidden `bisect-step` subcommand) builds the checked-out
//! commit incrementally (one persistent `O=` object directory under the
//! bisect directory, the definition's config base, fragments and required
//! options, ccache), boots it with [`crate::cell::run`] and runs only the
//! selected tests, `--repeat` times, and exits 0 (good), 1 (bad) or 125
//! (skip: build failure, boot failure, infrastructure error). Each step
//! appends a JSON line to `<out>/steps.jsonl` and keeps its build log,
//! console logs and JUnit under `<out>/steps/<n>-<commit>/`. The tree is put
//! back (`git bisect reset`) on every exit path, Ctrl-C included.
//!
//! Performance bisection (`--metric`, `--threshold`, [`metric`]): the step
//! runs the `bench` suite and judges the median of a bench number over the
//! repetitions instead of the test verdicts.
//!
//! For tests, `--step-command` (hidden) replaces build + boot with a shell
//! command run in the tree (its exit status is one repetition's verdict; with
//! `--metric`, the bench output it writes to `$HARNESS_BISECT_BENCH`).

pub mod metric;

use crate::matrix::glob;
use metric::{Metric, Threshold};
use serde::{Deserialize, Serialize};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::Arc;
use std::time::Instant;

/// Exit status of a good step.
pub const EXIT_GOOD: u8 = 0;
/// Exit status of a bad step.
pub const EXIT_BAD: u8 = 1;
/// Exit status of a step that cannot say (`git bisect run`'s skip).
pub const EXIT_SKIP: u8 = 125;
/// Exit status of `harness bisect` when no single first bad commit was found.
pub const EXIT_INCONCLUSIVE: u8 = 1;
/// Exit status after SIGINT/SIGTERM.
pub const EXIT_INTERRUPTED: u8 = 130;

/// Errors of a bisection.
#[derive(Debug, thiserror::Error)]
pub enum BisectError {
    /// Bad arguments or a repository we must not touch.
    #[error("{0}")]
    Usage(String),
    /// A git command or the file system failed.
    #[error("{0}")]
    Infra(String),
}

fn infra(what: impl std::fmt::Display) -> BisectError {
    BisectError::Infra(what.to_string())
}

/// When a step that ran `--repeat` times is bad.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BadIf {
    /// Bad if any repetition is bad (catches flaky regressions).
    Any,
    /// Bad only if every repetition that said something is bad.
    All,
}

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

/// The `--test` selection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TestSel {
    /// Built-in suite.
    pub suite: String,
    /// Case glob (`binary/case`), if any.
    pub glob: Option<String>,
}

impl TestSel {
    /// Parses `suite[/case glob]`.
    pub fn parse(s: &str) -> Result<TestSel, BisectError> {
        let s = s.trim();
        let (suite, glob) = match s.split_once('/') {
            Some((a, b)) => (a, Some(b)),
            None => (s, None),
        };
        if suite.is_empty() || suite.contains(['*', '?']) {
            return Err(BisectError::Usage(format!(
                "--test {s:?}: expected suite[/case glob], e.g. futex/futex-prctl/*"
            )));
        }
        let mut parts: Vec<String> = glob
            .unwrap_or_default()
            .split(',')
            .map(str::trim)
            .filter(|g| !g.is_empty())
            .map(String::from)
            .collect();
        if suite == BENCH_SUITE {
            // Its cases are `futex-bench/CONFIG`: the glob names configurations.
            for p in &mut parts {
                if p != BENCH_BINARY && !p.starts_with(&format!("{BENCH_BINARY}/")) {
                    *p = format!("{BENCH_BINARY}/{p}");
                }
            }
        }
        let everything = parts.is_empty()
            || parts
                .iter()
                .any(|p| p == "*" || (suite == BENCH_SUITE && p == &format!("{BENCH_BINARY}/*")));
        Ok(TestSel {
            suite: suite.into(),
            glob: (!everything).then(|| parts.join(",")),
        })
    }

    /// The comma-separated globs.
    fn globs(&self) -> impl Iterator<Item = &str> {
        self.glob.iter().flat_map(|g| g.split(','))
    }

    /// Whether the suite test (binary) `name` can hold selected cases.
    pub fn binary_selected(&self, name: &str) -> bool {
        self.glob.is_none()
            || self.globs().any(|g| {
                let first = g.split('/').next().unwrap_or(g);
                glob::matches(first, name) || glob::matches(g, name)
            })
    }

    /// Whether the case `name` (`binary/case`) is selected: a glob
    /// matches it or one of its parents.
    pub fn case_selected(&self, name: &str) -> bool {
        self.glob.is_none()
            || self
                .globs()
                .any(|g| glob::matches(g, name) || glob::matches(&format!("{g}/*"), name))
    }

    /// Whether the bench configuration `config` is selected (its case is
    /// `futex-bench/CONFIG`).
    pub fn config_selected(&self, config: &str) -> bool {
        self.case_selected(&format!("{BENCH_BINARY}/{config}"))
    }
}

/// The suite of performance bisection.
pub const BENCH_SUITE: &str = "bench";
/// Its one binary.
const BENCH_BINARY: &str = "futex-bench";

/// The configuration specs of the bench suite that `sel` selects on a
/// topology of `nodes` nodes (the standard set, in its order).
pub fn bench_specs(sel: &TestSel, nodes: usize) -> Vec<String> {
    guest_tests::bench::standard_set(nodes)
        .into_iter()
        .filter(|s| sel.config_selected(spec_name(s)))
        .collect()
}

fn spec_name(spec: &str) -> &str {
    spec.split(':').next().unwrap_or(spec)
}

/// `--metric` with `--threshold`: what a performance bisection judges.
#[derive(Debug, Clone, PartialEq)]
pub struct Perf {
    /// The bench number.
    pub metric: Metric,
    /// Its bad side.
    pub threshold: Threshold,
}

impl Perf {
    /// `--metric`/`--threshold` of `c` (`None`: a test bisection). Both or
    /// neither; `--metric` only over the bench suite.
    pub fn of(c: &CommonArgs) -> Result<Option<Perf>, BisectError> {
        let usage = |e: metric::MetricError| BisectError::Usage(e.to_string());
        match (&c.metric, &c.threshold) {
            (None, None) => Ok(None),
            (Some(_), None) => Err(BisectError::Usage(
                "--metric needs --threshold, e.g. --threshold '<0.8' (bad below 0.8)".into(),
            )),
            (None, Some(_)) => Err(BisectError::Usage(
                "--threshold needs --metric (the bench number it applies to)".into(),
            )),
            (Some(m), Some(t)) => Ok(Some(Perf {
                metric: Metric::parse(m).map_err(usage)?,
                threshold: Threshold::parse(t).map_err(usage)?,
            })),
        }
    }
}

/// A step's (or one repetition's) verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    /// The test passed.
    Good,
    /// The test failed.
    Bad,
    /// Cannot say (build or boot failure, nothing selected ran).
    Skip,
}

impl Verdict {
    /// `git bisect run`'s exit status.
    pub fn exit_code(self) -> u8 {
        match self {
            Verdict::Good => EXIT_GOOD,
            Verdict::Bad => EXIT_BAD,
            Verdict::Skip => EXIT_SKIP,
        }
    }

    /// From a step command's exit status (`None`: killed by a signal).
    pub fn from_exit(code: Option<i32>) -> Verdict {
        match code {
            Some(0) => Verdict::Good,
            Some(125) | None => Verdict::Skip,
            Some(c) if (1..128).contains(&c) => Verdict::Bad,
            Some(_) => Verdict::Skip,
        }
    }

    /// Lower-case name.
    pub fn name(self) -> &'static str {
        match self {
            Verdict::Good => "good",
            Verdict::Bad => "bad",
            Verdict::Skip => "skip",
        }
    }
}

/// One repetition's verdict from the cell's cases: bad if a selected case
/// failed, good if one passed and none failed, else skip (with why).
pub fn verdict_from_cases(cases: &[crate::verdict::Case], sel: &TestSel) -> (Verdict, String) {
    use crate::verdict::CaseStatus;
    let chosen: Vec<_> = cases
        .iter()
        .filter(|c| sel.case_selected(&c.name))
        .collect();
    let failed: Vec<&str> = chosen
        .iter()
        .filter(|c| matches!(c.status, CaseStatus::Fail { .. }))
        .map(|c| c.name.as_str())
        .collect();
    let passed = chosen
        .iter()
        .filter(|c| c.status == CaseStatus::Pass)
        .count();
    if !failed.is_empty() {
        let more = failed.len().saturating_sub(5);
        let mut why = format!("failed: {}", failed[..failed.len().min(5)].join(", "));
        if more > 0 {
            why.push_str(&format!(" and {more} more"));
        }
        (Verdict::Bad, why)
    } else if passed > 0 {
        (Verdict::Good, format!("{passed} case(s) passed"))
    } else if chosen.is_empty() {
        (
            Verdict::Skip,
            "no selected case ran (boot failure?)".to_string(),
        )
    } else {
        (Verdict::Skip, "every selected case was skipped".to_string())
    }
}

/// A step's verdict from its repetitions under `policy`.
pub fn combine(reps: &[Verdict], policy: BadIf) -> Verdict {
    let bad = reps.iter().filter(|v| **v == Verdict::Bad).count();
    let good = reps.iter().filter(|v| **v == Verdict::Good).count();
    match policy {
        BadIf::Any if bad > 0 => Verdict::Bad,
        BadIf::All if bad > 0 && good == 0 => Verdict::Bad,
        _ if good > 0 => Verdict::Good,
        _ => Verdict::Skip,
    }
}

/// Whether more repetitions can still change the verdict under `policy`.
pub fn decided(reps: &[Verdict], policy: BadIf) -> bool {
    match policy {
        BadIf::Any => reps.contains(&Verdict::Bad),
        BadIf::All => reps.contains(&Verdict::Good),
    }
}

/// The commit `git bisect run`'s output names as the first bad one.
pub fn parse_first_bad(output: &str) -> Option<String> {
    output.lines().find_map(|l| {
        let (sha, rest) = l.trim().split_once(' ')?;
        (rest.trim() == "is the first bad commit"
            && sha.len() >= 7
            && sha.chars().all(|c| c.is_ascii_hexdigit()))
        .then(|| sha.to_string())
    })
}

/// One line of `steps.jsonl`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepRecord {
    /// 1-based step number.
    pub step: usize,
    /// check-good, check-bad or bisect.
    pub phase: String,
    /// Full commit id.
    pub commit: String,
    /// Its subject line.
    pub subject: String,
    /// The step's verdict.
    pub verdict: Verdict,
    /// Each repetition's verdict.
    pub reps: Vec<Verdict>,
    /// Why (failed cases, build error, ...).
    pub reason: String,
    /// Build seconds (0 with --step-command).
    pub build_seconds: f64,
    /// Boot + test seconds, all repetitions.
    pub run_seconds: f64,
    /// Where the step's logs are.
    pub dir: PathBuf,
    /// `--metric` (performance bisection only, like the fields below).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metric: Option<String>,
    /// `--threshold`, normalised (`<1200000` for `<1.2M`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub threshold: Option<String>,
    /// Each repetition's metric value (null: that repetition gave none).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub values: Vec<Option<f64>>,
    /// The median of `values`: what the verdict compares with the threshold.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<f64>,
}

impl StepRecord {
    /// The JSON line (with the newline).
    pub fn to_line(&self) -> String {
        let mut s = serde_json::to_string(self).unwrap_or_default();
        s.push('\n');
        s
    }
}

/// The records of `<out>/steps.jsonl` (bad lines ignored).
pub fn read_steps(out: &Path) -> Vec<StepRecord> {
    std::fs::read_to_string(out.join("steps.jsonl"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// Checks the arguments that need no repository.
pub fn validate(c: &CommonArgs) -> Result<(TestSel, crate::topology::Topology), BisectError> {
    if c.repeat == 0 {
        return Err(BisectError::Usage("--repeat must be at least 1".into()));
    }
    if c.timeout_scale.is_nan() || c.timeout_scale <= 0.0 {
        return Err(BisectError::Usage("--timeout-scale must be > 0".into()));
    }
    let sel = TestSel::parse(&c.test)?;
    let topo = topology(&c.topology)?;
    let perf = Perf::of(c)?;
    if c.step_command.is_none() {
        crate::suite::builtin(&sel.suite, None)
            .map_err(|e| BisectError::Usage(format!("--test: {e}")))?;
        if !crate::kernel::definition::valid_name(&c.kernel) {
            return Err(BisectError::Usage(format!(
                "--kernel {:?}: not a definition name",
                c.kernel
            )));
        }
        if sel.suite == BENCH_SUITE && bench_specs(&sel, topo.nodes().len()).is_empty() {
            return Err(BisectError::Usage(format!(
                "--test {}: no configuration of the bench suite matches; it has: {}",
                c.test,
                bench_names(topo.nodes().len())
            )));
        }
    }
    if let Some(p) = &perf {
        check_perf(c, p, &sel, topo.nodes().len())?;
    }
    Ok((sel, topo))
}

fn bench_names(nodes: usize) -> String {
    guest_tests::bench::standard_set(nodes)
        .iter()
        .map(|s| spec_name(s))
        .collect::<Vec<_>>()
        .join(", ")
}

/// A metric needs the bench suite, and the configurations it names must
/// run (they are in the suite, and `--test` selects them).
fn check_perf(c: &CommonArgs, p: &Perf, sel: &TestSel, nodes: usize) -> Result<(), BisectError> {
    if sel.suite != BENCH_SUITE {
        return Err(BisectError::Usage(format!(
            "--metric {}: a bench number; use --test bench[/CONFIG glob], not --test {}",
            p.metric, c.test
        )));
    }
    let specs = guest_tests::bench::standard_set(nodes);
    for cfg in p.metric.configs() {
        if c.step_command.is_none() && !specs.iter().any(|s| spec_name(s) == cfg) {
            return Err(BisectError::Usage(format!(
                "--metric {}: {cfg:?} is not a configuration of the bench suite on {nodes} node(s); it has: {}",
                p.metric,
                bench_names(nodes)
            )));
        }
        if !sel.config_selected(cfg) {
            let all: Vec<&str> = p.metric.configs();
            return Err(BisectError::Usage(format!(
                "--metric {}: --test {} does not run configuration {cfg:?}; select it, e.g. --test 'bench/{}'",
                p.metric,
                c.test,
                all.join(",")
            )));
        }
    }
    Ok(())
}

/// A topology spec, or a topology name of the workspace's matrix.yaml.
fn topology(s: &str) -> Result<crate::topology::Topology, BisectError> {
    if s.contains('=') {
        return crate::topology::Topology::parse_spec(s)
            .map_err(|e| BisectError::Usage(format!("--topology: {e}")));
    }
    let path = crate::guestbin::workspace_root().join("matrix.yaml");
    let m = crate::matrix::load(&path)
        .map_err(|e| BisectError::Usage(format!("--topology {s}: {e}")))?;
    m.topologies
        .iter()
        .find(|t| t.name == s)
        .or_else(|| {
            // `2n-2c` for `2n2c`.
            let bare = |n: &str| n.replace('-', "");
            m.topologies.iter().find(|t| bare(&t.name) == bare(s))
        })
        .map(|t| t.topology.clone())
        .ok_or_else(|| {
            BisectError::Usage(format!(
                "--topology {s:?}: neither a nodes=..,cpus=..,mem=.. spec nor a topology of {}",
                path.display()
            ))
        })
}

/// Runs git in `tree`; stdout on success.
fn git(tree: &Path, args: &[&str]) -> Result<String, BisectError> {
    let out = Command::new("git")
        .arg("-C")
        .arg(tree)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| infra(format!("git: {e}")))?;
    if !out.status.success() {
        return Err(infra(format!(
            "git {} in {}: {}",
            args.join(" "),
            tree.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Refuses trees that are not git work trees, are dirty or mid-bisect.
pub fn check_tree(tree: &Path) -> Result<(), BisectError> {
    let top = git(tree, &["rev-parse", "--show-toplevel"])
        .map_err(|_| BisectError::Usage(format!("{}: not a git work tree", tree.display())))?;
    let _ = top;
    let dirty = git(tree, &["status", "--porcelain", "--untracked-files=no"])?;
    if !dirty.trim().is_empty() {
        return Err(BisectError::Usage(format!(
            "{}: the work tree has uncommitted changes; commit or stash them first:\n{}",
            tree.display(),
            dirty.trim_end()
        )));
    }
    let start = git(tree, &["rev-parse", "--git-path", "BISECT_START"])?;
    let start = tree.join(start.trim());
    if start.exists() {
        return Err(BisectError::Usage(format!(
            "{}: a git bisect is already in progress; finish it with `git bisect reset`",
            tree.display()
        )));
    }
    Ok(())
}

fn rev(tree: &Path, r: &str, opt: &str) -> Result<String, BisectError> {
    git(
        tree,
        &["rev-parse", "--verify", "-q", &format!("{r}^{{commit}}")],
    )
    .map(|s| s.trim().to_string())
    .map_err(|_| BisectError::Usage(format!("{opt} {r:?}: no such commit")))
}

/// Puts the tree back (`git bisect reset`) when dropped.
struct ResetGuard<'a> {
    tree: &'a Path,
}

impl Drop for ResetGuard<'_> {
    fn drop(&mut self) {
        if let Err(e) = git(self.tree, &["bisect", "reset"]) {
            eprintln!("harness: bisect: could not reset the tree: {e}");
        }
    }
}

/// Signal state shared with the handler: set on SIGINT/SIGTERM, which is
/// forwarded to the running child's process group.
#[derive(Debug, Default, Clone)]
pub struct Interrupt {
    /// Whether a signal came.
    pub seen: Arc<AtomicBool>,
    /// Process group of the running child (0: none).
    pub child: Arc<AtomicI32>,
}

impl Interrupt {
    /// Records the signal and forwards it.
    pub fn fire(&self, sig: i32) {
        self.seen.store(true, Ordering::SeqCst);
        let pg = self.child.load(Ordering::SeqCst);
        if pg > 0 {
            // SAFETY: plain syscall.
            unsafe {
                libc::kill(-pg, sig);
            }
        }
    }
}

/// Runs a child in its own process group (so that the interrupt reaches it
/// through us); returns its exit code and stdout.
fn run_child(
    mut cmd: Command,
    intr: &Interrupt,
    echo: bool,
) -> Result<(Option<i32>, String), BisectError> {
    use std::os::unix::process::CommandExt;
    cmd.process_group(0)
        .stdin(Stdio::null())
        .stdout(Stdio::piped());
    let mut child = cmd.spawn().map_err(|e| infra(format!("spawn: {e}")))?;
    intr.child.store(child.id() as i32, Ordering::SeqCst);
    let mut text = String::new();
    if let Some(out) = child.stdout.take() {
        for line in BufReader::new(out).lines() {
            let Ok(line) = line else { break };
            if echo {
                eprintln!("{line}");
            }
            text.push_str(&line);
            text.push('\n');
        }
    }
    let status = child.wait().map_err(|e| infra(format!("wait: {e}")))?;
    intr.child.store(0, Ordering::SeqCst);
    Ok((status.code(), text))
}

fn step_command(exe: &Path, c: &CommonArgs, phase: &str) -> Command {
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

/// The first bad commit's description.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommitInfo {
    /// Full id.
    pub id: String,
    /// Subject.
    pub subject: String,
    /// `Name <mail>`.
    pub author: String,
    /// Author date.
    pub date: String,
}

fn commit_info(tree: &Path, id: &str) -> Result<CommitInfo, BisectError> {
    let s = git(tree, &["show", "-s", "--format=%H%n%s%n%an <%ae>%n%ad", id])?;
    let mut l = s.lines().map(String::from);
    Ok(CommitInfo {
        id: l.next().unwrap_or_default(),
        subject: l.next().unwrap_or_default(),
        author: l.next().unwrap_or_default(),
        date: l.next().unwrap_or_default(),
    })
}

/// The outcome of [`run`].
#[derive(Debug, Clone)]
pub struct Outcome {
    /// The first bad commit, when found.
    pub first_bad: Option<CommitInfo>,
    /// The steps, in order.
    pub steps: Vec<StepRecord>,
    /// Exit status for the harness.
    pub exit: u8,
}

/// `harness bisect`: `exe` is the harness binary that runs the steps.
/// Prints the report to stdout.
pub fn run(args: &BisectArgs, exe: &Path, intr: &Interrupt) -> Result<Outcome, BisectError> {
    let c = &args.common;
    validate(c)?;
    let perf = Perf::of(c)?;
    if c.step_command.is_none() {
        let dir = crate::kernel::definition::kernels_dir()
            .map_err(|e| BisectError::Usage(e.to_string()))?;
        crate::kernel::definition::load(&dir, &c.kernel)
            .map_err(|e| BisectError::Usage(format!("--kernel: {e}")))?;
    }
    check_tree(&c.tree)?;
    let good = rev(&c.tree, &args.good, "--good")?;
    let bad = rev(&c.tree, &args.bad, "--bad")?;
    if git(&c.tree, &["merge-base", "--is-ancestor", &good, &bad]).is_err() {
        return Err(BisectError::Usage(format!(
            "--good {} is not an ancestor of --bad {}",
            args.good, args.bad
        )));
    }
    let n: u64 = git(&c.tree, &["rev-list", "--count", &format!("{good}..{bad}")])?
        .trim()
        .parse()
        .unwrap_or(0);
    std::fs::create_dir_all(&c.out).map_err(|e| infra(format!("{}: {e}", c.out.display())))?;
    // A new bisection: drop the previous one's records and logs (the
    // object directory stays: it makes the first build incremental).
    let _ = std::fs::remove_file(c.out.join("steps.jsonl"));
    let _ = std::fs::remove_dir_all(c.out.join("steps"));
    eprintln!(
        "harness: bisect: {n} commit(s) in {}..{}, about {} step(s) after checking both ends",
        &good[..12],
        &bad[..12],
        steps_expected(n)
    );

    git(&c.tree, &["bisect", "start"])?;
    let guard = ResetGuard { tree: &c.tree };
    let finish = |exit: u8, first_bad: Option<CommitInfo>| -> Outcome {
        if let Ok(log) = git(&c.tree, &["bisect", "log"]) {
            let _ = std::fs::write(c.out.join("bisect.log"), log);
        }
        Outcome {
            first_bad,
            steps: read_steps(&c.out),
            exit,
        }
    };
    for (phase, id, want, opt) in [
        ("check-good", &good, Verdict::Good, "--good"),
        ("check-bad", &bad, Verdict::Bad, "--bad"),
    ] {
        if intr.seen.load(Ordering::SeqCst) {
            let o = finish(EXIT_INTERRUPTED, None);
            drop(guard);
            return Ok(o);
        }
        git(&c.tree, &["checkout", "-q", "--detach", id])?;
        eprintln!(
            "harness: bisect: checking that {opt} {} is {}",
            &id[..12],
            want.name()
        );
        let (code, _) = run_child(step_command(exe, c, phase), intr, true)?;
        if intr.seen.load(Ordering::SeqCst) {
            let o = finish(EXIT_INTERRUPTED, None);
            drop(guard);
            return Ok(o);
        }
        let got = Verdict::from_exit(code);
        if got != want {
            let o = finish(2, None);
            drop(guard);
            // The end's own record (none if its step died before writing it).
            let rec = o.steps.last().filter(|s| s.phase == phase);
            let (what, last) = match (got, rec, &perf) {
                (Verdict::Good | Verdict::Bad, Some(r), Some(p)) if r.value.is_some() => (
                    metric::end_mismatch(
                        &p.metric.to_string(),
                        &p.threshold,
                        r.value.unwrap_or_default(),
                        &r.values,
                        want,
                    ),
                    format!(" (logs {})", r.dir.display()),
                ),
                _ => (
                    match got {
                        Verdict::Skip => "could not be tested (skip)".to_string(),
                        _ => format!("is {}, not {}", got.name(), want.name()),
                    },
                    rec.map(|s| format!(" ({}; logs {})", s.reason, s.dir.display()))
                        .unwrap_or_default(),
                ),
            };
            return Err(BisectError::Usage(format!(
                "{opt} {} ({}) {what}{last}: nothing to bisect",
                match phase {
                    "check-good" => &args.good,
                    _ => &args.bad,
                },
                &id[..12],
            )));
        }
    }
    git(&c.tree, &["bisect", "bad", &bad])?;
    git(&c.tree, &["bisect", "good", &good])?;
    let mut cmd = Command::new("git");
    cmd.arg("-C")
        .arg(&c.tree)
        .args(["bisect", "run"])
        .arg(exe)
        .args(step_argv(c, "bisect"));
    let (_, text) = run_child(cmd, intr, true)?;
    let _ = std::fs::write(c.out.join("bisect-run.log"), &text);
    if intr.seen.load(Ordering::SeqCst) {
        let o = finish(EXIT_INTERRUPTED, None);
        drop(guard);
        return Ok(o);
    }
    let first = match parse_first_bad(&text) {
        Some(id) => Some(commit_info(&c.tree, &id)?),
        None => None,
    };
    let exit = if first.is_some() {
        0
    } else {
        EXIT_INCONCLUSIVE
    };
    let o = finish(exit, first);
    drop(guard);
    print!("{}", report(&o, &text));
    Ok(o)
}

/// `ceil(log2(n))`: about how many steps a bisection of `n` commits takes.
pub fn steps_expected(n: u64) -> u32 {
    if n <= 1 {
        0
    } else {
        64 - (n - 1).leading_zeros()
    }
}

/// The human report.
pub fn report(o: &Outcome, run_output: &str) -> String {
    let mut s = String::new();
    use std::fmt::Write as _;
    match &o.first_bad {
        Some(c) => {
            let _ = writeln!(s, "first bad commit: {}", c.id);
            let _ = writeln!(s, "  subject: {}", c.subject);
            let _ = writeln!(s, "  author:  {}", c.author);
            let _ = writeln!(s, "  date:    {}", c.date);
        }
        None => {
            let _ = writeln!(s, "no single first bad commit found:");
            for l in run_output
                .lines()
                .filter(|l| !l.starts_with("running "))
                .take(20)
            {
                let _ = writeln!(s, "  {l}");
            }
        }
    }
    if let Some(r) = o.steps.iter().find(|r| r.metric.is_some()) {
        let _ = writeln!(
            s,
            "metric: {}, threshold {} (a step's value: the median of its runs)",
            r.metric.as_deref().unwrap_or_default(),
            r.threshold.as_deref().unwrap_or_default()
        );
    }
    let _ = writeln!(s, "steps:");
    for r in &o.steps {
        let _ = writeln!(
            s,
            "  {:>2} {:<10} {} {:<4} build {:>6.1} s  run {:>6.1} s  {}{}",
            r.step,
            r.phase,
            &r.commit[..r.commit.len().min(12)],
            r.verdict.name(),
            r.build_seconds,
            r.run_seconds,
            r.subject,
            if r.reason.is_empty() {
                String::new()
            } else {
                format!(" [{}]", r.reason)
            }
        );
    }
    s
}

/// `harness bisect-step`: one step at the tree's HEAD. Returns the exit
/// status for `git bisect run` (0, 1, 125; 130 when interrupted).
pub async fn step(args: StepArgs) -> u8 {
    let c = &args.common;
    let t0 = Instant::now();
    let (id, subject) = match (
        git(&c.tree, &["rev-parse", "HEAD"]),
        git(&c.tree, &["show", "-s", "--format=%s", "HEAD"]),
    ) {
        (Ok(i), Ok(s)) => (i.trim().to_string(), s.trim().to_string()),
        (Err(e), _) | (_, Err(e)) => {
            eprintln!("harness: bisect-step: {e}");
            return EXIT_SKIP;
        }
    };
    let perf = match Perf::of(c) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("harness: bisect-step: {e}");
            return EXIT_SKIP;
        }
    };
    let n = read_steps(&c.out).len() + 1;
    let dir = c.out.join("steps").join(format!("{n:03}-{}", &id[..12]));
    let _ = std::fs::create_dir_all(&dir);
    let cancel = tokio_util::sync::CancellationToken::new();
    let _ = crate::signals::install(cancel.clone());
    let r = match &c.step_command {
        Some(cmd) => command_reps(c, perf.as_ref(), cmd, &id, &dir),
        None => kernel_reps(c, perf.as_ref(), &dir, &cancel).await,
    };
    let verdicts: Vec<Verdict> = r.reps.iter().map(|x| x.verdict).collect();
    let values: Vec<Option<f64>> = match &perf {
        Some(_) => r.reps.iter().map(|x| x.value).collect(),
        None => Vec::new(),
    };
    let (verdict, value, reason) = match &perf {
        Some(p) => {
            let misses: Vec<String> = r
                .reps
                .iter()
                .enumerate()
                .filter(|(_, x)| x.value.is_none())
                .map(|(i, x)| match r.reps.len() {
                    1 => x.why.clone(),
                    _ => format!("run {}: {}", i + 1, x.why),
                })
                .collect();
            metric::judge(&p.metric, &p.threshold, &values, &misses)
        }
        None => (combine(&verdicts, c.bad_if), None, r.reason),
    };
    let rec = StepRecord {
        step: n,
        phase: args.phase.clone(),
        commit: id.clone(),
        subject,
        verdict,
        reps: verdicts,
        reason,
        build_seconds: r.build_s,
        run_seconds: r.run_s,
        dir,
        metric: perf.as_ref().map(|p| p.metric.to_string()),
        threshold: perf.as_ref().map(|p| p.threshold.to_string()),
        values,
        value,
    };
    let path = c.out.join("steps.jsonl");
    let appended = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .and_then(|mut f| f.write_all(rec.to_line().as_bytes()));
    if let Err(e) = appended {
        eprintln!("harness: bisect-step: {}: {e}", path.display());
    }
    println!(
        "step {n} {} {}: {} ({}) in {:.0} s",
        args.phase,
        &id[..12],
        verdict.name(),
        rec.reason,
        t0.elapsed().as_secs_f64()
    );
    if cancel.is_cancelled() {
        return EXIT_INTERRUPTED;
    }
    verdict.exit_code()
}

/// What one repetition said.
#[derive(Debug, Clone, PartialEq)]
struct Rep {
    /// Test bisection: from the cases; metric: the value against the threshold.
    verdict: Verdict,
    /// The metric's value (performance bisection).
    value: Option<f64>,
    /// Why (failed cases; why there is no value).
    why: String,
}

impl Rep {
    fn skip(why: impl Into<String>) -> Rep {
        Rep {
            verdict: Verdict::Skip,
            value: None,
            why: why.into(),
        }
    }

    /// A repetition of a performance bisection from the bench output it
    /// produced (`None`: no output at all).
    fn measured(p: &Perf, ktap: Option<&str>, none: &str) -> Rep {
        match ktap.map(|k| p.metric.value(k)) {
            Some(Ok(v)) => Rep {
                verdict: p.threshold.verdict(Some(v)),
                value: Some(v),
                why: String::new(),
            },
            Some(Err(e)) => Rep::skip(e),
            None => Rep::skip(none),
        }
    }
}

/// A step's repetitions.
struct Reps {
    reps: Vec<Rep>,
    /// The test bisection's reason (the repetitions' reasons).
    reason: String,
    build_s: f64,
    run_s: f64,
}

/// Repetitions through `--step-command`. With a metric the command writes
/// bench output (`# BENCH` lines) to `$HARNESS_BISECT_BENCH`, which is
/// `run-<k>/results.ktap` like a real run's; its exit status then only
/// counts as 125 (skip).
fn command_reps(c: &CommonArgs, perf: Option<&Perf>, cmd: &str, id: &str, dir: &Path) -> Reps {
    let t = Instant::now();
    let mut reps = Vec::new();
    for i in 0..c.repeat {
        let run_dir = dir.join(format!("run-{}", i + 1));
        let bench = run_dir.join("results.ktap");
        let mut command = Command::new("sh");
        command
            .args(["-c", cmd])
            .current_dir(&c.tree)
            .env("HARNESS_BISECT_COMMIT", id)
            .env("HARNESS_BISECT_REP", i.to_string())
            .env("HARNESS_BISECT_STEP_DIR", dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null());
        if perf.is_some() {
            let _ = std::fs::create_dir_all(&run_dir);
            let _ = std::fs::remove_file(&bench);
            command.env("HARNESS_BISECT_BENCH", &bench);
        }
        let verdict = Verdict::from_exit(command.status().ok().and_then(|s| s.code()));
        let rep = match perf {
            None => Rep {
                verdict,
                value: None,
                why: verdict.name().into(),
            },
            Some(_) if verdict == Verdict::Skip => Rep::skip("step command: skip"),
            Some(p) => Rep::measured(
                p,
                std::fs::read_to_string(&bench).ok().as_deref(),
                "the step command wrote no bench output to $HARNESS_BISECT_BENCH",
            ),
        };
        reps.push(rep);
        let verdicts: Vec<Verdict> = reps.iter().map(|r| r.verdict).collect();
        if perf.is_none() && decided(&verdicts, c.bad_if) {
            break;
        }
    }
    let reason = format!(
        "step command: {}",
        reps.iter()
            .map(|r| r.verdict.name())
            .collect::<Vec<_>>()
            .join(",")
    );
    Reps {
        reps,
        reason,
        build_s: 0.0,
        run_s: t.elapsed().as_secs_f64(),
    }
}

/// Build + boot + test repetitions.
async fn kernel_reps(
    c: &CommonArgs,
    perf: Option<&Perf>,
    dir: &Path,
    cancel: &tokio_util::sync::CancellationToken,
) -> Reps {
    let skip = |why: String, b: f64| Reps {
        reps: vec![Rep::skip(why.clone())],
        reason: why,
        build_s: b,
        run_s: 0.0,
    };
    let (sel, topology) = match validate(c) {
        Ok(v) => v,
        Err(e) => return skip(e.to_string(), 0.0),
    };
    let def = match crate::kernel::definition::kernels_dir()
        .and_then(|d| crate::kernel::definition::load(&d, &c.kernel))
    {
        Ok(d) => d,
        Err(e) => return skip(e.to_string(), 0.0),
    };
    // Build.
    let tb = Instant::now();
    let mut opts = crate::kernel::build::BuildOptions::default();
    if let Some(j) = c.jobs {
        opts.jobs = j.max(1);
    }
    if c.no_ccache {
        opts.ccache = false;
    }
    let (tree, obj, log) = (
        std::path::absolute(&c.tree).unwrap_or(c.tree.clone()),
        std::path::absolute(c.out.join("obj")).unwrap_or(c.out.join("obj")),
        dir.join("build.log"),
    );
    let d2 = def.clone();
    let built = tokio::task::spawn_blocking(move || {
        crate::kernel::build::build_tree(&d2, &tree, &obj, &opts, &log, &|m| {
            eprintln!("harness: {m}")
        })
    })
    .await;
    let build_s = tb.elapsed().as_secs_f64();
    let image = match built {
        Ok(Ok(p)) => p,
        Ok(Err(e)) => {
            return skip(
                format!("build failed: {}", first_line(&e.to_string())),
                build_s,
            )
        }
        Err(e) => return skip(format!("build: {e}"), build_s),
    };
    if cancel.is_cancelled() {
        return skip("interrupted".into(), build_s);
    }
    // Tests.
    let expect = {
        use guest_tests::expect::Expect;
        let base = def
            .version
            .as_deref()
            .map(|v| Expect::for_release(v).encode());
        let parts: Vec<&str> = [base.as_deref(), def.expect.as_deref()]
            .into_iter()
            .flatten()
            .collect();
        if parts.is_empty() {
            None
        } else {
            Expect::parse(&parts.join(",")).ok().map(|e| e.encode())
        }
    };
    let tests: Vec<_> = match crate::suite::builtin(&sel.suite, expect.as_deref()) {
        // Only the selected configurations: a bench run is minutes otherwise.
        Ok(_) if sel.suite == BENCH_SUITE => vec![crate::bench::suite_test_with(
            &bench_specs(&sel, topology.nodes().len()),
            expect.as_deref(),
        )],
        Ok(t) => t
            .into_iter()
            .filter(|t| sel.binary_selected(&t.name))
            .collect(),
        Err(e) => return skip(e.to_string(), build_s),
    };
    if tests.is_empty() {
        return skip(
            format!("--test {}: no test of the suite matches", c.test),
            build_s,
        );
    }
    let qemu = match crate::host::find_qemu() {
        Ok(q) => q,
        Err(e) => return skip(e.to_string(), build_s),
    };
    let accel = match crate::host::choose_accel(
        crate::host::AccelChoice::Auto,
        &crate::host::probe_kvm(),
    ) {
        Ok((a, _)) => a,
        Err(e) => return skip(e.to_string(), build_s),
    };
    let bins = match tokio::task::spawn_blocking(crate::guestbin::GuestBins::locate_or_build).await
    {
        Ok(Ok(b)) => b,
        Ok(Err(e)) => return skip(e.to_string(), build_s),
        Err(e) => return skip(e.to_string(), build_s),
    };
    let tr = Instant::now();
    let mut reps: Vec<Rep> = Vec::new();
    for i in 0..c.repeat {
        let spec = crate::cell::CellSpec {
            name: format!("bisect/{}/{}", c.topology, c.test),
            kernel_label: format!("bisect:{}", c.kernel),
            kernel_image: image.clone(),
            topology_label: c.topology.clone(),
            topology: topology.clone(),
            suite_label: sel.suite.clone(),
            tests: tests.clone(),
            accel,
            cmdline_extra: Vec::new(),
            watchdog: None,
            timeout_scale: c.timeout_scale,
            boot_retries: crate::cell::DEFAULT_BOOT_RETRIES,
            out_dir: dir.join(format!("run-{}", i + 1)),
        };
        match crate::cell::run(&spec, &qemu, &bins, cancel).await {
            Ok(cell) => {
                let report = crate::junit::report("harness bisect", std::slice::from_ref(&cell));
                let _ = crate::junit::write_atomic(&report, &spec.out_dir.join("junit.xml"));
                reps.push(match perf {
                    None => {
                        let (verdict, why) =
                            verdict_from_cases(&crate::verdict::cases(&cell), &sel);
                        Rep {
                            verdict,
                            value: None,
                            why,
                        }
                    }
                    // The number decides, not the cases: a configuration
                    // that failed or a VM that died just has no value.
                    Some(p) => {
                        let ktap = std::fs::read(spec.out_dir.join("results.ktap"))
                            .map(|b| String::from_utf8_lossy(&b).into_owned());
                        let mut r = Rep::measured(p, ktap.ok().as_deref(), "no results.ktap");
                        if r.value.is_none() && !matches!(cell.end, crate::result::VmEnd::Finished)
                        {
                            r.why = format!("{}; {}", r.why, crate::verdict::describe(&cell.end));
                        }
                        r
                    }
                });
            }
            Err(e) => reps.push(Rep::skip(format!("cell: {e}"))),
        }
        let verdicts: Vec<Verdict> = reps.iter().map(|r| r.verdict).collect();
        if cancel.is_cancelled() || (perf.is_none() && decided(&verdicts, c.bad_if)) {
            break;
        }
    }
    let mut reasons: Vec<String> = reps.iter().map(|r| r.why.clone()).collect();
    reasons.dedup();
    Reps {
        reps,
        reason: reasons.join("; "),
        build_s,
        run_s: tr.elapsed().as_secs_f64(),
    }
}

fn first_line(s: &str) -> String {
    s.lines().next().unwrap_or_default().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::verdict::{Case, CaseStatus};

    fn case(name: &str, status: CaseStatus) -> Case {
        Case {
            name: name.into(),
            status,
        }
    }

    fn fail() -> CaseStatus {
        CaseStatus::Fail {
            message: "m".into(),
            text: String::new(),
        }
    }

    fn common(test: &str) -> CommonArgs {
        CommonArgs {
            tree: "t".into(),
            kernel: "7.3".into(),
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
    fn test_selection_parses_and_matches() {
        let s = TestSel::parse("futex/futex-prctl/*").unwrap();
        assert_eq!(s.suite, "futex");
        assert!(s.binary_selected("futex-prctl"));
        assert!(!s.binary_selected("futex-numa"));
        assert!(s.case_selected("futex-prctl/get-slots"));
        assert!(!s.case_selected("futex-numa/x"));
        let s = TestSel::parse("futex/futex-prctl").unwrap();
        assert!(s.case_selected("futex-prctl/get-slots"));
        assert!(s.case_selected("futex-prctl/<exit>"));
        let s = TestSel::parse("futex").unwrap();
        assert_eq!(s.glob, None);
        assert!(s.binary_selected("anything") && s.case_selected("a/b"));
        assert_eq!(TestSel::parse("futex/*").unwrap().glob, None);
        let s = TestSel::parse("futex/*resize*/grow*").unwrap();
        assert!(s.binary_selected("futex-resize"));
        assert!(s.case_selected("futex-resize/grow-16"));
        assert!(TestSel::parse("").is_err());
        assert!(TestSel::parse("/x").is_err());
        assert!(TestSel::parse("fu*/x").is_err());
    }

    #[test]
    fn bench_selection_names_configurations() {
        let s = TestSel::parse("bench/b1024").unwrap();
        assert_eq!(s.glob.as_deref(), Some("futex-bench/b1024"));
        assert!(s.binary_selected("futex-bench"));
        assert!(s.case_selected("futex-bench/b1024"));
        assert!(s.config_selected("b1024") && !s.config_selected("b128"));
        let s = TestSel::parse("bench/b1024, global").unwrap();
        assert!(s.config_selected("b1024") && s.config_selected("global"));
        assert!(!s.config_selected("global-pernode"));
        assert_eq!(
            bench_specs(&s, 2),
            ["global:buckets=0", "b1024:buckets=1024"]
        );
        // The binary's own name is accepted too.
        let s = TestSel::parse("bench/futex-bench/b*").unwrap();
        assert!(s.config_selected("b16") && !s.config_selected("global"));
        // b16, b128, b1024, b128-pernode.
        assert_eq!(bench_specs(&s, 1).len(), 4);
        for all in ["bench", "bench/*", "bench/futex-bench/*", "bench/b1,*"] {
            assert_eq!(TestSel::parse(all).unwrap().glob, None, "{all}");
        }
        assert_eq!(
            bench_specs(&TestSel::parse("bench").unwrap(), 2),
            guest_tests::bench::standard_set(2)
        );
        assert!(bench_specs(&TestSel::parse("bench/nope").unwrap(), 2).is_empty());
        // Comma lists for the other suites too.
        let s = TestSel::parse("futex/futex-prctl/*,futex-numa/wake").unwrap();
        assert!(s.binary_selected("futex-prctl") && s.binary_selected("futex-numa"));
        assert!(!s.binary_selected("futex-mpol"));
        assert!(s.case_selected("futex-numa/wake") && !s.case_selected("futex-numa/x"));
    }

    #[test]
    fn metric_arguments() {
        let perf = |m: Option<&str>, t: Option<&str>, test: &str| {
            let mut c = common(test);
            c.metric = m.map(String::from);
            c.threshold = t.map(String::from);
            validate(&c).map(|_| Perf::of(&c).unwrap())
        };
        let err = |m, t, test| match perf(m, t, test) {
            Err(BisectError::Usage(e)) => e,
            other => panic!("{other:?}"),
        };
        let p = perf(Some("ratio:b1024/global"), Some("<0.8"), "bench")
            .unwrap()
            .unwrap();
        assert_eq!(p.metric.to_string(), "ratio:b1024/global");
        assert!(p.threshold.is_bad(0.79));
        assert!(perf(None, None, "bench").unwrap().is_none());
        assert!(perf(Some("ops_per_s_mean:b1024"), Some(">1M"), "bench/b1024").is_ok());
        let e = err(Some("ops_per_s_mean:b1024"), None, "bench");
        assert!(e.contains("--metric needs --threshold"), "{e}");
        let e = err(None, Some("<1"), "bench");
        assert!(e.contains("--threshold needs --metric"), "{e}");
        let e = err(Some("ops_total"), Some("<1"), "bench");
        assert!(e.contains("valid metrics: ops_per_s_mean:CONFIG"), "{e}");
        let e = err(Some("ops_per_s_mean:b1024"), Some("1000"), "bench");
        assert!(e.contains("--threshold \"1000\": say which side"), "{e}");
        let e = err(Some("ops_per_s_mean:b1024"), Some("<1"), "futex");
        assert!(e.contains("use --test bench"), "{e}");
        let e = err(Some("ratio:b1024/global"), Some("<1"), "bench/b1024");
        assert!(e.contains("does not run configuration \"global\""), "{e}");
        assert!(e.contains("--test 'bench/b1024,global'"), "{e}");
        let e = err(Some("ops_per_s_mean:b7"), Some("<1"), "bench");
        assert!(e.contains("not a configuration of the bench suite"), "{e}");
        assert!(e.contains("global, b16,"), "{e}");
        // The NUMA pair only exists on two nodes or more.
        assert!(perf(Some("ops_per_s_mean:numa-own"), Some("<1"), "bench").is_ok());
        let mut c = common("bench");
        c.topology = "nodes=1,cpus=2,mem=256M".into();
        c.metric = Some("ops_per_s_mean:numa-own".into());
        c.threshold = Some("<1".into());
        assert!(matches!(validate(&c), Err(BisectError::Usage(e)) if e.contains("on 1 node(s)")));
        // With a step command the suite's configurations are not checked.
        let mut c = common("bench");
        c.metric = Some("ops_per_s_mean:b7".into());
        c.threshold = Some("<1".into());
        c.step_command = Some("true".into());
        assert!(validate(&c).is_ok());
        let e = match validate(&common("bench/nope")) {
            Err(BisectError::Usage(e)) => e,
            other => panic!("{other:?}"),
        };
        assert!(
            e.contains("no configuration of the bench suite matches"),
            "{e}"
        );
    }

    #[test]
    fn validation() {
        assert!(validate(&common("futex/futex-prctl/*")).is_ok());
        let mut c = common("futex");
        c.repeat = 0;
        assert!(matches!(validate(&c), Err(BisectError::Usage(m)) if m.contains("--repeat")));
        let mut c = common("futex");
        c.topology = "nodes=x".into();
        assert!(matches!(validate(&c), Err(BisectError::Usage(m)) if m.contains("--topology")));
        assert!(
            matches!(validate(&common("nosuch")), Err(BisectError::Usage(m)) if m.contains("--test"))
        );
        let mut c = common("futex");
        c.kernel = "../x".into();
        assert!(validate(&c).is_err());
        // With a step command, suite and kernel are not checked.
        let mut c = common("nosuch");
        c.kernel = "../x".into();
        c.step_command = Some("true".into());
        assert!(validate(&c).is_ok());
        // Topology names from matrix.yaml, with or without dashes.
        let mut c = common("futex");
        c.topology = "2n2c".into();
        assert_eq!(validate(&c).unwrap().1.nodes().len(), 2);
        c.topology = "2n-2c".into();
        assert_eq!(validate(&c).unwrap().1.nodes().len(), 2);
        c.topology = "7n".into();
        assert!(validate(&c).is_err());
    }

    #[test]
    fn verdicts_from_cases() {
        let sel = TestSel::parse("futex/futex-prctl/*").unwrap();
        let v = |cases: &[Case]| verdict_from_cases(cases, &sel).0;
        assert_eq!(
            v(&[
                case("futex-prctl/a", CaseStatus::Pass),
                case("futex-numa/b", fail())
            ]),
            Verdict::Good
        );
        assert_eq!(
            v(&[
                case("futex-prctl/a", CaseStatus::Pass),
                case("futex-prctl/<incomplete>", fail())
            ]),
            Verdict::Bad
        );
        let (verdict, why) = verdict_from_cases(&[case("futex-prctl/slots", fail())], &sel);
        assert_eq!(verdict, Verdict::Bad);
        assert!(why.contains("futex-prctl/slots"));
        let many: Vec<Case> = (0..8)
            .map(|i| case(&format!("futex-prctl/c{i}"), fail()))
            .collect();
        let (_, why) = verdict_from_cases(&many, &sel);
        assert_eq!(why, "failed: futex-prctl/c0, futex-prctl/c1, futex-prctl/c2, futex-prctl/c3, futex-prctl/c4 and 3 more");
        // Boot failure: only boot/vm cases.
        assert_eq!(
            v(&[case("boot/kernel-panic", fail()), case("vm", fail())]),
            Verdict::Skip
        );
        assert_eq!(v(&[]), Verdict::Skip);
        assert_eq!(
            v(&[case("futex-prctl/a", CaseStatus::Skip("no".into()))]),
            Verdict::Skip
        );
    }

    #[test]
    fn repeat_policy() {
        use Verdict::*;
        assert_eq!(combine(&[Good, Bad, Good], BadIf::Any), Bad);
        assert_eq!(combine(&[Good, Bad, Good], BadIf::All), Good);
        assert_eq!(combine(&[Bad, Bad, Skip], BadIf::All), Bad);
        assert_eq!(combine(&[Bad, Bad, Bad], BadIf::All), Bad);
        assert_eq!(combine(&[Skip, Skip], BadIf::Any), Skip);
        assert_eq!(combine(&[Skip, Good], BadIf::Any), Good);
        assert_eq!(combine(&[Good], BadIf::Any), Good);
        assert!(decided(&[Good, Bad], BadIf::Any));
        assert!(!decided(&[Good, Good], BadIf::Any));
        assert!(decided(&[Bad, Good], BadIf::All));
        assert!(!decided(&[Bad, Skip], BadIf::All));
        assert_eq!(Verdict::from_exit(Some(0)), Good);
        assert_eq!(Verdict::from_exit(Some(1)), Bad);
        assert_eq!(Verdict::from_exit(Some(127)), Bad);
        assert_eq!(Verdict::from_exit(Some(125)), Skip);
        assert_eq!(Verdict::from_exit(Some(130)), Skip);
        assert_eq!(Verdict::from_exit(None), Skip);
        assert_eq!([Good, Bad, Skip].map(Verdict::exit_code), [0, 1, 125]);
    }

    #[test]
    fn first_bad_commit_from_git_output() {
        let out = "running 'harness' 'bisect-step'\n\
            Bisecting: 0 revisions left to test after this (roughly 0 steps)\n\
            [0123456789abcdef0123456789abcdef01234567] futex: x\n\
            0123456789abcdef0123456789abcdef01234567 is the first bad commit\n\
            commit 0123456789abcdef0123456789abcdef01234567\n\
            Author: A <a@b>\n\n    this is the first bad commit in a message\n";
        assert_eq!(
            parse_first_bad(out).as_deref(),
            Some("0123456789abcdef0123456789abcdef01234567")
        );
        assert_eq!(
            parse_first_bad("There are only 'skip'ped commits left to test.\nThe first bad commit could be any of:\nabc\n"),
            None
        );
        assert_eq!(parse_first_bad("nothing is the first bad commit\n"), None);
    }

    #[test]
    fn steps_jsonl_lines_round_trip() {
        let r = StepRecord {
            step: 3,
            phase: "bisect".into(),
            commit: "0123456789abcdef".into(),
            subject: "futex: \"quoted\"\nsubject".into(),
            verdict: Verdict::Bad,
            reps: vec![Verdict::Good, Verdict::Bad],
            reason: "failed: futex-prctl/slots".into(),
            build_seconds: 12.5,
            run_seconds: 40.0,
            dir: "o/steps/003-0123456789ab".into(),
            metric: None,
            threshold: None,
            values: Vec::new(),
            value: None,
        };
        let line = r.to_line();
        assert!(line.ends_with('\n'));
        assert_eq!(line.matches('\n').count(), 1);
        let v: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert_eq!(v["verdict"], "bad");
        assert_eq!(v["reps"], serde_json::json!(["good", "bad"]));
        assert_eq!(v["build_seconds"], 12.5);
        let d = tempfile::tempdir().unwrap();
        std::fs::write(
            d.path().join("steps.jsonl"),
            format!("{line}garbage\n{line}"),
        )
        .unwrap();
        assert_eq!(read_steps(d.path()), vec![r.clone(), r.clone()]);
        // A test bisection's line has no metric fields ...
        assert!(v.get("metric").is_none() && v.get("values").is_none());
        // ... a performance bisection's has them, a run without a value as null.
        let m = StepRecord {
            metric: Some("ops_per_s_mean:b1024".into()),
            threshold: Some("<1000".into()),
            values: vec![Some(812.5), None, Some(790.0)],
            value: Some(801.25),
            ..r
        };
        let v: serde_json::Value = serde_json::from_str(&m.to_line()).unwrap();
        assert_eq!(v["values"], serde_json::json!([812.5, null, 790.0]));
        assert_eq!(v["value"], 801.25);
        assert_eq!(v["threshold"], "<1000");
        assert_eq!(serde_json::from_value::<StepRecord>(v).unwrap(), m);
    }

    #[test]
    fn expected_steps() {
        assert_eq!(steps_expected(0), 0);
        assert_eq!(steps_expected(1), 0);
        assert_eq!(steps_expected(2), 1);
        assert_eq!(steps_expected(31), 5);
        assert_eq!(steps_expected(32), 5);
        assert_eq!(steps_expected(33), 6);
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

//! `harness bisect`: find the commit of a kernel tree that broke a test.
//!
//! The orchestrator ([`run`]) refuses dirty trees, runs `git bisect start`,
//! checks that `--good` is good and `--bad` is bad by running one step at
//! each, then `git bisect run <harness> bisect-step ...`. Every step
//! ([`step`], the hidden `bisect-step` subcommand) builds the checked-out
//! commit incrementally (one persistent `O=` object directory under the
//! bisect directory, the definition's config base, fragments and required
//! options, ccache), boots it through `Session::prepare` and the runner as
//! a `path:` kernel (the same corridor as every door) and runs only the
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
//!
//! `--dry-run` ([`dry_run`]) makes every check of [`ends`] and says what
//! the bisection would do, touching nothing.
//!
//! The parts: [`CommonArgs`] and the step's argv (`args.rs`), what
//! `--test`/`--metric` select and the argument checks (`select.rs`), a
//! step's [`Verdict`] (`verdict.rs`), git (`git.rs`), `steps.jsonl`
//! (`record.rs`), Ctrl-C (`interrupt.rs`), the step (`step.rs`) and the
//! orchestration here.

pub mod metric;

mod args;
mod dry_run;
mod git;
mod interrupt;
mod record;
mod select;
mod step;
mod verdict;

pub use args::{step_argv, BisectArgs, CommonArgs, StepArgs};
pub use dry_run::dry_run;
pub use git::{check_tree, parse_first_bad, CommitInfo};
pub use interrupt::Interrupt;
pub use record::{read_steps, StepRecord};
pub use select::{bench_specs, validate, Perf, TestSel, BENCH_SUITE};
pub use step::{step, Stepped};
pub use verdict::{combine, decided, verdict_from_cases, BadIf, Verdict};

use args::step_command;
use git::{commit_info, git, rev, ResetGuard};
use interrupt::run_child;
use std::path::Path;
use std::process::Command;
use std::sync::atomic::Ordering;

use crate::error::exit;

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

impl From<BisectError> for crate::error::Error {
    fn from(e: BisectError) -> Self {
        match e {
            BisectError::Usage(_) => crate::error::Error::usage(e),
            BisectError::Infra(_) => crate::error::Error::infra(e),
        }
    }
}

fn infra(what: impl std::fmt::Display) -> BisectError {
    BisectError::Infra(what.to_string())
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
    /// The human report for stdout (empty when the bisection did not end).
    pub report: String,
}

/// The two ends of a bisection, resolved and checked (nothing written).
#[derive(Debug, Clone)]
pub struct Ends {
    /// `--good`'s commit.
    pub good: String,
    /// `--bad`'s commit.
    pub bad: String,
    /// Commits in `good..bad`.
    pub commits: u64,
}

/// Every check `harness bisect` makes before it touches anything: the
/// arguments, the definition, the tree (clean, a kernel tree at both ends)
/// and that `--good` is an ancestor of `--bad`.
pub fn ends(args: &BisectArgs) -> Result<Ends, BisectError> {
    let c = &args.common;
    validate(c)?;
    Perf::of(c)?;
    if c.step_command.is_none() {
        crate::kernel::definition::check(&c.kernel)
            .map_err(|e| BisectError::Usage(format!("--kernel: {e}")))?;
    }
    check_tree(&c.tree)?;
    let good = rev(&c.tree, &args.good, "--good")?;
    let bad = rev(&c.tree, &args.bad, "--bad")?;
    if c.step_command.is_none() {
        // Both ends must be kernel trees, or every step is a build failure.
        for (opt, id) in [("--good", &good), ("--bad", &bad)] {
            for f in ["Makefile", "Kconfig"] {
                if git(&c.tree, &["cat-file", "-e", &format!("{id}:{f}")]).is_err() {
                    return Err(BisectError::Usage(format!(
                        "{}: {opt} {} has no top-level {f}: not a Linux kernel tree",
                        c.tree.display(),
                        &id[..12]
                    )));
                }
            }
        }
    }
    if git(&c.tree, &["merge-base", "--is-ancestor", &good, &bad]).is_err() {
        return Err(BisectError::Usage(format!(
            "--good {} is not an ancestor of --bad {}",
            args.good, args.bad
        )));
    }
    let commits: u64 = git(&c.tree, &["rev-list", "--count", &format!("{good}..{bad}")])?
        .trim()
        .parse()
        .unwrap_or(0);
    Ok(Ends { good, bad, commits })
}

/// `harness bisect`: `exe` is the harness binary that runs the steps. Its
/// notes go to `say`, the steps' own lines to `echo` (the front door's
/// stderr); the report is the outcome's.
pub fn run(
    args: &BisectArgs,
    exe: &Path,
    intr: &Interrupt,
    say: fn(&str),
    echo: fn(&str),
) -> Result<Outcome, BisectError> {
    let c = &args.common;
    let perf = Perf::of(c)?;
    let Ends {
        good,
        bad,
        commits: n,
    } = ends(args)?;
    std::fs::create_dir_all(&c.out).map_err(|e| infra(format!("{}: {e}", c.out.display())))?;
    // A new bisection: drop the previous one's records and logs (the
    // object directory stays: it makes the first build incremental).
    let _ = std::fs::remove_file(c.out.join("steps.jsonl"));
    let _ = std::fs::remove_dir_all(c.out.join("steps"));
    say(&format!(
        "bisect: {n} commit(s) in {}..{}, about {} step(s) after checking both ends",
        &good[..12],
        &bad[..12],
        steps_expected(n)
    ));

    git(&c.tree, &["bisect", "start"])?;
    let guard = ResetGuard { tree: &c.tree, say };
    let finish = |status: u8, first_bad: Option<CommitInfo>| -> Outcome {
        if let Ok(log) = git(&c.tree, &["bisect", "log"]) {
            let _ = std::fs::write(c.out.join("bisect.log"), log);
        }
        Outcome {
            first_bad,
            steps: read_steps(&c.out),
            exit: status,
            report: String::new(),
        }
    };
    for (phase, id, want, opt) in [
        ("check-good", &good, Verdict::Good, "--good"),
        ("check-bad", &bad, Verdict::Bad, "--bad"),
    ] {
        if intr.seen.load(Ordering::SeqCst) {
            let o = finish(exit::INTERRUPTED, None);
            drop(guard);
            return Ok(o);
        }
        git(&c.tree, &["checkout", "-q", "--detach", id])?;
        say(&format!(
            "bisect: checking that {opt} {} is {}",
            &id[..12],
            want.name()
        ));
        let (code, _) = run_child(step_command(exe, c, phase), intr, echo)?;
        if intr.seen.load(Ordering::SeqCst) {
            let o = finish(exit::INTERRUPTED, None);
            drop(guard);
            return Ok(o);
        }
        let got = Verdict::from_exit(code);
        if got != want {
            let o = finish(exit::USAGE, None);
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
    let (_, text) = run_child(cmd, intr, echo)?;
    let _ = std::fs::write(c.out.join("bisect-run.log"), &text);
    if intr.seen.load(Ordering::SeqCst) {
        let o = finish(exit::INTERRUPTED, None);
        drop(guard);
        return Ok(o);
    }
    let first = match parse_first_bad(&text) {
        Some(id) => Some(commit_info(&c.tree, &id)?),
        None => None,
    };
    let status = if first.is_some() {
        exit::OK
    } else {
        exit::TESTS_FAILED
    };
    let mut o = finish(status, first);
    drop(guard);
    o.report = report(&o, &text);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expected_steps() {
        assert_eq!(steps_expected(0), 0);
        assert_eq!(steps_expected(1), 0);
        assert_eq!(steps_expected(2), 1);
        assert_eq!(steps_expected(31), 5);
        assert_eq!(steps_expected(32), 5);
        assert_eq!(steps_expected(33), 6);
    }
}

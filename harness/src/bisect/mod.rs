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
//!
//! The parts: [`CommonArgs`] and the step's argv (`args.rs`), what
//! `--test`/`--metric` select and the argument checks (`select.rs`), a
//! step's [`Verdict`] (`verdict.rs`), git (`git.rs`), `steps.jsonl`
//! (`record.rs`), Ctrl-C (`interrupt.rs`), and the step and the orchestration
//! here.

pub mod metric;

mod args;
mod git;
mod interrupt;
mod record;
mod select;
mod verdict;

pub use args::{step_argv, BisectArgs, CommonArgs, StepArgs};
pub use git::{check_tree, parse_first_bad, CommitInfo};
pub use interrupt::Interrupt;
pub use record::{read_steps, StepRecord};
pub use select::{bench_specs, validate, Perf, TestSel, BENCH_SUITE};
pub use verdict::{combine, decided, verdict_from_cases, BadIf, Verdict};

use args::step_command;
use git::{commit_info, git, rev, ResetGuard};
use interrupt::run_child;
use std::io::Write;
use std::path::Path;
use std::process::Command;
use std::process::Stdio;
use std::sync::atomic::Ordering;
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

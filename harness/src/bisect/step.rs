//! `harness bisect-step`: one step at the tree's HEAD: its repetitions
//! (through `--step-command`, or build + boot + test), their verdict and its
//! `steps.jsonl` record. Knows nothing of the bisection around it.

use super::git::git;
use super::{
    bench_specs, combine, decided, metric, read_steps, validate, verdict_from_cases, CommonArgs,
    Perf, StepArgs, StepRecord, Verdict, BENCH_SUITE,
};
use guest_tests::bench::BenchLine;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

/// What one step leaves for its front door.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stepped {
    /// The exit status for `git bisect run` (0, 1, 125; 130 when
    /// interrupted).
    pub exit: u8,
    /// The step's line for stdout (`step N phase commit: verdict ...`);
    /// empty when the step could not begin.
    pub line: String,
}

/// `harness bisect-step`: one step at the tree's HEAD. Its notes (a build's
/// progress, why it cannot begin, signals) go to `say`.
pub async fn step(args: StepArgs, say: fn(&str)) -> Stepped {
    let skip = |e: &dyn std::fmt::Display| {
        say(&format!("bisect-step: {e}"));
        Stepped {
            exit: crate::error::exit::BISECT_SKIP,
            line: String::new(),
        }
    };
    let c = &args.common;
    let t0 = Instant::now();
    let (id, subject) = match (
        git(&c.tree, &["rev-parse", "HEAD"]),
        git(&c.tree, &["show", "-s", "--format=%s", "HEAD"]),
    ) {
        (Ok(i), Ok(s)) => (i.trim().to_string(), s.trim().to_string()),
        (Err(e), _) | (_, Err(e)) => return skip(&e),
    };
    let perf = match Perf::of(c) {
        Ok(p) => p,
        Err(e) => return skip(&e),
    };
    let n = read_steps(&c.out).len() + 1;
    let dir = c.out.join("steps").join(format!("{n:03}-{}", &id[..12]));
    let _ = std::fs::create_dir_all(&dir);
    let cancel = tokio_util::sync::CancellationToken::new();
    let _ = crate::signals::install(cancel.clone(), say);
    let r = match &c.step_command {
        Some(cmd) => command_reps(c, perf.as_ref(), cmd, &id, &dir),
        None => kernel_reps(c, perf.as_ref(), &dir, &cancel, say).await,
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
        say(&format!("bisect-step: {}: {e}", path.display()));
    }
    let line = format!(
        "step {n} {} {}: {} ({}) in {:.0} s",
        args.phase,
        &id[..12],
        verdict.name(),
        rec.reason,
        t0.elapsed().as_secs_f64()
    );
    Stepped {
        exit: if cancel.is_cancelled() {
            crate::error::exit::INTERRUPTED
        } else {
            verdict.exit_code()
        },
        line,
    }
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

    /// A repetition of a performance bisection from the `# BENCH` lines
    /// it produced (`None`: no output at all).
    fn measured(p: &Perf, lines: Option<&[BenchLine]>, none: &str) -> Rep {
        match lines.map(|l| p.metric.value_of(l)) {
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
                std::fs::read_to_string(&bench)
                    .ok()
                    .map(|text| {
                        text.lines()
                            .filter_map(BenchLine::parse)
                            .collect::<Vec<_>>()
                    })
                    .as_deref(),
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
    say: fn(&str),
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
    let mut opts = crate::kernel::build::BuildOptions {
        arch: c.arch,
        ..Default::default()
    };
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
        crate::kernel::build::build_tree(&d2, &tree, &obj, &opts, &log, &say)
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
    let expect = step_expectations(&image, def.version.clone(), def.expect.clone());
    let tests = match step_tests(c, &sel, &topology, expect.as_deref()) {
        Ok(t) => t,
        Err(e) => return skip(e, build_s),
    };
    // The one way into a cell: the built image is a `path:` kernel with
    // the definition's expectations, the selected tests given whole.
    let mut reporters = crate::reporter::Reporters::new();
    let mut session = match crate::planner::Session::open(None, &mut reporters).await {
        Ok(s) => s,
        Err(e) => return skip(e.to_string(), build_s),
    };
    let want = step_want(c, &sel, image, &topology, tests, expect, dir.join("run-1"));
    let base = match session.prepare(want, &mut reporters).await {
        Ok(p) => {
            let mut req = p.request;
            step_settings(c, &mut req);
            req
        }
        Err(e) => return skip(e.to_string(), build_s),
    };
    let tr = Instant::now();
    let mut reps: Vec<Rep> = Vec::new();
    for i in 0..c.repeat {
        let out_dir = dir.join(format!("run-{}", i + 1));
        let mut req = base.clone();
        req.out_dir = out_dir.clone();
        let cell = crate::planner::PlannedCell::Ready(Box::new(crate::planner::cell(0, req)));
        let mut reporters = crate::reporter::Reporters::new();
        reporters.add(crate::reporter::junit::Junit::new(
            &out_dir.join("junit.xml"),
            "harness bisect",
        ));
        let run = crate::runner::run(
            &mut session,
            vec![cell],
            &crate::runner::RunOptions::serial(std::time::Duration::ZERO),
            cancel,
            &mut reporters,
        )
        .await;
        let outcome = run.map(|mut o| o.remove(0));
        match outcome {
            Ok(crate::events::CellOutcome {
                result: Some(cell), ..
            }) => {
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
                        let lines = crate::bench::report::bench_lines(&cell.ktap);
                        let mut r = Rep::measured(p, Some(&lines), "no results.ktap");
                        if r.value.is_none() && !matches!(cell.end, crate::result::VmEnd::Finished)
                        {
                            r.why = format!("{}; {}", r.why, crate::verdict::describe(&cell.end));
                        }
                        r
                    }
                });
            }
            Ok(o) => reps.push(Rep::skip(match o.status {
                crate::events::CellStatus::Error(e) | crate::events::CellStatus::NotRun(e) => {
                    format!("cell: {e}")
                }
                s => format!("cell: {}", s.word()),
            })),
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

/// The expectations of the checked-out commit as a kernel: the
/// definition's version row and its own `expect:`, layered as for every
/// other kernel.
pub(super) fn step_expectations(
    image: &Path,
    version: Option<String>,
    expect: Option<String>,
) -> Option<String> {
    crate::kernelspec::ResolvedKernel {
        path: image.to_path_buf(),
        version,
        description: String::new(),
        expect,
        origin: crate::kernelspec::KernelOrigin::Source,
        arch: crate::arch::Arch::X86_64,
    }
    .expectations(None)
    .ok()
    .flatten()
}

/// The tests a step runs: the selected binaries of the suite, or for the
/// bench suite the selected configurations only (a whole bench run is
/// minutes). `Err` when nothing is selected.
pub(super) fn step_tests(
    c: &CommonArgs,
    sel: &super::TestSel,
    topology: &crate::topology::Topology,
    expect: Option<&str>,
) -> Result<Vec<crate::suite::SuiteTest>, String> {
    let tests: Vec<_> = match crate::suite::builtin(&sel.suite, expect) {
        Ok(_) if sel.suite == BENCH_SUITE => vec![crate::bench::suite_test_with(
            &bench_specs(sel, topology.nodes().len()),
            expect,
        )],
        Ok(t) => t
            .into_iter()
            .filter(|t| sel.binary_selected(&t.name))
            .collect(),
        Err(e) => return Err(e.to_string()),
    };
    if tests.is_empty() {
        return Err(format!("--test {}: no test of the suite matches", c.test));
    }
    Ok(tests)
}

/// What a step asks of its cell: the built image as a `path:` kernel,
/// the definition's expectations and the selected tests, no shares.
pub(super) fn step_want(
    c: &CommonArgs,
    sel: &super::TestSel,
    image: std::path::PathBuf,
    topology: &crate::topology::Topology,
    tests: Vec<crate::suite::SuiteTest>,
    expect: Option<String>,
    out_dir: std::path::PathBuf,
) -> crate::prepare::CellWant {
    use crate::prepare::{CellWant, ExpectWant, ShareWant, SuiteWant};
    CellWant {
        name: Some(format!("bisect/{}/{}", c.topology, c.test)),
        kernel_label: format!("bisect:{}", c.kernel),
        kernel_name: None,
        kernel: crate::kernelspec::KernelSpec::Path(image),
        topology_label: c.topology.clone(),
        topology: topology.clone(),
        suite: SuiteWant::Tests {
            label: sel.suite.clone(),
            tests,
        },
        extra_tests: Vec::new(),
        expect: ExpectWant::Given(expect),
        accel: crate::host::AccelChoice::Auto,
        arch: c.arch,
        shares: ShareWant::default(),
        known_failures: Vec::new(),
        out_dir,
    }
}

/// A step's own settings over its prepared cell.
pub(super) fn step_settings(c: &CommonArgs, req: &mut crate::planner::CellRequest) {
    // Only the selected tests: the step's verdict is theirs.
    req.topology_check = false;
    req.timeout_scale = c.timeout_scale;
}

/// The cell `--dry-run` shows for one repetition: [`step_want`] as
/// [`crate::prepare`] would make it, with nothing resolved.
pub(super) fn step_request(
    c: &CommonArgs,
    want: crate::prepare::CellWant,
    accel: crate::qemu::Accel,
) -> crate::planner::CellRequest {
    let crate::kernelspec::KernelSpec::Path(image) = want.kernel else {
        unreachable!("a step's kernel is its built image")
    };
    let crate::prepare::SuiteWant::Tests { label, tests } = want.suite else {
        unreachable!("a step's tests are given whole")
    };
    let mut req = crate::planner::CellRequest::new(
        &want.kernel_label,
        image,
        &want.topology_label,
        want.topology,
        &label,
        tests,
        accel,
        want.out_dir,
    );
    req.name = want.name.unwrap_or(req.name);
    req.arch = want.arch;
    if let crate::prepare::ExpectWant::Given(e) = want.expect {
        req.expect = e;
    }
    step_settings(c, &mut req);
    req
}

fn first_line(s: &str) -> String {
    s.lines().next().unwrap_or_default().to_string()
}

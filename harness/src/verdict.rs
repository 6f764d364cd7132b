//! Flattens a [`CellResult`] into test cases with a status: the one place
//! that decides pass/fail/skip, used by JUnit and the summary alike.
//!
//! Leaves decide: a case per leaf KTAP test, named `top/sub/leaf`. Extra
//! cases say what the leaves cannot: `top/<exit>` (the parent said `not ok`
//! though every child passed: the binary crashed or was killed after its
//! last case), `top/<incomplete>` (the VM ended inside the test),
//! `top/kernel-<kind>` (a kernel report printed while the test ran),
//! `boot/kernel-<kind>` (one printed outside any test), `vm` (the VM ended
//! abnormally and nothing else says so), `ktap` (the top-level plan does
//! not match the results) and `top/<plan>` (a binary printed fewer results
//! than its own plan).
//!
//! A failure the matrix declares known (exact case, kernels and message)
//! becomes [`CaseStatus::Xfail`]: its own status everywhere, never a pass
//! or a skip. A guest cannot excuse itself: `not ok ... # TODO` or
//! `# XFAIL` is a failure.

use crate::console::{KernelReport, ReportKind};
use crate::ktap::{Directive, TestNode, TestResult};
use crate::result::{CellResult, VmEnd, Wedge, WedgeWhy};
use std::collections::{BTreeMap, HashSet};
use std::fmt::Write;

/// Status of one case.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CaseStatus {
    /// Passed.
    Pass,
    /// Skipped, with the reason.
    Skip(String),
    /// Failed: a one-line message and a longer text (diagnostics, console excerpt).
    Fail {
        /// One line.
        message: String,
        /// Details.
        text: String,
    },
    /// Failed exactly as a known-failure entry of the matrix says: an
    /// expected failure, reported as such (not a pass, not a skip).
    Xfail {
        /// What happened: the failure's one-line message.
        message: String,
        /// Details, as for a failure.
        text: String,
        /// Why the entry accepts it.
        reason: String,
        /// The entry ([`crate::result::KnownFailure::at`]: `matrix.yaml:85:9`).
        entry: String,
    },
}

impl CaseStatus {
    /// The word reports use: `pass`, `fail`, `xfail`, `skip`.
    pub fn word(&self) -> &'static str {
        match self {
            CaseStatus::Pass => "pass",
            CaseStatus::Skip(_) => "skip",
            CaseStatus::Fail { .. } => "fail",
            CaseStatus::Xfail { .. } => "xfail",
        }
    }
}

/// One leaf test case.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Case {
    /// `binary/case` path of names.
    pub name: String,
    /// Status.
    pub status: CaseStatus,
}

/// How many cases passed, failed, failed as expected and were skipped.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// Passed.
    pub pass: usize,
    /// Failed.
    pub fail: usize,
    /// Skipped.
    pub skip: usize,
    /// Failed exactly as a known-failure entry says.
    pub xfail: usize,
}

impl Counts {
    /// Every case counted.
    pub fn total(&self) -> usize {
        self.pass + self.fail + self.skip + self.xfail
    }
}

/// Counts cases by status.
pub fn counts(cases: &[Case]) -> Counts {
    let mut c = Counts::default();
    for case in cases {
        match case.status {
            CaseStatus::Pass => c.pass += 1,
            CaseStatus::Skip(_) => c.skip += 1,
            CaseStatus::Fail { .. } => c.fail += 1,
            CaseStatus::Xfail { .. } => c.xfail += 1,
        }
    }
    c
}

/// How the VM ended, in words, e.g. "killed by the host watchdog after 300 s".
pub fn describe(end: &VmEnd) -> String {
    match end {
        VmEnd::Finished => "guest-init finished the plan".to_string(),
        VmEnd::InitError(e) => format!("guest-init failed: {e}"),
        VmEnd::KernelPanic => "kernel panic".to_string(),
        VmEnd::Watchdog(d) => format!("killed by the host watchdog after {} s", d.as_secs()),
        VmEnd::Wedged(w) => describe_wedge(w),
        // -no-reboot: a reboot (a panic under panic=-1 whose console line
        // was lost, a triple fault) ends QEMU with status 0.
        VmEnd::QemuExited { status: 0, stderr } if stderr.trim().is_empty() => {
            "the guest rebooted or powered off by itself (QEMU exited with status 0)".to_string()
        }
        VmEnd::QemuExited { status, stderr } if *status < 0 => {
            let sig = -status;
            let name = match sig {
                9 => " (SIGKILL)",
                15 => " (SIGTERM)",
                6 => " (SIGABRT)",
                11 => " (SIGSEGV)",
                _ => "",
            };
            match stderr.lines().map(str::trim).rfind(|l| !l.is_empty()) {
                Some(last) => format!("QEMU was killed by signal {sig}{name}: {last}"),
                None => format!("QEMU was killed by signal {sig}{name}"),
            }
        }
        VmEnd::QemuExited { status, stderr } => {
            match stderr.lines().map(str::trim).rfind(|l| !l.is_empty()) {
                Some(last) => format!("QEMU exited with status {status}: {last}"),
                None => format!("QEMU exited with status {status}"),
            }
        }
        VmEnd::Interrupted => "interrupted (SIGINT/SIGTERM)".to_string(),
    }
}

/// A wedge in words: "the kernel was wedged by livelock (soft-lockup):
/// ...", what the later binaries' "not run" says.
fn describe_wedge(w: &Wedge) -> String {
    let test = w.test.as_deref().unwrap_or("the running test");
    let what = match w.why {
        WedgeWhy::Unanswered(past) => format!(
            "{test} got no result {} s past its timeout and guest-init's grace",
            past.as_secs()
        ),
        WedgeWhy::CpuHeld => {
            format!("a task of it spins on in the kernel after SIGKILL; ended at {test}")
        }
        WedgeWhy::TimeoutsInARow => {
            format!("a second test in a row timed out after the report ({test})")
        }
        WedgeWhy::NoPoweroff(after) => format!(
            "the plan was done and the guest had not powered off {} s later",
            after.as_secs()
        ),
    };
    match (w.report, &w.by) {
        (Some(report), Some(by)) => format!("the kernel was wedged by {by} ({report}): {what}"),
        (Some(report), None) => format!("the kernel was wedged ({report}): {what}"),
        (None, _) => format!("the guest stopped answering without a kernel report: {what}"),
    }
}

/// The cases of a cell, known failures applied: a failure whose case and
/// one-line message an entry of the cell names is [`CaseStatus::Xfail`].
pub fn cases(cell: &CellResult) -> Vec<Case> {
    let mut cases = raw_cases(cell);
    for c in &mut cases {
        if let CaseStatus::Fail { message, text } = &c.status {
            let known = cell
                .known_failures
                .iter()
                .find(|k| k.excuses(&c.name, message, &cell.accel));
            if let Some(k) = known {
                c.status = CaseStatus::Xfail {
                    message: message.clone(),
                    text: text.clone(),
                    reason: k.reason.clone(),
                    entry: k.at.clone(),
                };
            }
        }
    }
    cases
}

/// [`cases`] before known failures are applied.
fn raw_cases(cell: &CellResult) -> Vec<Case> {
    let mut out = Vec::new();
    let reports = &cell.console.reports;
    let mut used = vec![false; reports.len()];
    // Reports of the test named `name`, marked as accounted for.
    let mut take_reports = |name: &str| -> Vec<&KernelReport> {
        reports
            .iter()
            .zip(used.iter_mut())
            .filter(|(r, _)| r.test.as_deref() == Some(name))
            .map(|(r, u)| {
                *u = true;
                r
            })
            .collect()
    };
    let mut explained = false;
    let mut any_incomplete = false;
    let mut seen = HashSet::new();

    for (i, top) in cell.ktap.tests.iter().enumerate() {
        let name = if !top.name.is_empty() {
            top.name.clone()
        } else {
            // An unnamed top-level test is still the plan's entry at its place.
            cell.planned
                .get(i)
                .cloned()
                .unwrap_or_else(|| format!("#{}", top.number))
        };
        if begun_after_wedge(cell, top, &name) {
            // Ended within its first second: "not run" below, like the rest.
            continue;
        }
        seen.insert(name.clone());
        let ctx = Ctx {
            end: &cell.end,
            reports: take_reports(&name),
        };
        let first = out.len();
        let incomplete = flatten(top, &name, &ctx, &mut out);
        any_incomplete |= incomplete;
        explained |= incomplete;
        let unplaced = charge_cases(&name, &ctx.reports, &mut out, first);
        if !incomplete {
            // An incomplete test's `<incomplete>` case already names them.
            kernel_cases(&name, &unplaced, &mut out);
        }
    }

    for name in &cell.planned {
        if seen.contains(name) {
            continue;
        }
        explained = true;
        let reports = take_reports(name);
        let verb = match &cell.end {
            // Not a fault of its own: the kernel no longer ran tests.
            VmEnd::Wedged(w) if w.test.as_deref() != Some(name.as_str()) => "not run",
            _ if cell.console.running_at_end.as_deref() == Some(name.as_str()) => "did not finish",
            _ => "did not run",
        };
        let why = match cell.end {
            VmEnd::Finished => "no result from guest-init".to_string(),
            ref end => describe(end),
        };
        out.push(Case {
            name: name.clone(),
            status: CaseStatus::Fail {
                message: format!("{verb}: {why}{}", first_report(&reports)),
                text: report_text(&reports),
            },
        });
    }

    // Reports of tests KTAP and the plan do not know, and of no test at all.
    let mut rest: BTreeMap<&str, Vec<&KernelReport>> = BTreeMap::new();
    for (r, _) in reports.iter().zip(&used).filter(|(_, u)| !**u) {
        rest.entry(r.test.as_deref().unwrap_or("boot"))
            .or_default()
            .push(r);
    }
    for (test, reports) in rest {
        kernel_cases(test, &reports, &mut out);
    }

    if cell.end == VmEnd::KernelPanic && reports.iter().any(|r| r.kind == ReportKind::Panic) {
        explained = true;
    }
    if cell.end != VmEnd::Finished && !explained {
        let mut text = describe(&cell.end);
        if let VmEnd::QemuExited { stderr, .. } = &cell.end {
            let _ = write!(text, "\n\nQEMU stderr:\n{stderr}");
        }
        if !cell.console.tail.is_empty() {
            let _ = write!(text, "\n\nconsole tail:\n{}", cell.console.tail);
        }
        out.push(Case {
            name: "vm".to_string(),
            status: CaseStatus::Fail {
                message: describe(&cell.end),
                text,
            },
        });
    }

    let doc = &cell.ktap;
    let results = doc.tests.len() as u64;
    let plan_broken = match doc.plan {
        // Fewer results after the VM ended early is already said above.
        Some(plan) => {
            results > plan || (results < plan && !any_incomplete && cell.end == VmEnd::Finished)
        }
        None => false,
    };
    if plan_broken || out.is_empty() {
        let message = match doc.plan {
            Some(plan) if plan_broken => format!("plan 1..{plan} but {results} results"),
            _ => "no test results".to_string(),
        };
        out.push(Case {
            name: "ktap".to_string(),
            status: CaseStatus::Fail {
                message,
                text: doc.problems.join("\n"),
            },
        });
    }

    unique_names(&mut out);
    out
}

/// Whether top-level test `top` (named `name`) only began, with nothing
/// to show, after the harness had found the guest wedged by an earlier one.
fn begun_after_wedge(cell: &CellResult, top: &TestNode, name: &str) -> bool {
    match &cell.end {
        VmEnd::Wedged(w) => {
            !matches!(w.why, WedgeWhy::Unanswered(_))
                && w.test.as_deref() != Some(name)
                && top.result == TestResult::Incomplete
                && top.subtests.is_empty()
        }
        _ => false,
    }
}

struct Ctx<'a> {
    end: &'a VmEnd,
    /// Kernel reports printed while this top-level test ran.
    reports: Vec<&'a KernelReport>,
}

/// Adds the cases of `node` (named `path`); returns whether it or a
/// descendant is incomplete.
fn flatten(node: &TestNode, path: &str, ctx: &Ctx<'_>, out: &mut Vec<Case>) -> bool {
    if node.subtests.is_empty() {
        out.push(Case {
            name: path.to_string(),
            status: leaf_status(node, ctx),
        });
        return node.result == TestResult::Incomplete;
    }
    let before = out.len();
    let mut incomplete = false;
    for sub in &node.subtests {
        let name = if sub.name.is_empty() {
            format!("#{}", sub.number)
        } else {
            sub.name.clone()
        };
        incomplete |= flatten(sub, &format!("{path}/{name}"), ctx, out);
    }
    // A binary that printed fewer results than its own plan lost cases
    // (crashed between them, or a bug): the plan is what it promised.
    let results = node.subtests.len() as u64;
    match node.subplan {
        Some(plan) if plan != results && !incomplete && node.result != TestResult::Incomplete => {
            out.push(Case {
                name: format!("{path}/<plan>"),
                status: CaseStatus::Fail {
                    message: format!("plan 1..{plan} but {results} results"),
                    text: node.diagnostics.join("\n"),
                },
            })
        }
        _ => {}
    }
    let child_failed = out[before..]
        .iter()
        .any(|c| matches!(c.status, CaseStatus::Fail { .. }));
    match node.result {
        // Only the innermost open level says the VM ended inside it.
        TestResult::Incomplete if !incomplete => {
            out.push(Case {
                name: format!("{path}/<incomplete>"),
                status: incomplete_status(node, ctx),
            });
            incomplete = true;
        }
        TestResult::Ok | TestResult::NotOk if !child_failed => {
            if let CaseStatus::Fail { message, text } = leaf_status(node, ctx) {
                out.push(Case {
                    name: format!("{path}/<exit>"),
                    status: CaseStatus::Fail { message, text },
                });
            }
        }
        _ => {}
    }
    incomplete
}

/// The status of a test judged by its own line alone.
fn leaf_status(node: &TestNode, ctx: &Ctx<'_>) -> CaseStatus {
    let fail = |what: &str| CaseStatus::Fail {
        message: assertion(&node.diagnostics)
            .or_else(|| {
                node.diagnostics
                    .iter()
                    .rev()
                    .map(|d| d.trim())
                    .find(|d| !d.is_empty() && !repeats_result(d, &node.name))
            })
            .unwrap_or(what)
            .to_string(),
        text: node.diagnostics.join("\n"),
    };
    match (node.result, &node.directive) {
        (TestResult::Incomplete, _) => incomplete_status(node, ctx),
        (_, Some(Directive::Skip(reason))) => CaseStatus::Skip(reason.clone()),
        // `ok # TODO`: it passed. `not ok # TODO` (or `# XFAIL`): the guest
        // excusing its own failure, which only the matrix may do.
        (TestResult::Ok, Some(Directive::Xfail(_) | Directive::Todo(_))) => CaseStatus::Pass,
        (TestResult::NotOk, Some(d @ (Directive::Xfail(r) | Directive::Todo(r)))) => {
            let mut status = fail("not ok");
            if let CaseStatus::Fail { message, .. } = &mut status {
                let directive = if r.is_empty() {
                    d.keyword().to_string()
                } else {
                    format!("{} {r}", d.keyword())
                };
                *message = format!(
                    "not ok # {directive}: a failure the guest marked expected ({message}); only the matrix's known_failures excuse one"
                );
            }
            status
        }
        (_, Some(d @ (Directive::Timeout(r) | Directive::Error(r)))) => {
            let mut status = fail(d.keyword());
            if let CaseStatus::Fail { message, .. } = &mut status {
                *message = if r.is_empty() {
                    format!("{}: {message}", d.keyword())
                } else {
                    format!("{}: {r}", d.keyword())
                };
            }
            status
        }
        (TestResult::Ok, None) => CaseStatus::Pass,
        (TestResult::NotOk, None) => fail("not ok"),
    }
}

/// The first failed kselftest_harness assertion among `diagnostics`
/// (`<file>:<line>:<test>:Expected a (1) == b (2)`), or the `TH_LOG` the
/// assertion carries (a line of the same file at most 3 source lines
/// below it). Threads of a failing test go on printing after it, so the
/// last line is often another thread's (`Waiter 4: exiting with 0` after
/// the waker's `max broadcast iterations` assertion).
fn assertion(diagnostics: &[String]) -> Option<&str> {
    let at = |d: &str| -> Option<(String, u32)> {
        let head = &d[..d.find(":Expected ")?];
        let mut parts = head.rsplitn(3, ':');
        let _test = parts.next()?;
        let line = parts.next()?.parse().ok()?;
        Some((parts.next()?.to_string(), line))
    };
    let (i, (file, line)) = diagnostics
        .iter()
        .enumerate()
        .find_map(|(i, d)| at(d.trim()).map(|a| (i, a)))?;
    // The line number of a diagnostic from the same file.
    let line_in_file = |d: &str| -> Option<u32> {
        let rest = d.strip_prefix(file.as_str())?.strip_prefix(':')?;
        rest[..rest.find(':')?].parse().ok()
    };
    let log = diagnostics[i + 1..].iter().map(|d| d.trim()).find(|d| {
        !d.contains(":Expected ") && line_in_file(d).is_some_and(|l| l > line && l <= line + 3)
    });
    Some(log.unwrap_or(diagnostics[i].trim()))
}

/// Whether diagnostic `d` only repeats the result of test `name`
/// (kselftest_harness ends a failed test with `#          FAIL  <name>`
/// and `<fn>: Test failed` or `<fn>: Test terminated by assertion`): the
/// cause is the line before them. Its timeout and signal endings say what
/// happened and stay.
fn repeats_result(d: &str, name: &str) -> bool {
    d.strip_prefix("FAIL")
        .is_some_and(|rest| rest.starts_with(' ') && rest.trim() == name)
        || d.ends_with(": Test failed")
        || d.ends_with(": Test terminated by assertion")
}

fn incomplete_status(node: &TestNode, ctx: &Ctx<'_>) -> CaseStatus {
    let why = match ctx.end {
        VmEnd::Finished => "the KTAP stream ended before its result line".to_string(),
        end => describe(end),
    };
    let mut text = node.diagnostics.join("\n");
    let reports = report_text(&ctx.reports);
    if !text.is_empty() && !reports.is_empty() {
        text.push_str("\n\n");
    }
    text.push_str(&reports);
    CaseStatus::Fail {
        message: format!("did not finish: {why}{}", first_report(&ctx.reports)),
        text,
    }
}

/// `; kernel bug: BUG: ...` for a message, or nothing.
fn first_report(reports: &[&KernelReport]) -> String {
    match reports.first() {
        Some(r) => format!("; kernel {}: {}", r.kind, r.title),
        None => String::new(),
    }
}

fn report_text(reports: &[&KernelReport]) -> String {
    let mut text = String::new();
    for r in reports {
        if !text.is_empty() {
            text.push_str("\n\n");
        }
        let _ = write!(
            text,
            "kernel {} at console line {}:\n{}",
            r.kind, r.line, r.excerpt
        );
    }
    text
}

/// Fails each case of top-level test `test` (`out[first..]`) during which
/// the kernel printed a report (its `case-begin`/`case-end` markers
/// framed it): a case that passed or skipped fails with the first report
/// as its message, one that failed keeps its message with the report
/// appended, so a known-failure entry written for the case's own failure
/// does not excuse a kernel report as well. A framed case without a
/// result (the kernel or its process died in it: the binary never
/// reported it) is added, failing with the report, so the case that
/// brought the kernel down is named whether or not the test finished.
/// Returns the reports no case framed (printed between cases, or by a
/// binary without markers), for [`kernel_cases`].
fn charge_cases<'a>(
    test: &str,
    reports: &[&'a KernelReport],
    out: &mut Vec<Case>,
    first: usize,
) -> Vec<&'a KernelReport> {
    let mut unplaced = Vec::new();
    let mut by_case: BTreeMap<String, Vec<&KernelReport>> = BTreeMap::new();
    for r in reports {
        match r.case.as_deref() {
            Some(c) => by_case.entry(format!("{test}/{c}")).or_default().push(r),
            None => unplaced.push(*r),
        }
    }
    for (name, reports) in by_case {
        let report = reports_message(&reports);
        let reports_text = report_text(&reports);
        let Some(case) = out[first..].iter_mut().find(|k| k.name == name) else {
            out.push(Case {
                name,
                status: CaseStatus::Fail {
                    message: format!("{report} (the case gave no result)"),
                    text: reports_text,
                },
            });
            continue;
        };
        case.status = match std::mem::replace(&mut case.status, CaseStatus::Pass) {
            CaseStatus::Fail { message, text } => CaseStatus::Fail {
                message: format!("{message}; {report}"),
                text: format!("{text}\n\n{reports_text}"),
            },
            CaseStatus::Skip(reason) => CaseStatus::Fail {
                message: report,
                text: format!("(the case skipped: {reason})\n\n{reports_text}"),
            },
            _ => CaseStatus::Fail {
                message: report,
                text: reports_text,
            },
        };
    }
    unplaced
}

/// `kernel <kind>: <title>` of the first of `reports` (not empty), and
/// how many more there were.
fn reports_message(reports: &[&KernelReport]) -> String {
    let mut message = format!("kernel {}: {}", reports[0].kind, reports[0].title);
    if reports.len() > 1 {
        let _ = write!(message, " (and {} more)", reports.len() - 1);
    }
    message
}

/// One failing `test/kernel-<kind>` case per kind of report.
fn kernel_cases(test: &str, reports: &[&KernelReport], out: &mut Vec<Case>) {
    let mut by_kind: BTreeMap<ReportKind, Vec<&KernelReport>> = BTreeMap::new();
    for r in reports {
        by_kind.entry(r.kind).or_default().push(r);
    }
    for (kind, reports) in by_kind {
        let message = reports_message(&reports);
        out.push(Case {
            name: format!("{test}/kernel-{kind}"),
            status: CaseStatus::Fail {
                message,
                text: report_text(&reports),
            },
        });
    }
}

/// JUnit consumers merge cases with equal names: number the repeats.
fn unique_names(cases: &mut [Case]) {
    let mut seen: HashSet<String> = HashSet::new();
    // Next suffix to try per name: searching from 2 each time made a
    // guest printing one name 200 000 times quadratic (found while fuzzing).
    let mut next: std::collections::HashMap<String, usize> = Default::default();
    for case in cases {
        if !seen.insert(case.name.clone()) {
            let k = next.entry(case.name.clone()).or_insert(2);
            while !seen.insert(format!("{} ({k})", case.name)) {
                *k += 1;
            }
            case.name = format!("{} ({k})", case.name);
            *k += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{console, ktap};
    use std::time::{Duration, SystemTime};

    fn cell(ktap_text: &str, console_text: &str, end: VmEnd, planned: &[&str]) -> CellResult {
        CellResult {
            name: "debian-7.3.4/nodes2/smoke".into(),
            kernel: "debian:7.3.4".into(),
            topology: "nodes2".into(),
            suite: "smoke".into(),
            accel: "tcg".into(),
            qemu_version: "QEMU emulator version 7.2.15".into(),
            planned: planned.iter().map(|s| s.to_string()).collect(),
            end,
            ktap: ktap::parse(ktap_text.as_bytes()),
            console: console::scan(console_text.as_bytes()),
            console_log: None,
            duration: Duration::from_millis(6400),
            qemu_cpu: None,
            started: SystemTime::UNIX_EPOCH,
            notes: vec![],
            known_failures: vec![],
            boot_retries: vec![],
            qemu_command: String::new(),
            profile: Default::default(),
        }
    }

    fn summary(cases: &[Case]) -> String {
        let mut out = String::new();
        for c in cases {
            let _ = match &c.status {
                CaseStatus::Pass => writeln!(out, "{}: pass", c.name),
                CaseStatus::Skip(r) => writeln!(out, "{}: skip: {r}", c.name),
                CaseStatus::Fail { message, .. } => writeln!(out, "{}: FAIL: {message}", c.name),
                CaseStatus::Xfail { message, .. } => writeln!(out, "{}: XFAIL: {message}", c.name),
            };
        }
        out
    }

    #[track_caller]
    fn check(cell: &CellResult, expected: &str) {
        let got = summary(&cases(cell));
        let expected: String = expected
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .map(|l| format!("{l}\n"))
            .collect();
        assert_eq!(
            got, expected,
            "\n--- got:\n{got}\n--- expected:\n{expected}"
        );
    }

    const TWO: &str = "\
KTAP version 1
1..2
  KTAP version 1
  # Subtest: smoke
  1..2
  ok 1 uname
  # expected 2 got 3
  not ok 2 futex_basic
not ok 1 smoke
  KTAP version 1
  # Subtest: topology
  1..1
  ok 1 nodes # SKIP only one node
ok 2 topology # SKIP reason
";

    const WARNING_IN_TOPOLOGY: &str = "\
[    1.0] harness: begin 2 topology
[    1.1] ------------[ cut here ]------------
[    1.2] WARNING: CPU: 1 PID: 2 at kernel/futex/core.c:10 f+0x1/0x2
[    1.3] ---[ end trace 0000000000000000 ]---
[    1.4] harness: end 2 topology
";

    /// Case markers: a WARNING in smoke's passing `uname`, a lockdep splat
    /// in its failing `futex_basic`, a WARNING between cases, and one
    /// marked with a case the KTAP does not have.
    const REPORTS_IN_CASES: &str = "\
[    1.0] harness: begin 1 smoke
[    1.1] harness: case-begin uname
[    1.2] WARNING: CPU: 0 PID: 9 at kernel/futex/core.c:1 a+0x1/0x2
[    1.3] harness: case-end uname
[    1.4] harness: case-begin futex_basic
[    1.5] WARNING: possible circular locking dependency detected
[    1.6] harness: case-end futex_basic
[    1.7] WARNING: CPU: 0 PID: 9 at kernel/futex/core.c:3 c+0x1/0x2
[    1.8] harness: case-begin gone
[    1.9] WARNING: CPU: 0 PID: 9 at kernel/futex/core.c:4 d+0x1/0x2
[    2.0] harness: case-end gone
[    2.1] harness: end 1 smoke
[    2.2] harness: begin 2 topology
[    2.3] harness: case-begin nodes
[    2.4] BUG: KASAN: slab-use-after-free in futex_wake+0x1/0x2
[    2.5] harness: case-end nodes
[    2.6] harness: end 2 topology
";

    const PANIC_IN_SMOKE: &str = "\
[    1.0] harness: begin 1 smoke
[    2.0] BUG: kernel NULL pointer dereference, address: 0000000000000008
[    2.1] Oops: 0000 [#1] PREEMPT SMP NOPTI
[    2.2] ---[ end trace 0000000000000000 ]---
[    2.3] Kernel panic - not syncing: Fatal exception
[    2.4] ---[ end Kernel panic - not syncing: Fatal exception ]---
";

    #[test]
    fn table() {
        let watchdog = VmEnd::Watchdog(Duration::from_secs(300));
        let planned = &["smoke", "topology"][..];
        let cases: &[(&str, CellResult, &str)] = &[
            (
                "the example: leaves decide, skips keep their reason",
                cell(TWO, "", VmEnd::Finished, planned),
                "
                smoke/uname: pass
                smoke/futex_basic: FAIL: expected 2 got 3
                topology/nodes: skip: only one node
                ",
            ),
            (
                "a WARNING during a test fails it",
                cell(TWO, WARNING_IN_TOPOLOGY, VmEnd::Finished, planned),
                "
                smoke/uname: pass
                smoke/futex_basic: FAIL: expected 2 got 3
                topology/nodes: skip: only one node
                topology/kernel-warning: FAIL: kernel warning: WARNING: CPU: 1 PID: 2 at kernel/futex/core.c:10 f+0x1/0x2
                ",
            ),
            (
                "a report inside a case fails that case; between cases, the binary's",
                cell(TWO, REPORTS_IN_CASES, VmEnd::Finished, planned),
                "
                smoke/uname: FAIL: kernel warning: WARNING: CPU: 0 PID: 9 at kernel/futex/core.c:1 a+0x1/0x2
                smoke/futex_basic: FAIL: expected 2 got 3; kernel lockdep: WARNING: possible circular locking dependency detected
                smoke/gone: FAIL: kernel warning: WARNING: CPU: 0 PID: 9 at kernel/futex/core.c:4 d+0x1/0x2 (the case gave no result)
                smoke/kernel-warning: FAIL: kernel warning: WARNING: CPU: 0 PID: 9 at kernel/futex/core.c:3 c+0x1/0x2
                topology/nodes: FAIL: kernel kasan: BUG: KASAN: slab-use-after-free in futex_wake+0x1/0x2
                ",
            ),
            (
                "not ok parent with passing children: the binary died after its last case",
                cell(
                    "KTAP version 1\n1..1\n  KTAP version 1\n  # Subtest: s\n  1..1\n  ok 1 a\n\
                     # s: killed by signal 11 (SIGSEGV)\nnot ok 1 s\n",
                    "",
                    VmEnd::Finished,
                    &["s"],
                ),
                "
                s/a: pass
                s/<exit>: FAIL: s: killed by signal 11 (SIGSEGV)
                ",
            ),
            (
                "directives: a guest's own XFAIL and TODO, TIMEOUT and ERROR fail, top-level leaf",
                cell(
                    "KTAP version 1\n1..5\nnot ok 1 a # XFAIL known\nnot ok 2 b # TODO\n\
                     # slow\nnot ok 3 c # TIMEOUT\nnot ok 4 d # ERROR exec failed\nnot ok 5 e\n",
                    "",
                    VmEnd::Finished,
                    &[],
                ),
                "
                a: FAIL: not ok # XFAIL known: a failure the guest marked expected (not ok); only the matrix's known_failures excuse one
                b: FAIL: not ok # TODO: a failure the guest marked expected (not ok); only the matrix's known_failures excuse one
                c: FAIL: TIMEOUT: slow
                d: FAIL: ERROR: exec failed
                e: FAIL: not ok
                ",
            ),
            (
                "panic inside a test: incomplete, the rest did not run",
                cell(
                    "KTAP version 1\n1..2\n  KTAP version 1\n  # Subtest: smoke\n  1..2\n  ok 1 uname\n",
                    PANIC_IN_SMOKE,
                    VmEnd::KernelPanic,
                    planned,
                ),
                "
                smoke/uname: pass
                smoke/<incomplete>: FAIL: did not finish: kernel panic; kernel bug: BUG: kernel NULL pointer dereference, address: 0000000000000008
                topology: FAIL: did not run: kernel panic
                ",
            ),
            (
                "a panic inside a case: that case fails by name beside <incomplete>",
                cell(
                    "KTAP version 1\n1..2\n  KTAP version 1\n  # Subtest: smoke\n  1..2\n  ok 1 uname\n",
                    &PANIC_IN_SMOKE.replace(
                        "[    1.0] harness: begin 1 smoke\n",
                        "[    1.0] harness: begin 1 smoke\n[    1.5] harness: case-begin futex_basic\n",
                    ),
                    VmEnd::KernelPanic,
                    planned,
                ),
                "
                smoke/uname: pass
                smoke/<incomplete>: FAIL: did not finish: kernel panic; kernel bug: BUG: kernel NULL pointer dereference, address: 0000000000000008
                smoke/futex_basic: FAIL: kernel bug: BUG: kernel NULL pointer dereference, address: 0000000000000008 (and 1 more) (the case gave no result)
                topology: FAIL: did not run: kernel panic
                ",
            ),
            (
                "a wedge decided at a timeout: the test begun after it is not run",
                cell(
                    "KTAP version 1\n1..3\nok 1 a\n  # Subtest: livelock\n  # spinning\n\
                     not ok 2 livelock # TIMEOUT 20000 ms\n  # Subtest: after\n",
                    "harness: begin 3 after\n",
                    VmEnd::Wedged(Wedge {
                        report: Some(ReportKind::SoftLockup),
                        by: Some("livelock".into()),
                        test: Some("livelock".into()),
                        why: WedgeWhy::CpuHeld,
                    }),
                    &["a", "livelock", "after"],
                ),
                "
                a: pass
                livelock: FAIL: TIMEOUT: 20000 ms
                after: FAIL: not run: the kernel was wedged by livelock (soft-lockup): a task of it spins on in the kernel after SIGKILL; ended at livelock
                ",
            ),
            (
                "a wedge found in a silent test: it did not finish, the rest is not run",
                cell(
                    "KTAP version 1\n1..3\nok 1 a\n  # Subtest: b\n",
                    "harness: begin 2 b\n",
                    VmEnd::Wedged(Wedge {
                        report: Some(ReportKind::HungTask),
                        by: Some("b".into()),
                        test: Some("b".into()),
                        why: WedgeWhy::Unanswered(Duration::from_secs(10)),
                    }),
                    &["a", "b", "c"],
                ),
                "
                a: pass
                b: FAIL: did not finish: the kernel was wedged by b (hung-task): b got no result 10 s past its timeout and guest-init's grace
                c: FAIL: not run: the kernel was wedged by b (hung-task): b got no result 10 s past its timeout and guest-init's grace
                ",
            ),
            (
                "host watchdog while a test wedged before printing KTAP",
                cell(
                    "KTAP version 1\n1..2\n",
                    "harness: begin 1 smoke\n",
                    watchdog.clone(),
                    planned,
                ),
                "
                smoke: FAIL: did not finish: killed by the host watchdog after 300 s
                topology: FAIL: did not run: killed by the host watchdog after 300 s
                ",
            ),
            (
                "reports outside tests and an unexplained VM end",
                cell(
                    "KTAP version 1\n1..1\nok 1 smoke\n",
                    "[ 0.1] WARNING: CPU: 0 PID: 1 at init/main.c:1 x\n[ 0.2] WARNING: CPU: 0 PID: 1 at init/main.c:2 y\n",
                    VmEnd::QemuExited {
                        status: 1,
                        stderr: "qemu: terminating on signal 15\n".into(),
                    },
                    &["smoke"],
                ),
                "
                smoke: pass
                boot/kernel-warning: FAIL: kernel warning: WARNING: CPU: 0 PID: 1 at init/main.c:1 x (and 1 more)
                vm: FAIL: QEMU exited with status 1: qemu: terminating on signal 15
                ",
            ),
            (
                "plan mismatch at top level after a normal end",
                cell(
                    "KTAP version 1\n1..3\nok 1 a\nok 2 b\n",
                    "",
                    VmEnd::Finished,
                    &[],
                ),
                "
                a: pass
                b: pass
                ktap: FAIL: plan 1..3 but 2 results
                ",
            ),
            (
                "nothing at all",
                cell("", "", VmEnd::InitError("no /harness/plan.json".into()), &[]),
                "
                vm: FAIL: guest-init failed: no /harness/plan.json
                ",
            ),
            (
                "a test missing after a normal end, duplicate names",
                cell(
                    "KTAP version 1\n1..2\nok 1 a\nok 2 a\n",
                    "",
                    VmEnd::Finished,
                    &["a", "b"],
                ),
                "
                a: pass
                a (2): pass
                b: FAIL: did not run: no result from guest-init
                ",
            ),
        ];
        for (what, cell, expected) in cases {
            eprintln!("case: {what}");
            check(cell, expected);
        }
    }

    #[test]
    fn kselftest_harness_result_lines_are_not_the_message() {
        let c = cell(
            "KTAP version 1\n1..1\n  KTAP version 1\n  1..3\n  # stderr: # t: Test terminated by timeout\n  #          FAIL  args.t_0.p\n  not ok 1 args.t_0.p\n  # stderr: # r.c:532:t:One or more children failed\n  # stderr: # t: Test failed\n  #          FAIL  global.t\n  not ok 2 global.t\n  # stderr: # r.c:263:u:Expected ret (-1) == 0 (0)\n  #          FAIL  global.u\n  # stderr: # u: Test terminated by assertion\n  not ok 3 global.u\nnot ok 1 p\n",
            "",
            VmEnd::Finished,
            &["p"],
        );
        check(
            &c,
            "p/args.t_0.p: FAIL: stderr: # t: Test terminated by timeout
             p/global.t: FAIL: stderr: # r.c:532:t:One or more children failed
             p/global.u: FAIL: stderr: # r.c:263:u:Expected ret (-1) == 0 (0)",
        );
    }

    #[test]
    fn a_kselftest_assertion_is_the_message_whatever_other_threads_print_after_it() {
        let c = cell(
            "KTAP version 1\n1..1\n  KTAP version 1\n  1..3\n  \
             # stderr: # q.c:205:q:Waker: Calling broadcast\n  \
             # stderr: # q.c:222:q:Expected 0 (0) != 0 (0)\n  \
             # stderr: # q.c:168:q:Calling futex_wait_requeue_pi\n  \
             # stderr: # q.c:223:q:max broadcast iterations (1000) reached with 8/10 tasks woken or requeued\n  \
             # stderr: # q.c:186:q:Waiter 4: exiting with 0\n  \
             #          FAIL  a.q\n  not ok 1 a.q\n  \
             # stderr: # r.c:263:u:Expected ret (-1) == 0 (0)\n  \
             # stderr: # r.c:300:u:child 2 done\n  \
             # stderr: # r.c:264:u:Expected ret (-1) == 0 (0)\n  \
             #          FAIL  b.u\n  not ok 2 b.u\n  \
             # stderr: # s.c:186:s:Waiter 9: exiting with 0\n  \
             #          FAIL  c.s\n  not ok 3 c.s\nnot ok 1 p\n",
            "",
            VmEnd::Finished,
            &["p"],
        );
        check(
            &c,
            "p/a.q: FAIL: stderr: # q.c:223:q:max broadcast iterations (1000) reached with 8/10 tasks woken or requeued
             p/b.u: FAIL: stderr: # r.c:263:u:Expected ret (-1) == 0 (0)
             p/c.s: FAIL: stderr: # s.c:186:s:Waiter 9: exiting with 0",
        );
    }

    #[test]
    fn failure_texts_carry_diagnostics_and_excerpts() {
        let c = cell(
            "KTAP version 1\n1..1\n  KTAP version 1\n  # Subtest: smoke\n  1..2\n  ok 1 uname\n  # waiting\n",
            PANIC_IN_SMOKE,
            VmEnd::KernelPanic,
            &["smoke"],
        );
        let cases = cases(&c);
        let CaseStatus::Fail { text, .. } = &cases[1].status else {
            panic!("{cases:?}");
        };
        assert!(text.starts_with("waiting\n\nkernel bug at console line 2:\n[    2.0] BUG:"));
        assert!(text.contains("kernel panic at console line 5:\n[    2.3] Kernel panic"));
        assert_eq!(
            counts(&cases),
            Counts {
                pass: 1,
                fail: 1,
                skip: 0,
                xfail: 0
            }
        );
    }

    #[test]
    fn describes_every_end() {
        assert_eq!(describe(&VmEnd::Finished), "guest-init finished the plan");
        assert_eq!(describe(&VmEnd::KernelPanic), "kernel panic");
        assert_eq!(
            describe(&VmEnd::Watchdog(Duration::from_secs(300))),
            "killed by the host watchdog after 300 s"
        );
        assert_eq!(
            describe(&VmEnd::Wedged(Wedge {
                report: Some(ReportKind::HungTask),
                by: Some("hung".into()),
                test: Some("smoke".into()),
                why: WedgeWhy::Unanswered(Duration::from_millis(10_900)),
            })),
            "the kernel was wedged by hung (hung-task): smoke got no result 10 s past its \
             timeout and guest-init's grace"
        );
        assert_eq!(
            describe(&VmEnd::Wedged(Wedge {
                report: Some(ReportKind::SoftLockup),
                by: Some("livelock".into()),
                test: Some("livelock".into()),
                why: WedgeWhy::CpuHeld,
            })),
            "the kernel was wedged by livelock (soft-lockup): a task of it spins on in the \
             kernel after SIGKILL; ended at livelock"
        );
        assert_eq!(
            describe(&VmEnd::Wedged(Wedge {
                report: Some(ReportKind::Oops),
                by: Some("a".into()),
                test: Some("b".into()),
                why: WedgeWhy::TimeoutsInARow,
            })),
            "the kernel was wedged by a (oops): a second test in a row timed out after the \
             report (b)"
        );
        assert_eq!(
            describe(&VmEnd::Wedged(Wedge {
                report: None,
                by: None,
                test: Some("a".into()),
                why: WedgeWhy::Unanswered(Duration::from_secs(25)),
            })),
            "the guest stopped answering without a kernel report: a got no result 25 s past \
             its timeout and guest-init's grace"
        );
        assert_eq!(
            describe(&VmEnd::QemuExited {
                status: -9,
                stderr: String::new()
            }),
            "QEMU was killed by signal 9 (SIGKILL)"
        );
        assert!(describe(&VmEnd::QemuExited {
            status: 0,
            stderr: String::new()
        })
        .contains("rebooted"));
        assert_eq!(
            describe(&VmEnd::Interrupted),
            "interrupted (SIGINT/SIGTERM)"
        );
    }
}

#[cfg(test)]
mod known_failure_tests {
    use super::*;
    use crate::result::KnownFailure;

    fn cell(ktap: &str, known: Vec<KnownFailure>) -> CellResult {
        CellResult {
            name: "c".into(),
            kernel: "k".into(),
            topology: "t".into(),
            suite: "s".into(),
            accel: "tcg".into(),
            qemu_version: "10".into(),
            planned: vec!["up".into()],
            end: VmEnd::Finished,
            ktap: crate::ktap::parse(ktap.as_bytes()),
            console: crate::console::scan(b""),
            console_log: None,
            duration: std::time::Duration::ZERO,
            qemu_cpu: None,
            started: std::time::SystemTime::UNIX_EPOCH,
            notes: vec![],
            known_failures: known,
            boot_retries: vec![],
            qemu_command: String::new(),
            profile: Default::default(),
        }
    }

    fn status(cell: &CellResult, case: &str) -> CaseStatus {
        cases(cell)
            .into_iter()
            .find(|c| c.name == case)
            .unwrap()
            .status
    }

    fn entry(case: &str, message: &str) -> KnownFailure {
        KnownFailure {
            case: case.into(),
            reason: "kernel race".into(),
            message: message.into(),
            kernels: vec!["k".into()],
            suite: "s".into(),
            at: "matrix.yaml:9:9".into(),
            accel: None,
            intermittent: None,
        }
    }

    #[test]
    fn a_known_failure_is_an_xfail_with_its_reason_entry_and_what_happened() {
        let ktap = "KTAP version 1\n1..1\n  KTAP version 1\n  1..2\n  # boom\n  not ok 1 slow\n  not ok 2 real\nnot ok 1 up\n";
        let mut c = cell(ktap, vec![entry("up/sl*", "boom")]);
        assert_eq!(
            status(&c, "up/slow"),
            CaseStatus::Xfail {
                message: "boom".into(),
                text: "boom".into(),
                reason: "kernel race".into(),
                entry: "matrix.yaml:9:9".into(),
            }
        );
        assert!(matches!(status(&c, "up/real"), CaseStatus::Fail { .. }));
        let n = counts(&cases(&c));
        assert_eq!((n.pass, n.fail, n.xfail, n.skip), (0, 1, 1, 0));
        c.known_failures.clear();
        assert!(matches!(status(&c, "up/slow"), CaseStatus::Fail { .. }));
    }

    #[test]
    fn an_entry_for_the_other_accelerator_excuses_nothing() {
        let ktap = "KTAP version 1\n1..1\n  KTAP version 1\n  1..1\n  # boom\n  not ok 1 slow\nnot ok 1 up\n";
        let mut k = entry("up/slow", "boom");
        k.accel = Some("kvm".into());
        assert!(matches!(
            status(&cell(ktap, vec![k]), "up/slow"),
            CaseStatus::Fail { .. }
        ));
    }

    #[test]
    fn a_guest_cannot_excuse_its_own_failure() {
        let ktap = "KTAP version 1\n1..1\n  KTAP version 1\n  1..3\n  not ok 1 a # TODO later\n  not ok 2 b # XFAIL known\n  ok 3 c # TODO fixed already\nnot ok 1 up\n";
        let c = cell(ktap, vec![]);
        match status(&c, "up/a") {
            CaseStatus::Fail { message, .. } => {
                assert!(message.starts_with("not ok # TODO later:"), "{message}")
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(status(&c, "up/b"), CaseStatus::Fail { .. }));
        assert_eq!(status(&c, "up/c"), CaseStatus::Pass);
    }

    #[test]
    fn a_binary_short_of_its_plan_fails() {
        let ktap = "KTAP version 1\n1..1\n  KTAP version 1\n  1..3\n  ok 1 a\n  ok 2 b\nok 1 up\n";
        let c = cell(ktap, vec![]);
        assert_eq!(
            status(&c, "up/<plan>"),
            CaseStatus::Fail {
                message: "plan 1..3 but 2 results".into(),
                text: String::new()
            }
        );
        assert_eq!(status(&c, "up/a"), CaseStatus::Pass);
        // As many results as planned: no such case.
        let full = "KTAP version 1\n1..1\n  KTAP version 1\n  1..1\n  ok 1 a\nok 1 up\n";
        assert!(cases(&cell(full, vec![]))
            .iter()
            .all(|c| c.status == CaseStatus::Pass));
    }

    #[test]
    fn an_entry_for_a_case_s_own_failure_does_not_excuse_a_kernel_report_in_it() {
        let ktap = "KTAP version 1\n1..1\n  KTAP version 1\n  1..2\n  # boom\n  not ok 1 racy\n  ok 2 calm\nok 1 up\n";
        let console = "harness: begin 1 up\nharness: case-begin racy\n\
            WARNING: CPU: 0 PID: 9 at kernel/futex/core.c:1 a+0x1/0x2\n\
            harness: case-end racy\nharness: case-begin calm\n\
            WARNING: CPU: 1 PID: 7 at kernel/futex/core.c:2 b+0x1/0x2\n\
            harness: case-end calm\nharness: end 1 up\n";
        let mut c = cell(ktap, vec![entry("up/racy", "boom")]);
        assert!(matches!(status(&c, "up/racy"), CaseStatus::Xfail { .. }));
        c.console = crate::console::scan(console.as_bytes());
        let racy =
            "boom; kernel warning: WARNING: CPU: 0 PID: 9 at kernel/futex/core.c:1 a+0x1/0x2";
        assert!(
            matches!(status(&c, "up/racy"), CaseStatus::Fail { message, .. } if message == racy)
        );
        // The allow list: an entry naming the report excuses it, as xfail.
        let calm = "kernel warning: WARNING: CPU: * PID: * at kernel/futex/core.c:2 b+0x1/0x2";
        c.known_failures.push(entry("up/calm", calm));
        assert!(matches!(
            status(&c, "up/calm"),
            CaseStatus::Xfail { message, .. }
                if message == "kernel warning: WARNING: CPU: 1 PID: 7 at kernel/futex/core.c:2 b+0x1/0x2"
        ));
    }

    #[test]
    fn a_message_glob_excuses_only_the_documented_failure() {
        let known = entry(
            "up/set0-vs-thread-create",
            "round *: racing SET 0: thread * failed to spawn: Device or resource busy (os error 16)",
        );
        let failing = |message: &str, known: &KnownFailure| {
            let ktap = format!(
                "KTAP version 1\n1..1\n  KTAP version 1\n  1..1\n  # rounds: 8, overlapped: 8\n  # {message}\n  not ok 1 set0-vs-thread-create\nnot ok 1 up\n"
            );
            status(
                &cell(&ktap, vec![known.clone()]),
                "up/set0-vs-thread-create",
            )
        };
        let documented =
            "round 7: racing SET 0: thread 32 failed to spawn: Device or resource busy (os error 16)";
        assert!(matches!(
            failing(documented, &known),
            CaseStatus::Xfail { message, .. } if message == documented
        ));
        // Another failure of the same case is a new finding, and so is a
        // round that failed in two ways.
        for other in [
            "round 3: GET after SET 0 raced thread creation (else the global hash was lost): expected Ok(0), got Ok(16)",
            "round 2: racing SET 0: thread 1 failed to spawn: Resource temporarily unavailable (os error 11)",
            "several failures: round 2: GET after SET 0 ...; round 7: racing SET 0: thread 32 failed to spawn: Device or resource busy (os error 16)",
        ] {
            let got = failing(other, &known);
            assert!(matches!(&got, CaseStatus::Fail { message, .. } if message == other), "{got:?}");
        }
    }
}

//! Repeated runs (`harness run --repeat N`, `--until-fail [--max N]`,
//! `--fresh-boot`): the same tests again and again, in one booted guest
//! (guest-init loops over the plan, see [`guest_tests::plan::PlannedRepeat`])
//! or in a new VM each time; then one verdict per case with its counts.
//!
//! A race that bites once in twenty runs is found by running it until it
//! bites, and the iteration that failed is what the developer reads: its
//! console and KTAP are kept in `<out>/iteration-K/`.

use crate::result::{CellResult, VmEnd};
use crate::verdict::{Case, CaseStatus};
use guest_tests::plan::{PlannedRepeat, ITERATION_MARK, KMSG_MARKER};
use std::path::{Path, PathBuf};

/// `--until-fail` without `--max`: enough for a once-in-fifty race to show
/// with near certainty (1 - (49/50)^200 > 98%), few enough to end.
pub const DEFAULT_MAX: u32 = 200;

/// How a cell repeats its tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Repeat {
    /// Iterations (`--repeat N`), or at most (`--until-fail --max N`).
    pub times: u32,
    /// Stop after the first iteration with a failed case.
    pub until_fail: bool,
    /// A new VM for each iteration instead of one guest looping.
    pub fresh_boot: bool,
}

impl Repeat {
    /// The plan's repeat for guest-init (`None` with a fresh boot each
    /// time: then every boot runs the plan once). `first` tests (the
    /// topology check) run once.
    pub fn planned(&self, first: usize) -> Option<PlannedRepeat> {
        (!self.fresh_boot).then_some(PlannedRepeat {
            iterations: self.times.max(1),
            until_fail: self.until_fail,
            first,
        })
    }

    /// How many times one boot runs the tests (for the watchdog).
    pub fn in_guest(&self) -> u32 {
        if self.fresh_boot {
            1
        } else {
            self.times.max(1)
        }
    }
}

/// How many leading tests of a plan are not repeated: the topology check,
/// when it is there (it checks the VM, not the kernel's futex code).
pub fn once(test_names: &[String]) -> usize {
    usize::from(test_names.first().is_some_and(|t| t == "topology"))
}

/// One case over the iterations.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RepeatedCase {
    /// `binary/case`.
    pub name: String,
    /// Iterations that reported it.
    pub runs: u32,
    /// Of those, how many failed.
    pub failures: u32,
    /// The first iteration it failed in (1-based).
    pub first_failure: Option<u32>,
}

impl RepeatedCase {
    /// Failures per run, 0.0 to 1.0.
    pub fn flake_rate(&self) -> f64 {
        if self.runs == 0 {
            0.0
        } else {
            f64::from(self.failures) / f64::from(self.runs)
        }
    }
}

/// What a repeated cell did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RepeatSummary {
    /// How it was asked to repeat.
    pub repeat: Repeat,
    /// Iterations that ran (an until-fail run that stopped: fewer).
    pub iterations: u32,
    /// The first iteration with a failed case.
    pub first_failure: Option<u32>,
    /// Per case, in report order.
    pub cases: Vec<RepeatedCase>,
    /// Where the first failing iteration's console and KTAP were kept.
    pub kept: Option<PathBuf>,
}

impl RepeatSummary {
    /// The counts of case `name`.
    pub fn case(&self, name: &str) -> Option<&RepeatedCase> {
        self.cases.iter().find(|c| c.name == name)
    }

    /// One line for the terminal: iterations, failures, the flake rate of
    /// the cases that failed.
    pub fn line(&self) -> String {
        let mode = if self.repeat.until_fail {
            format!("until-fail (max {})", self.repeat.times)
        } else {
            format!("repeat {}", self.repeat.times)
        };
        let boots = if self.repeat.fresh_boot {
            ", a fresh boot each"
        } else {
            ", one boot"
        };
        let flaky: Vec<String> = self
            .cases
            .iter()
            .filter(|c| c.failures > 0)
            .map(|c| {
                format!(
                    "{} failed {}/{} runs ({:.1}%), first in iteration {}",
                    c.name,
                    c.failures,
                    c.runs,
                    100.0 * c.flake_rate(),
                    c.first_failure.unwrap_or(0)
                )
            })
            .collect();
        let what = if flaky.is_empty() {
            format!("every case passed in all {} iterations", self.iterations)
        } else {
            flaky.join("; ")
        };
        let kept = self
            .kept
            .as_ref()
            .map(|p| format!("; logs of the failing iteration in {}", p.display()))
            .unwrap_or_default();
        format!(
            "{mode}{boots}: {} iteration(s) ran; {what}{kept}",
            self.iterations
        )
    }
}

/// The result of a cell whose guest looped over the plan, cut into one
/// result per iteration: iteration 1 carries the tests that run once; a
/// kernel report belongs to the iteration of the test it was printed in
/// (reports outside any test to the first). Only the last iteration
/// carries how the VM ended.
pub fn split(result: &CellResult, first: usize) -> Vec<CellResult> {
    let first = first.min(result.planned.len());
    let per = result.planned.len() - first;
    let tops = &result.ktap.tests;
    let (once, rest) = tops.split_at(first.min(tops.len()));
    if per == 0 {
        return vec![result.clone()];
    }
    // Iterations the guest began (its marks), or at least those with results.
    let marked = result
        .ktap
        .diagnostics
        .iter()
        .filter_map(|d| iteration_of(d))
        .max()
        .unwrap_or(0) as usize;
    let n = marked.max(rest.len().div_ceil(per)).max(1);
    (1..=n)
        .map(|k| {
            let mut sub = result.clone();
            let lo = (k - 1) * per;
            let chunk = &rest[lo.min(rest.len())..(k * per).min(rest.len())];
            let head = if k == 1 { once } else { &[] };
            sub.ktap.tests = head.iter().chain(chunk).cloned().collect();
            sub.ktap.plan = Some((head.len() + per) as u64);
            sub.planned = result.planned[..if k == 1 { first } else { 0 }]
                .iter()
                .chain(&result.planned[first..])
                .cloned()
                .collect();
            let numbers = (first + lo + 1)..=(first + k * per);
            sub.console.reports.retain(|r| match r.test_number {
                Some(t) if t <= first => k == 1,
                Some(t) => numbers.contains(&t),
                None => k == 1,
            });
            if k < n {
                sub.end = VmEnd::Finished;
                sub.console.running_at_end = None;
                sub.console.tail.clear();
            }
            sub
        })
        .collect()
}

/// `harness iteration K` (a top-level diagnostic) -> K.
fn iteration_of(diagnostic: &str) -> Option<u32> {
    diagnostic
        .trim()
        .trim_start_matches('#')
        .trim()
        .strip_prefix("harness ")?
        .strip_prefix(ITERATION_MARK)?
        .trim()
        .parse()
        .ok()
}

/// One verdict per case over the iterations' cases: failed when it failed
/// once (the message says how often and first where), skipped when it was
/// skipped every time, else passed. Cases in order of first appearance.
pub fn aggregate(repeat: Repeat, iterations: &[Vec<Case>]) -> (Vec<Case>, RepeatSummary) {
    let mut order: Vec<&str> = Vec::new();
    for cases in iterations {
        for c in cases {
            if !order.contains(&c.name.as_str()) {
                order.push(&c.name);
            }
        }
    }
    let mut cases = Vec::new();
    let mut counts = Vec::new();
    for name in order {
        let seen: Vec<(u32, &Case)> = iterations
            .iter()
            .enumerate()
            .filter_map(|(k, cs)| {
                cs.iter()
                    .find(|c| c.name == name)
                    .map(|c| (k as u32 + 1, c))
            })
            .collect();
        let failed: Vec<&(u32, &Case)> = seen
            .iter()
            .filter(|(_, c)| matches!(c.status, CaseStatus::Fail { .. }))
            .collect();
        let runs = seen.len() as u32;
        let status = match (failed.first(), seen.first()) {
            (Some((k, c)), _) => {
                let CaseStatus::Fail { message, text } = &c.status else {
                    unreachable!("filtered on Fail")
                };
                CaseStatus::Fail {
                    message: format!(
                        "failed in {} of {runs} runs, first in iteration {k}: {message}",
                        failed.len()
                    ),
                    text: text.clone(),
                }
            }
            _ if seen
                .iter()
                .all(|(_, c)| matches!(c.status, CaseStatus::Skip(_))) =>
            {
                seen.first()
                    .map(|(_, c)| c.status.clone())
                    .unwrap_or(CaseStatus::Pass)
            }
            _ => CaseStatus::Pass,
        };
        counts.push(RepeatedCase {
            name: name.to_string(),
            runs,
            failures: failed.len() as u32,
            first_failure: failed.first().map(|(k, _)| *k),
        });
        cases.push(Case {
            name: name.to_string(),
            status,
        });
    }
    let first_failure = counts.iter().filter_map(|c| c.first_failure).min();
    let summary = RepeatSummary {
        repeat,
        iterations: iterations.len() as u32,
        first_failure,
        cases: counts,
        kept: None,
    };
    (cases, summary)
}

/// Keeps iteration `k` of an in-guest repeated cell: its part of the
/// console log (from the `harness: iteration K` kmsg mark to the next) and
/// of the raw KTAP (from `# harness iteration K`) in `<out>/iteration-K/`.
/// Returns that directory.
pub fn keep_iteration(out_dir: &Path, k: u32) -> std::io::Result<PathBuf> {
    let dir = out_dir.join(format!("iteration-{k}"));
    std::fs::create_dir_all(&dir)?;
    let console = std::fs::read(out_dir.join("console.log")).unwrap_or_default();
    let mark = format!("{KMSG_MARKER} {ITERATION_MARK}");
    std::fs::write(dir.join("console.log"), slice(&console, &mark, k))?;
    let ktap = std::fs::read(out_dir.join("results.ktap")).unwrap_or_default();
    let mark = format!("# harness {ITERATION_MARK}");
    std::fs::write(dir.join("results.ktap"), slice(&ktap, &mark, k))?;
    Ok(dir)
}

/// The lines of `text` from the one holding `<mark>K` up to (not
/// including) the one holding `<mark>K+1`.
fn slice(text: &[u8], mark: &str, k: u32) -> Vec<u8> {
    let (this, next) = (format!("{mark}{k}"), format!("{mark}{}", k + 1));
    let mut out = Vec::new();
    let mut inside = false;
    for line in text.split_inclusive(|b| *b == b'\n') {
        let l = String::from_utf8_lossy(line);
        let l = l.trim_end();
        if l.ends_with(&this) {
            inside = true;
        } else if l.ends_with(&next) {
            break;
        }
        if inside {
            out.extend_from_slice(line);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ktap;

    fn case(name: &str, status: CaseStatus) -> Case {
        Case {
            name: name.into(),
            status,
        }
    }
    fn fail(m: &str) -> CaseStatus {
        CaseStatus::Fail {
            message: m.into(),
            text: String::new(),
        }
    }
    const REPEAT: Repeat = Repeat {
        times: 3,
        until_fail: false,
        fresh_boot: false,
    };

    #[test]
    fn aggregate_counts_runs_failures_and_the_first_failing_iteration() {
        let its = vec![
            vec![
                case("topology/nodes", CaseStatus::Pass),
                case("a/x", CaseStatus::Pass),
                case("a/y", CaseStatus::Skip("no".into())),
            ],
            vec![
                case("a/x", fail("EBUSY")),
                case("a/y", CaseStatus::Skip("no".into())),
            ],
            vec![
                case("a/x", CaseStatus::Pass),
                case("a/y", CaseStatus::Skip("no".into())),
            ],
        ];
        let (cases, s) = aggregate(REPEAT, &its);
        assert_eq!(cases.len(), 3);
        assert_eq!(cases[0].status, CaseStatus::Pass);
        let CaseStatus::Fail { message, .. } = &cases[1].status else {
            panic!("{:?}", cases[1])
        };
        assert_eq!(
            message,
            "failed in 1 of 3 runs, first in iteration 2: EBUSY"
        );
        assert_eq!(cases[2].status, CaseStatus::Skip("no".into()));
        assert_eq!(
            s.case("a/x"),
            Some(&RepeatedCase {
                name: "a/x".into(),
                runs: 3,
                failures: 1,
                first_failure: Some(2)
            })
        );
        assert_eq!(s.case("topology/nodes").map(|c| c.runs), Some(1));
        assert_eq!((s.iterations, s.first_failure), (3, Some(2)));
        assert!(s
            .line()
            .contains("a/x failed 1/3 runs (33.3%), first in iteration 2"));
    }

    #[test]
    fn a_passing_repeat_says_so() {
        let its = vec![vec![case("a/x", CaseStatus::Pass)]; 20];
        let (cases, s) = aggregate(
            Repeat {
                times: 20,
                ..REPEAT
            },
            &its,
        );
        assert_eq!(cases[0].status, CaseStatus::Pass);
        assert_eq!(s.case("a/x").map(|c| (c.runs, c.failures)), Some((20, 0)));
        assert!(
            s.line().contains("every case passed in all 20 iterations"),
            "{}",
            s.line()
        );
    }

    fn result(stream: &str, planned: &[&str]) -> CellResult {
        CellResult {
            name: "c".into(),
            kernel: "k".into(),
            topology: "t".into(),
            suite: "s".into(),
            accel: "tcg".into(),
            qemu_version: String::new(),
            planned: planned.iter().map(|s| s.to_string()).collect(),
            end: VmEnd::Finished,
            ktap: ktap::parse(stream.as_bytes()),
            console: crate::console::scan(
                b"harness: begin 1 topology\nharness: end 1 topology\nharness: iteration 1\n\
                  harness: begin 2 a\nharness: end 2 a\nharness: iteration 2\nharness: begin 3 a\n\
                  WARNING: CPU: 0 PID: 1 at kernel/futex/core.c:1 f\nharness: end 3 a\n",
            ),
            console_log: None,
            duration: std::time::Duration::ZERO,
            qemu_cpu: None,
            started: std::time::SystemTime::UNIX_EPOCH,
            known_failures: vec![],
            boot_retries: Vec::new(),
            qemu_command: String::new(),
            profile: Default::default(),
            notes: vec![],
        }
    }

    #[test]
    fn split_cuts_the_stream_into_iterations_and_their_reports() {
        let stream = "KTAP version 1\n1..4\n  # Subtest: topology\nok 1 topology\n\
                      # harness iteration 1\n  # Subtest: a\n  KTAP version 1\n  1..1\n  ok 1 x\nok 2 a\n\
                      # harness iteration 2\n  # Subtest: a\n  KTAP version 1\n  1..1\n  not ok 1 x\nnot ok 3 a\n\
                      # harness until-fail: stopped after iteration 2\n";
        let r = result(stream, &["topology", "a"]);
        let its = split(&r, 1);
        assert_eq!(its.len(), 2);
        assert_eq!(its[0].ktap.tests.len(), 2);
        assert_eq!(its[1].ktap.tests.len(), 1);
        assert_eq!(its[1].planned, vec!["a".to_string()]);
        assert!(its[0].console.reports.is_empty());
        assert_eq!(its[1].console.reports.len(), 1);
        let per: Vec<Vec<Case>> = its.iter().map(crate::verdict::cases).collect();
        let (cases, s) = aggregate(
            Repeat {
                until_fail: true,
                ..REPEAT
            },
            &per,
        );
        assert_eq!(s.first_failure, Some(2));
        assert_eq!(s.case("a/x").map(|c| (c.runs, c.failures)), Some((2, 1)));
        // Nothing says the plan 1..4 was broken: iteration 3 never began.
        assert!(!cases.iter().any(|c| c.name == "ktap"), "{cases:?}");
        assert!(
            cases.iter().any(|c| c.name == "a/kernel-warning"),
            "{cases:?}"
        );
    }

    #[test]
    fn a_vm_that_died_inside_an_iteration_fails_the_test_it_ran() {
        let stream = "KTAP version 1\n1..4\n  # Subtest: topology\nok 1 topology\n\
                      # harness iteration 1\n  # Subtest: a\n  KTAP version 1\n  1..1\n  ok 1 x\nok 2 a\n\
                      # harness iteration 2\n  # Subtest: a\n  KTAP version 1\n  1..1\n";
        let mut r = result(stream, &["topology", "a"]);
        r.end = VmEnd::KernelPanic;
        let its = split(&r, 1);
        assert_eq!(its.len(), 2);
        assert_eq!(its[0].end, VmEnd::Finished);
        let per: Vec<Vec<Case>> = its.iter().map(crate::verdict::cases).collect();
        let (cases, _) = aggregate(REPEAT, &per);
        assert!(
            cases
                .iter()
                .any(|c| matches!(c.status, CaseStatus::Fail { .. })),
            "{cases:?}"
        );
    }

    #[test]
    fn keep_iteration_slices_console_and_ktap() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(
            d.path().join("console.log"),
            "boot\n[ 1.0] harness: iteration 1\none\n[ 2.0] harness: iteration 2\ntwo\n",
        )
        .unwrap();
        std::fs::write(
            d.path().join("results.ktap"),
            "KTAP version 1\n# harness iteration 1\nok 1 a\n# harness iteration 2\nnot ok 2 a\n",
        )
        .unwrap();
        let kept = keep_iteration(d.path(), 2).unwrap();
        assert_eq!(
            std::fs::read_to_string(kept.join("console.log")).unwrap(),
            "[ 2.0] harness: iteration 2\ntwo\n"
        );
        assert_eq!(
            std::fs::read_to_string(kept.join("results.ktap")).unwrap(),
            "# harness iteration 2\nnot ok 2 a\n"
        );
        let one = keep_iteration(d.path(), 1).unwrap();
        assert_eq!(
            std::fs::read_to_string(one.join("console.log")).unwrap(),
            "[ 1.0] harness: iteration 1\none\n"
        );
    }
}

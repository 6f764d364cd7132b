//! Ending a wedged guest early ([`WedgeWatch`]): the console shows a
//! stall report (hung task, soft lockup, RCU stall) and the results stream
//! has said nothing for longer than the running test may take: its
//! timeout, the guest's grace for a killed binary
//! ([`guest_tests::init::runner::KILL_GRACE`]) and [`WEDGE_MARGIN`].
//! guest-init kills every test at its deadline and leaves a stuck one
//! behind, so a healthy guest always says something by then; a report
//! alone ends nothing. Pure: the clock is passed in.
//!
//! The running test is found by number: guest-init writes the top-level
//! lines (plan, results) at column 0 and indents everything a test prints,
//! so a test cannot fake them.

use crate::console::{report_start, ReportKind};
use guest_tests::init::lines::{sanitize_line, LineSplitter, MAX_LINE_BYTES};
use guest_tests::init::runner::KILL_GRACE;
use guest_tests::ktap::sanitize_name;
use guest_tests::plan::RunPlan;
use std::time::{Duration, Instant};

/// Added to a test's timeout and [`KILL_GRACE`] before a silent guest with
/// a stall report counts as wedged: the guest's own slack (draining a
/// killed test's pipes, writing its result line) and a loaded host's TCG.
pub const WEDGE_MARGIN: Duration = Duration::from_secs(10);

/// The plan's tests in the order guest-init runs them, with their
/// timeouts: what a VM's wedge watch needs to know.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WedgeWatch {
    /// Name (as guest-init writes it) and timeout of each planned test.
    tests: Vec<(String, Duration)>,
    /// Tests run once before the repeated ones.
    first: usize,
    /// How often the rest runs.
    iterations: usize,
}

impl WedgeWatch {
    /// The watch for `plan` (its timeouts already scaled).
    pub fn for_plan(plan: &RunPlan) -> WedgeWatch {
        let tests = plan
            .tests
            .iter()
            .map(|t| (sanitize_name(&t.name), Duration::from_millis(t.timeout_ms)))
            .collect::<Vec<_>>();
        let (first, iterations) = match plan.repeat {
            Some(r) => (r.first.min(tests.len()), r.iterations.max(1) as usize),
            None => (0, 1),
        };
        WedgeWatch {
            tests,
            first,
            iterations,
        }
    }

    /// Test number `n` (1-based, as in the results stream), if planned.
    fn test(&self, n: usize) -> Option<&(String, Duration)> {
        let i = n.checked_sub(1)?;
        if i < self.first {
            return self.tests.get(i);
        }
        let repeated = &self.tests[self.first..];
        let k = i - self.first;
        if repeated.is_empty() || k / repeated.len() >= self.iterations {
            return None;
        }
        repeated.get(k % repeated.len())
    }
}

/// A guest found wedged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Wedged {
    /// The last stall report on the console.
    pub report: ReportKind,
    /// The test running, if the plan names it.
    pub test: Option<String>,
    /// How long the results stream had been silent.
    pub quiet: Duration,
}

/// What the two serial readers have seen so far.
pub(super) struct Watch {
    plan: WedgeWatch,
    results: LineSplitter,
    console: LineSplitter,
    /// The top-level plan line was seen: tests are running.
    started: bool,
    /// The number of the last top-level result line.
    done: usize,
    last_progress: Instant,
    stall: Option<ReportKind>,
}

impl Watch {
    pub(super) fn new(plan: WedgeWatch, now: Instant) -> Watch {
        Watch {
            plan,
            results: LineSplitter::new(MAX_LINE_BYTES),
            console: LineSplitter::new(MAX_LINE_BYTES),
            started: false,
            done: 0,
            last_progress: now,
            stall: None,
        }
    }

    /// Bytes of the results stream: progress, and maybe a top-level line.
    pub(super) fn results(&mut self, now: Instant, chunk: &[u8]) {
        if chunk.is_empty() {
            return;
        }
        self.last_progress = now;
        for l in self.results.push(chunk) {
            let line = sanitize_line(&l.bytes);
            if line.starts_with("1..") {
                self.started = true;
            } else if let Some(n) = result_number(&line) {
                self.done = n;
            }
        }
    }

    /// Bytes of the console: maybe a stall report.
    pub(super) fn console(&mut self, chunk: &[u8]) {
        for l in self.console.push(chunk) {
            match report_start(&sanitize_line(&l.bytes)) {
                Some(k) if k.is_stall() => self.stall = Some(k),
                _ => {}
            }
        }
    }

    /// Whether the guest is wedged at `now`.
    pub(super) fn check(&self, now: Instant) -> Option<Wedged> {
        let report = self.stall?;
        if !self.started {
            return None;
        }
        let (name, timeout) = self.plan.test(self.done + 1)?;
        let quiet = now.saturating_duration_since(self.last_progress);
        (quiet >= *timeout + KILL_GRACE + WEDGE_MARGIN).then(|| Wedged {
            report,
            test: Some(name.clone()),
            quiet,
        })
    }
}

/// `N` of a top-level `ok N ...` / `not ok N ...` line.
fn result_number(line: &str) -> Option<usize> {
    let rest = line
        .strip_prefix("ok ")
        .or_else(|| line.strip_prefix("not ok "))?;
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    rest[..digits].parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use guest_tests::plan::{PlannedRepeat, PlannedTest};

    fn plan(tests: &[(&str, u64)]) -> RunPlan {
        RunPlan {
            tests: tests
                .iter()
                .map(|(name, secs)| PlannedTest {
                    name: name.to_string(),
                    path: "/harness/bin/fault".into(),
                    args: vec![],
                    env: vec![],
                    timeout_ms: secs * 1000,
                    max_output_bytes: 1 << 20,
                })
                .collect(),
            ..RunPlan::default()
        }
    }

    const HUNG: &[u8] = b"[   9.1] INFO: task fault:93 blocked for more than 1 seconds.\n";
    /// Timeout 20 s + grace + margin.
    const LIMIT: Duration = Duration::from_secs(35);

    #[test]
    fn a_stall_report_and_silence_past_the_tests_limit_is_a_wedge() {
        let t0 = Instant::now();
        let at = |s: u64| t0 + Duration::from_secs(s);
        let mut w = Watch::new(
            WedgeWatch::for_plan(&plan(&[("hung", 20), ("smoke", 60)])),
            t0,
        );
        w.results(
            at(1),
            b"KTAP version 1\n1..2\n  # Subtest: hung\n  # trigger",
        );
        assert_eq!(w.check(at(100)), None, "no report: the watchdog's business");
        w.console(b"[   9.0] harness: begin 1 hung\n");
        w.console(&HUNG[..20]);
        assert_eq!(w.check(at(100)), None, "half a line");
        w.console(&HUNG[20..]);
        assert_eq!(w.check(at(1) + LIMIT - Duration::from_millis(1)), None);
        assert_eq!(
            w.check(at(1) + LIMIT),
            Some(Wedged {
                report: ReportKind::HungTask,
                test: Some("hung".into()),
                quiet: LIMIT
            })
        );
    }

    #[test]
    fn a_guest_that_reaps_the_stuck_test_and_goes_on_is_not_wedged() {
        let t0 = Instant::now();
        let at = |s: u64| t0 + Duration::from_secs(s);
        let mut w = Watch::new(
            WedgeWatch::for_plan(&plan(&[("hung", 20), ("smoke", 60)])),
            t0,
        );
        w.results(at(1), b"KTAP version 1\n1..2\n  # Subtest: hung\n");
        w.console(HUNG);
        // guest-init's grace ran out: the result line, then the next test.
        w.results(at(26), b"  # stuck in D state after SIGKILL: pid 93\n");
        w.results(
            at(26),
            b"not ok 1 hung # TIMEOUT 20000 ms\n  # Subtest: smoke\n",
        );
        assert_eq!(w.check(at(26) + LIMIT), None, "smoke may take 60 s + 15 s");
        let smoke_limit = Duration::from_secs(75);
        assert_eq!(
            w.check(at(26) + smoke_limit).map(|x| x.test),
            Some(Some("smoke".into()))
        );
        // Its output is progress; after the last result nothing runs.
        w.results(
            at(30),
            b"  # fake\nok 2 smoke\n# Totals: pass:1 fail:1 skip:0\n",
        );
        assert_eq!(w.check(at(10_000)), None);
    }

    #[test]
    fn tests_cannot_fake_the_top_level_lines_and_warnings_are_no_stall() {
        let t0 = Instant::now();
        let mut w = Watch::new(WedgeWatch::for_plan(&plan(&[("a", 1), ("b", 1)])), t0);
        w.results(
            t0,
            b"KTAP version 1\n1..2\n  # Subtest: a\n  ok 1 x\n  # not ok 7 b\n",
        );
        w.console(b"WARNING: CPU: 0 PID: 1 at kernel/x.c:1\n");
        let late = t0 + Duration::from_secs(1000);
        assert_eq!(w.check(late), None);
        w.console(b"rcu: INFO: rcu_preempt self-detected stall on CPU\n");
        assert_eq!(w.check(late).map(|x| x.test), Some(Some("a".into())));
        // No plan line yet: boot, the watchdog's business.
        let mut w = Watch::new(WedgeWatch::for_plan(&plan(&[("a", 1)])), t0);
        w.console(HUNG);
        assert_eq!(w.check(late), None);
        // An empty watch (interactive sessions) never fires.
        let mut w = Watch::new(WedgeWatch::default(), t0);
        w.results(t0, b"1..1\n");
        w.console(HUNG);
        assert_eq!(w.check(late), None);
    }

    #[test]
    fn repeated_plans_are_numbered_like_guest_init_runs_them() {
        let mut p = plan(&[("topology", 5), ("flaky", 7)]);
        p.repeat = Some(PlannedRepeat {
            iterations: 3,
            until_fail: false,
            first: 1,
        });
        let w = WedgeWatch::for_plan(&p);
        let names: Vec<_> = (0..6).map(|n| w.test(n).map(|t| t.0.as_str())).collect();
        assert_eq!(
            names,
            [
                None,
                Some("topology"),
                Some("flaky"),
                Some("flaky"),
                Some("flaky"),
                None
            ]
        );
        assert_eq!(
            WedgeWatch::for_plan(&plan(&[("a#b", 1)])).test(1),
            Some(&("a_b".to_string(), Duration::from_secs(1)))
        );
        assert_eq!(result_number("not ok 12 x # TIMEOUT"), Some(12));
        assert_eq!(result_number("  ok 1 x"), None);
    }
}

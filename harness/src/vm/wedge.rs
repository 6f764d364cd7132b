//! Ending a wedged guest early ([`WedgeWatch`]). Wedged is a state of
//! the guest, not of the byte stream: guest-init's timeout dumps and the
//! next binaries' own timeouts keep bytes coming from a kernel that
//! livelocks, so silence alone is no test. The guest is wedged when
//! ([`crate::result::WedgeWhy`]):
//! - the running test is past its timeout, guest-init's grace for a
//!   killed binary ([`KILL_GRACE`]) and [`WEDGE_MARGIN`] without its result
//!   line, and the results stream is quiet: guest-init itself no longer
//!   runs. After a kernel report that may wedge (lockup, RCU stall, hung
//!   task, Oops, BUG: [`ReportKind::may_wedge`]); without one only
//!   [`UNANSWERED_EXTRA`] later (a guest frozen without a word);
//! - a test timed out leaving a task alive after SIGKILL and the kernel
//!   reports a CPU spinning in it (soft or hard lockup, RCU stall): that
//!   CPU is gone for good;
//! - a second test in a row times out after a report: the kernel no longer
//!   lets tests finish;
//! - guest-init wrote its totals and the guest has not powered off
//!   [`POWEROFF_GRACE`] later (plus [`UNANSWERED_EXTRA`] without a report).
//!
//! A task stuck in D state alone is none of these: guest-init leaves it
//! behind and the next binary runs. While a report stands and the running
//! test makes no progress the guest is only a suspect
//! ([`Watch::suspect`]): the runner lets it run at `SCHED_IDLE` so that it
//! costs the other cells nothing. Pure: the clock is passed in.
//!
//! The running test is found by number: guest-init writes the top-level
//! lines (plan, results) at column 0 and indents everything a test prints,
//! so a test cannot fake them.

use crate::console::{report_start, ReportKind};
use crate::result::{Wedge as Wedged, WedgeWhy as Why};
use guest_tests::init::lines::{sanitize_line, LineSplitter, MAX_LINE_BYTES};
use guest_tests::init::runner::KILL_GRACE;
use guest_tests::ktap::sanitize_name;
use guest_tests::plan::RunPlan;
use std::time::{Duration, Instant};

/// Added to a test's timeout and [`KILL_GRACE`] before a running test
/// without its result counts as wedged: the guest's own slack (draining a
/// killed test's pipes, writing its result line) and a loaded host's TCG.
pub const WEDGE_MARGIN: Duration = Duration::from_secs(10);

/// Added again when the kernel said nothing: a guest that stops without a
/// report is more likely a starved one than a wedged one.
pub const UNANSWERED_EXTRA: Duration = Duration::from_secs(15);

/// How long the results stream must be quiet before a test past its
/// limit counts as unanswered (bytes still coming: guest-init is alive
/// and writing its result).
pub const QUIET: Duration = Duration::from_secs(5);

/// How long a guest may take to power off after guest-init's totals
/// (measured: 1-2 s under TCG, syncing the artifacts share included).
pub const POWEROFF_GRACE: Duration = Duration::from_secs(15);

/// How long after a report with no result line the guest is a suspect.
pub const SUSPECT_AFTER: Duration = Duration::from_secs(5);

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

/// A report and where it came.
#[derive(Debug, Clone)]
struct Sign {
    kind: ReportKind,
    /// The test running then.
    test: Option<String>,
    at: Instant,
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
    /// When the running test began (the last top-level line).
    test_began: Instant,
    last_progress: Instant,
    /// The first report that may wedge.
    first_sign: Option<Sign>,
    /// The last CPU lockup report.
    cpu_lockup: Option<Sign>,
    /// When the last report that may wedge came.
    last_sign: Option<Instant>,
    /// The last line was guest-init's "still alive after SIGKILL".
    left_behind_line: bool,
    /// A test that timed out leaving a task alive, and when it began.
    left_behind: Option<(String, Instant)>,
    /// Top-level TIMEOUT results in a row that came after a report.
    timeouts_in_a_row: usize,
    /// Decided at a line (a timeout), reported at the next check.
    decided: Option<Wedged>,
    /// When guest-init's totals line came: the plan is done.
    totals_at: Option<Instant>,
}

impl Watch {
    pub(super) fn new(plan: WedgeWatch, now: Instant) -> Watch {
        Watch {
            plan,
            results: LineSplitter::new(MAX_LINE_BYTES),
            console: LineSplitter::new(MAX_LINE_BYTES),
            started: false,
            done: 0,
            test_began: now,
            last_progress: now,
            first_sign: None,
            cpu_lockup: None,
            last_sign: None,
            left_behind_line: false,
            left_behind: None,
            timeouts_in_a_row: 0,
            decided: None,
            totals_at: None,
        }
    }

    /// The name of the running test (number `done + 1`), once started.
    fn running(&self) -> Option<String> {
        if !self.started {
            return None;
        }
        self.plan.test(self.done + 1).map(|(n, _)| n.clone())
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
                self.test_began = now;
            } else if let Some(n) = result_number(&line) {
                self.result_line(now, n, &line);
            } else if line.starts_with("# Totals:") {
                self.totals_at = Some(now);
            }
            // guest-init's own line, written just before the result.
            self.left_behind_line = line.trim_start().starts_with("# still alive after SIGKILL");
        }
    }

    fn result_line(&mut self, now: Instant, n: usize, line: &str) {
        let name = self.plan.test(n).map(|(t, _)| t.clone());
        let timed_out = line.contains(" # TIMEOUT");
        if timed_out && self.left_behind_line {
            if let Some(t) = &name {
                self.left_behind = Some((t.clone(), self.test_began));
            }
        }
        if self.first_sign.is_some() {
            self.timeouts_in_a_row = if timed_out {
                self.timeouts_in_a_row + 1
            } else {
                0
            };
        }
        if self.decided.is_none() {
            if let Some(w) = self.cpu_held(name.clone()) {
                self.decided = Some(w);
            } else if self.timeouts_in_a_row >= 2 {
                let sign = self.first_sign.as_ref();
                self.decided = Some(Wedged {
                    report: sign.map(|s| s.kind),
                    by: sign.and_then(|s| s.test.clone()),
                    test: name,
                    why: Why::TimeoutsInARow,
                });
            }
        }
        self.done = n;
        self.test_began = now;
    }

    /// A CPU lockup reported after a test began that then left a task
    /// alive after SIGKILL (in either order): that CPU is held for good.
    fn cpu_held(&self, test: Option<String>) -> Option<Wedged> {
        let (by, began) = self.left_behind.as_ref()?;
        let lockup = self.cpu_lockup.as_ref().filter(|s| s.at >= *began)?;
        Some(Wedged {
            report: Some(lockup.kind),
            by: Some(by.clone()),
            test,
            why: Why::CpuHeld,
        })
    }

    /// Bytes of the console: maybe a report.
    pub(super) fn console(&mut self, now: Instant, chunk: &[u8]) {
        for l in self.console.push(chunk) {
            let Some(kind) = report_start(&sanitize_line(&l.bytes)) else {
                continue;
            };
            if !kind.may_wedge() {
                continue;
            }
            let sign = Sign {
                kind,
                test: self.running(),
                at: now,
            };
            if kind.is_cpu_lockup() {
                self.cpu_lockup = Some(sign.clone());
                if self.decided.is_none() {
                    self.decided = self.cpu_held(self.running());
                }
            }
            self.first_sign.get_or_insert(sign);
            self.last_sign = Some(now);
        }
    }

    /// Whether a line already decided that the guest is wedged.
    pub(super) fn decided(&self) -> bool {
        self.decided.is_some()
    }

    /// Whether the guest is wedged at `now`.
    pub(super) fn check(&self, now: Instant) -> Option<Wedged> {
        if let Some(w) = &self.decided {
            return Some(w.clone());
        }
        if !self.started {
            return None;
        }
        let extra = match self.first_sign {
            Some(_) => Duration::ZERO,
            None => UNANSWERED_EXTRA,
        };
        if let Some(at) = self.totals_at {
            let since = now.saturating_duration_since(at);
            return (since >= POWEROFF_GRACE + extra).then(|| Wedged {
                report: self.first_sign.as_ref().map(|s| s.kind),
                by: self.first_sign.as_ref().and_then(|s| s.test.clone()),
                test: None,
                why: Why::NoPoweroff(since),
            });
        }
        let (name, timeout) = self.plan.test(self.done + 1)?;
        let limit = *timeout + KILL_GRACE + WEDGE_MARGIN + extra;
        let running = now.saturating_duration_since(self.test_began);
        let quiet = now.saturating_duration_since(self.last_progress);
        (running >= limit && quiet >= QUIET + extra).then(|| Wedged {
            report: self.first_sign.as_ref().map(|s| s.kind),
            by: self.first_sign.as_ref().and_then(|s| s.test.clone()),
            test: Some(name.clone()),
            why: Why::Unanswered(running.saturating_sub(*timeout + KILL_GRACE)),
        })
    }

    /// Whether the guest is suspected wedged at `now`: a report came
    /// while the running test ran, [`SUSPECT_AFTER`] ago or more, and that
    /// test has not ended since.
    pub(super) fn suspect(&self, now: Instant) -> bool {
        match self.last_sign {
            Some(at) => {
                self.started
                    && at >= self.test_began
                    && now.saturating_duration_since(at) >= SUSPECT_AFTER
                    && self.plan.test(self.done + 1).is_some()
            }
            None => false,
        }
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
                    one_pipe: false,
                })
                .collect(),
            ..RunPlan::default()
        }
    }

    fn watch(tests: &[(&str, u64)], t0: Instant) -> Watch {
        Watch::new(WedgeWatch::for_plan(&plan(tests)), t0)
    }

    const HUNG: &[u8] = b"[   9.1] INFO: task fault:93 blocked for more than 1 seconds.\n";
    const SOFT: &[u8] = b"[   8.0] watchdog: BUG: soft lockup - CPU#1 stuck for 3s! [fault:60]\n";
    const LEFT: &[u8] = b"  # still alive after SIGKILL (uninterruptible sleep?); left behind\n";
    /// Timeout 20 s + grace + margin.
    const LIMIT: Duration = Duration::from_secs(35);
    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn a_report_and_a_test_past_its_limit_without_a_result_is_a_wedge() {
        let t0 = Instant::now();
        let at = |s: u64| t0 + Duration::from_secs(s);
        let mut w = watch(&[("hung", 20), ("smoke", 60)], t0);
        w.results(
            at(1),
            b"KTAP version 1\n1..2\n  # Subtest: hung\n  # trigger",
        );
        w.console(at(9), b"[   9.0] harness: begin 1 hung\n");
        w.console(at(9), &HUNG[..20]);
        assert_eq!(w.check(at(1) + LIMIT), None, "half a line is no report");
        w.console(at(9), &HUNG[20..]);
        assert_eq!(w.check(at(1) + LIMIT - MS), None);
        assert_eq!(
            w.check(at(1) + LIMIT),
            Some(Wedged {
                report: Some(ReportKind::HungTask),
                by: Some("hung".into()),
                test: Some("hung".into()),
                why: Why::Unanswered(Duration::from_secs(10)),
            })
        );
    }

    #[test]
    fn without_a_report_a_silent_guest_gets_longer_and_bytes_keep_it_alive() {
        let t0 = Instant::now();
        let at = |s: u64| t0 + Duration::from_secs(s);
        let mut w = watch(&[("hung", 20), ("smoke", 60)], t0);
        w.results(at(1), b"KTAP version 1\n1..2\n  # Subtest: hung\n");
        let limit = LIMIT + UNANSWERED_EXTRA;
        assert_eq!(w.check(at(1) + limit - MS), None);
        assert_eq!(
            w.check(at(1) + limit),
            Some(Wedged {
                report: None,
                by: None,
                test: Some("hung".into()),
                why: Why::Unanswered(Duration::from_secs(25)),
            })
        );
        // guest-init still writing (a killed test's output drained): alive.
        w.results(at(40), b"  # timed out: thread 93 state R wchan 0\n");
        assert_eq!(w.check(at(1) + limit), None);
        assert!(w.check(at(40) + QUIET + UNANSWERED_EXTRA).is_some());
    }

    #[test]
    fn a_task_stuck_in_d_state_and_a_next_test_that_ends_are_no_wedge() {
        let t0 = Instant::now();
        let at = |s: u64| t0 + Duration::from_secs(s);
        let mut w = watch(&[("hung", 20), ("smoke", 60)], t0);
        w.results(at(1), b"KTAP version 1\n1..2\n  # Subtest: hung\n");
        w.console(at(9), HUNG);
        assert!(!w.suspect(at(9) + SUSPECT_AFTER - MS));
        assert!(w.suspect(at(9) + SUSPECT_AFTER), "a report, no result");
        // guest-init's grace ran out: the task is left behind, the next runs.
        w.results(at(26), LEFT);
        w.results(
            at(26),
            b"not ok 1 hung # TIMEOUT 20000 ms\n  # Subtest: smoke\n",
        );
        assert!(!w.suspect(at(40)), "the report was the last test's");
        assert_eq!(w.check(at(26) + LIMIT), None, "smoke may take 60 s + 15 s");
        let smoke_limit = Duration::from_secs(75);
        let late = w.check(at(26) + smoke_limit).unwrap();
        assert_eq!(
            (late.by, late.test),
            (Some("hung".into()), Some("smoke".into()))
        );
        // Its output is progress; after the last result nothing runs, and
        // the guest powers off.
        w.results(at(30), b"  # fake\nok 2 smoke\n");
        assert_eq!(w.check(at(10_000)), None);
        w.results(at(31), b"  # Totals: pass:9 fail:0 skip:0\n");
        assert_eq!(w.check(at(10_000)), None, "a test's own totals");
        w.results(at(31), b"# Totals: pass:1 fail:1 skip:0\n");
        assert_eq!(w.check(at(31) + POWEROFF_GRACE - MS), None);
        let off = w.check(at(31) + POWEROFF_GRACE).unwrap();
        assert_eq!(off.why, Why::NoPoweroff(POWEROFF_GRACE));
        assert_eq!(
            (off.report, off.by),
            (Some(ReportKind::HungTask), Some("hung".into()))
        );
    }

    #[test]
    fn a_cpu_lockup_and_a_task_left_behind_after_sigkill_is_a_wedge_in_either_order() {
        let t0 = Instant::now();
        let at = |s: u64| t0 + Duration::from_secs(s);
        let tests = [("smoke", 60), ("livelock", 20), ("after", 60)];
        let expected = |test: &str| Wedged {
            report: Some(ReportKind::SoftLockup),
            by: Some("livelock".into()),
            test: Some(test.into()),
            why: Why::CpuHeld,
        };
        // The report while the test runs, then its timeout.
        let mut w = watch(&tests, t0);
        w.results(at(1), b"1..3\nok 1 smoke\n");
        w.console(at(8), SOFT);
        assert_eq!(w.check(at(20)), None);
        w.results(at(26), LEFT);
        assert_eq!(w.check(at(26)), None, "no result line yet");
        w.results(at(26), b"not ok 2 livelock # TIMEOUT 20000 ms\n");
        assert_eq!(w.check(at(26)), Some(expected("livelock")));
        // The timeout first (the report waits for the watchdog's threshold).
        let mut w = watch(&tests, t0);
        w.results(at(1), b"1..3\nok 1 smoke\n");
        w.results(at(26), LEFT);
        w.results(at(26), b"not ok 2 livelock # TIMEOUT 20000 ms\n");
        assert_eq!(w.check(at(27)), None);
        w.console(at(30), SOFT);
        assert_eq!(w.check(at(30)), Some(expected("after")));
        // A killed test that was reaped gave its CPU back.
        let mut w = watch(&tests, t0);
        w.results(at(1), b"1..3\nok 1 smoke\n");
        w.console(at(8), SOFT);
        w.results(at(26), b"not ok 2 livelock # TIMEOUT 20000 ms\n");
        assert_eq!(w.check(at(27)), None);
        // A test's own copy of guest-init's line is not followed by the
        // result line at once: the test printed it, then ended by itself.
        let mut w = watch(&tests, t0);
        w.results(at(1), b"1..3\nok 1 smoke\n");
        w.console(at(8), SOFT);
        w.results(at(9), LEFT);
        w.results(at(9), b"  # done\nnot ok 2 livelock\n");
        assert_eq!(w.check(at(10)), None);
    }

    #[test]
    fn a_second_timeout_in_a_row_after_a_report_is_a_wedge() {
        let t0 = Instant::now();
        let at = |s: u64| t0 + Duration::from_secs(s);
        let mut w = watch(&[("a", 10), ("b", 10), ("c", 10), ("d", 10)], t0);
        w.results(at(1), b"1..4\n");
        w.console(
            at(3),
            b"[    3.0] Oops: general protection fault, probably for non-canonical address\n",
        );
        w.results(at(11), b"not ok 1 a # TIMEOUT 10000 ms\n");
        assert_eq!(w.check(at(12)), None, "one timeout: the next binary runs");
        w.results(at(21), b"not ok 2 b # TIMEOUT 10000 ms\n");
        assert_eq!(
            w.check(at(21)),
            Some(Wedged {
                report: Some(ReportKind::Oops),
                by: Some("a".into()),
                test: Some("b".into()),
                why: Why::TimeoutsInARow,
            })
        );
        // A test that ends by itself in between breaks the row.
        let mut w = watch(&[("a", 10), ("b", 10), ("c", 10), ("d", 10)], t0);
        w.results(at(1), b"1..4\n");
        w.console(at(3), HUNG);
        w.results(at(11), b"not ok 1 a # TIMEOUT 10000 ms\nok 2 b\n");
        w.results(at(21), b"not ok 3 c # TIMEOUT 10000 ms\n");
        assert_eq!(w.check(at(21)), None);
        // Timeouts before any report are no sign.
        let mut w = watch(&[("a", 10), ("b", 10), ("c", 10)], t0);
        w.results(at(1), b"1..3\nnot ok 1 a # TIMEOUT 10000 ms\n");
        w.console(at(12), HUNG);
        w.results(at(21), b"not ok 2 b # TIMEOUT 10000 ms\n");
        assert_eq!(w.check(at(21)), None);
    }

    #[test]
    fn tests_cannot_fake_the_top_level_lines_and_warnings_are_no_sign() {
        let t0 = Instant::now();
        let at = |s: u64| t0 + Duration::from_secs(s);
        let mut w = watch(&[("a", 1), ("b", 1)], t0);
        w.results(
            t0,
            b"KTAP version 1\n1..2\n  # Subtest: a\n  ok 1 x\n  # not ok 7 b # TIMEOUT\n",
        );
        w.console(at(1), b"WARNING: CPU: 0 PID: 1 at kernel/x.c:1\n");
        // a: 1 s + grace + margin = 16 s, with a report.
        assert_eq!(w.check(at(20)), None, "a warning is no sign");
        w.console(
            at(1),
            b"rcu: INFO: rcu_preempt self-detected stall on CPU\n",
        );
        assert_eq!(w.check(at(20)).and_then(|x| x.test), Some("a".into()));
        // No plan line yet: boot, the watchdog's business.
        let mut w = watch(&[("a", 1)], t0);
        w.console(t0, HUNG);
        assert_eq!(w.check(at(1000)), None);
        assert!(!w.suspect(at(1000)));
        // An empty watch (interactive sessions) never fires.
        let mut w = Watch::new(WedgeWatch::default(), t0);
        w.results(t0, b"1..1\n");
        w.console(t0, HUNG);
        assert_eq!(w.check(at(1000)), None);
        assert!(!w.suspect(at(1000)));
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

//! `harness compare A B`: what changed from run A to run B, each a JSON
//! results file or a run of the history (an id, `last`, `previous`). New
//! failures, fixes, flakiness, expected-failure changes, cells that came
//! or went, new kernel reports and benchmark deltas; B regressed (exit 1)
//! on a new failure, a newly flaky case, a cell that stopped passing or
//! vanished, a new kernel report or a significant benchmark slowdown.
//!
//! Benchmarks: the results carry each configuration's mean, standard
//! deviation and rounds, not the rounds' own numbers, so the test is
//! Welch's t-test on those (unequal variances, two-sided) — a rank test
//! such as Mann-Whitney U needs the rounds. A delta counts only when it is
//! both significant at [`ALPHA`] and at least [`MIN_EFFECT`] of A's mean:
//! a tiny but consistent shift is not a regression, nor is noise.
//!
//! Architecture invariant: the comparison is pure over two
//! [`crate::results::Results`]; reading them is [`load`]'s, printing the
//! binary's.

use crate::history::{Database, HistoryError};
use crate::results::{self, Results};
use serde::Serialize;
use statrs::distribution::{ContinuousCDF, StudentsT};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// The significance level of the benchmark test.
pub const ALPHA: f64 = 0.01;

/// The smallest change of a benchmark mean that counts (a fraction of A's).
pub const MIN_EFFECT: f64 = 0.05;

/// Why a side of the comparison could not be read.
#[derive(Debug, thiserror::Error)]
pub enum CompareError {
    /// A results file that cannot be read.
    #[error("cannot read {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A results file that is not one.
    #[error("{} is not a JSON results file: {source}", path.display())]
    Parse {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: serde_json::Error,
    },
    /// Neither a file nor a run.
    #[error(
        "{what}: neither a JSON results file nor a run of the history (an id, last, previous)"
    )]
    Unknown {
        /// As given.
        what: String,
    },
    /// The history.
    #[error(transparent)]
    History(#[from] HistoryError),
}

impl CompareError {
    /// The error with its kind: SQLite failing is the host's, the rest the
    /// user's input.
    pub fn into_error(self) -> crate::error::Error {
        match self {
            CompareError::History(h) => h.into_error(),
            e => crate::error::Error::usage(e),
        }
    }
}

/// One side of a comparison, read.
#[derive(Debug, Clone, PartialEq)]
pub struct Side {
    /// What it is, for the report (`run 3 (harness matrix ...)`, a path).
    pub label: String,
    /// Its results.
    pub results: Results,
}

/// Reads `what`: a JSON results file when such a file exists, else a run
/// of the history at `db` (`last`, `previous`, an id).
pub fn load(what: &str, db: &Path) -> Result<Side, CompareError> {
    let file = Path::new(what);
    if file.is_file() {
        let text = std::fs::read_to_string(file).map_err(|source| CompareError::Read {
            path: file.into(),
            source,
        })?;
        let results = serde_json::from_str(&text).map_err(|source| CompareError::Parse {
            path: file.into(),
            source,
        })?;
        return Ok(Side {
            label: what.to_string(),
            results,
        });
    }
    let is_run = matches!(what, "last" | "previous") || what.parse::<i64>().is_ok();
    if !is_run {
        return Err(CompareError::Unknown { what: what.into() });
    }
    let h = Database::open_existing(db)?;
    let id = h.resolve(what)?;
    let row = h.runs()?.into_iter().find(|r| r.id == id);
    Ok(Side {
        label: match row {
            Some(r) => format!("run {id} ({})", r.what),
            None => format!("run {id}"),
        },
        results: h.results(id)?,
    })
}

/// A case whose status changed.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CaseChange {
    /// The cell.
    pub cell: String,
    /// The case.
    pub case: String,
    /// Its status in A; `None` when A did not have it.
    pub from: Option<String>,
    /// Its status in B; `None` when B does not have it.
    pub to: Option<String>,
    /// B's message (A's when B has none).
    pub message: Option<String>,
}

/// A case repeated in A or B, failing in some of its runs there.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FlakyChange {
    /// The cell.
    pub cell: String,
    /// The case.
    pub case: String,
    /// (failures, runs) in A, when repeated there.
    pub a: Option<(u32, u32)>,
    /// (failures, runs) in B, when repeated there.
    pub b: Option<(u32, u32)>,
}

/// A cell whose status changed.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CellChange {
    /// The cell.
    pub cell: String,
    /// Its status in A.
    pub from: String,
    /// Its status in B.
    pub to: String,
}

/// A kernel report of B that A's cell did not have.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NewReport {
    /// The cell.
    pub cell: String,
    /// Its kind (`warning`, `oops`, ...).
    pub kind: String,
    /// Its title.
    pub title: String,
    /// The test running when it was printed.
    pub test: Option<String>,
}

/// What a benchmark delta amounts to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum BenchVerdict {
    /// Significantly slower by at least [`MIN_EFFECT`].
    Regression,
    /// Significantly faster by at least [`MIN_EFFECT`].
    Improvement,
    /// Not significant, or too small to matter.
    Noise,
    /// Fewer than two rounds on a side: no test possible.
    Untested,
}

/// One benchmark configuration in both runs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BenchDelta {
    /// The cell.
    pub cell: String,
    /// Its kernel (the matrix's name).
    pub kernel: String,
    /// Its topology.
    pub topology: String,
    /// `<test>/<config>`.
    pub config: String,
    /// A's mean operations per second, standard deviation, rounds.
    pub a: (f64, f64, usize),
    /// B's.
    pub b: (f64, f64, usize),
    /// (B - A) / A.
    pub change: f64,
    /// Welch's two-sided p-value, when testable.
    pub p: Option<f64>,
    /// What it amounts to.
    pub verdict: BenchVerdict,
}

/// What changed from A to B.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Comparison {
    /// A's label.
    pub a: String,
    /// B's label.
    pub b: String,
    /// Cases failing in B that passed, were expected to fail, were skipped
    /// or were absent in A.
    pub new_failures: Vec<CaseChange>,
    /// Cases failing in A that pass in B.
    pub fixes: Vec<CaseChange>,
    /// Cases failing in some of their repeats in B, not in A.
    pub newly_flaky: Vec<FlakyChange>,
    /// Cases flaky in A that are not in B.
    pub no_longer_flaky: Vec<FlakyChange>,
    /// Expected failures (xfail) that came or went, other than into a fail.
    pub xfail_changes: Vec<CaseChange>,
    /// Cells whose status changed.
    pub cell_changes: Vec<CellChange>,
    /// Cells in B only.
    pub appeared: Vec<String>,
    /// Cells in A only.
    pub vanished: Vec<String>,
    /// Kernel reports in B that A's cell did not have.
    pub new_kernel_reports: Vec<NewReport>,
    /// Benchmark configurations in both.
    pub bench: Vec<BenchDelta>,
    /// Whether B regressed against A.
    pub regressed: bool,
}

fn flaky(c: &results::Case) -> Option<(u32, u32)> {
    c.repeat
        .as_ref()
        .filter(|r| r.failures > 0 && r.failures < r.runs)
        .map(|r| (r.failures, r.runs))
}

/// A kernel report's identity across runs: its kind and title with every
/// number masked, since CPU, PID and line numbers differ from boot to boot
/// and build to build while the report is the same.
fn report_key(kind: &str, title: &str) -> (String, String) {
    let mut masked = String::with_capacity(title.len());
    let mut in_number = false;
    for ch in title.chars() {
        if ch.is_ascii_digit() {
            if !in_number {
                masked.push('#');
            }
            in_number = true;
        } else {
            masked.push(ch);
            in_number = false;
        }
    }
    (kind.to_string(), masked)
}

/// Compares A with B.
pub fn compare(a: &Side, b: &Side) -> Comparison {
    let mut out = Comparison {
        a: a.label.clone(),
        b: b.label.clone(),
        new_failures: vec![],
        fixes: vec![],
        newly_flaky: vec![],
        no_longer_flaky: vec![],
        xfail_changes: vec![],
        cell_changes: vec![],
        appeared: vec![],
        vanished: vec![],
        new_kernel_reports: vec![],
        bench: vec![],
        regressed: false,
    };
    let a_cells: BTreeMap<&str, &results::Cell> = a
        .results
        .cells
        .iter()
        .map(|c| (c.name.as_str(), c))
        .collect();
    let b_names: BTreeSet<&str> = b.results.cells.iter().map(|c| c.name.as_str()).collect();
    out.vanished = a
        .results
        .cells
        .iter()
        .filter(|c| !b_names.contains(c.name.as_str()))
        .map(|c| c.name.clone())
        .collect();
    let empty = results::Cell::default();
    for cb in &b.results.cells {
        let ca = match a_cells.get(cb.name.as_str()) {
            Some(c) => *c,
            None => {
                out.appeared.push(cb.name.clone());
                &empty
            }
        };
        if !ca.name.is_empty() && ca.status != cb.status {
            out.cell_changes.push(CellChange {
                cell: cb.name.clone(),
                from: ca.status.clone(),
                to: cb.status.clone(),
            });
        }
        cases(ca, cb, &mut out);
        reports(ca, cb, &mut out);
        if !ca.name.is_empty() {
            bench(ca, cb, &mut out);
        }
    }
    out.regressed = !out.new_failures.is_empty()
        || !out.newly_flaky.is_empty()
        || !out.vanished.is_empty()
        || !out.new_kernel_reports.is_empty()
        || out
            .cell_changes
            .iter()
            .any(|c| c.from == "passed" && c.to != "passed")
        || out
            .bench
            .iter()
            .any(|d| d.verdict == BenchVerdict::Regression);
    out
}

fn cases(ca: &results::Cell, cb: &results::Cell, out: &mut Comparison) {
    let a_cases: BTreeMap<&str, &results::Case> =
        ca.cases.iter().map(|c| (c.name.as_str(), c)).collect();
    for kb in &cb.cases {
        let ka = a_cases.get(kb.name.as_str()).copied();
        let change = || CaseChange {
            cell: cb.name.clone(),
            case: kb.name.clone(),
            from: ka.map(|k| k.status.clone()),
            to: Some(kb.status.clone()),
            message: kb
                .message
                .clone()
                .or_else(|| ka.and_then(|k| k.message.clone())),
        };
        let (fa, fb) = (ka.and_then(flaky), flaky(kb));
        let flaky_change = || FlakyChange {
            cell: cb.name.clone(),
            case: kb.name.clone(),
            a: fa,
            b: fb,
        };
        if fb.is_some() && fa.is_none() {
            out.newly_flaky.push(flaky_change());
            continue;
        }
        if fa.is_some() && fb.is_none() {
            out.no_longer_flaky.push(flaky_change());
            continue;
        }
        let from = ka.map(|k| k.status.as_str());
        match (from, kb.status.as_str()) {
            (Some("fail"), "fail") => {}
            (_, "fail") => out.new_failures.push(change()),
            (Some("fail"), "pass") => out.fixes.push(change()),
            (Some("xfail"), "xfail") => {}
            (Some("xfail"), _) | (Some(_), "xfail") => out.xfail_changes.push(change()),
            _ => {}
        }
    }
    // An expected failure whose case is gone is a change of expectations too.
    let b_names: BTreeSet<&str> = cb.cases.iter().map(|c| c.name.as_str()).collect();
    for ka in ca.cases.iter().filter(|k| k.status == "xfail") {
        if !b_names.contains(ka.name.as_str()) && !cb.name.is_empty() {
            out.xfail_changes.push(CaseChange {
                cell: cb.name.clone(),
                case: ka.name.clone(),
                from: Some(ka.status.clone()),
                to: None,
                message: ka.message.clone(),
            });
        }
    }
}

fn reports(ca: &results::Cell, cb: &results::Cell, out: &mut Comparison) {
    let seen: BTreeSet<(String, String)> = ca
        .vm
        .iter()
        .flat_map(|v| &v.kernel_reports)
        .map(|r| report_key(&r.kind, &r.title))
        .collect();
    let mut said = BTreeSet::new();
    for r in cb.vm.iter().flat_map(|v| &v.kernel_reports) {
        let key = report_key(&r.kind, &r.title);
        if !seen.contains(&key) && said.insert(key) {
            out.new_kernel_reports.push(NewReport {
                cell: cb.name.clone(),
                kind: r.kind.clone(),
                title: r.title.clone(),
                test: r.test.clone(),
            });
        }
    }
}

fn bench(ca: &results::Cell, cb: &results::Cell, out: &mut Comparison) {
    for rb in &cb.bench {
        let Some(ra) = ca
            .bench
            .iter()
            .find(|r| r.test == rb.test && r.config == rb.config)
        else {
            continue;
        };
        let change = if ra.ops_per_s > 0.0 {
            (rb.ops_per_s - ra.ops_per_s) / ra.ops_per_s
        } else {
            0.0
        };
        let p = welch_p((ra.ops_per_s, ra.sd, ra.n), (rb.ops_per_s, rb.sd, rb.n));
        let verdict = match p {
            None => BenchVerdict::Untested,
            Some(p) if p < ALPHA && change <= -MIN_EFFECT => BenchVerdict::Regression,
            Some(p) if p < ALPHA && change >= MIN_EFFECT => BenchVerdict::Improvement,
            Some(_) => BenchVerdict::Noise,
        };
        out.bench.push(BenchDelta {
            cell: cb.name.clone(),
            kernel: cb.kernel_name.clone(),
            topology: cb.topology.clone(),
            config: format!("{}/{}", rb.test, rb.config),
            a: (ra.ops_per_s, ra.sd, ra.n),
            b: (rb.ops_per_s, rb.sd, rb.n),
            change,
            p,
            verdict,
        });
    }
}

/// Welch's two-sided p-value for two samples given as (mean, sd, n);
/// `None` when a side has fewer than two rounds.
pub fn welch_p(a: (f64, f64, usize), b: (f64, f64, usize)) -> Option<f64> {
    let ((ma, sa, na), (mb, sb, nb)) = (a, b);
    if na < 2 || nb < 2 || !(ma.is_finite() && mb.is_finite() && sa.is_finite() && sb.is_finite()) {
        return None;
    }
    let (va, vb) = (sa * sa / na as f64, sb * sb / nb as f64);
    let se2 = va + vb;
    if se2 == 0.0 {
        // Every round of both sides the same: any difference is real.
        return Some(if ma == mb { 1.0 } else { 0.0 });
    }
    let t = (mb - ma) / se2.sqrt();
    let df = se2 * se2 / (va * va / (na - 1) as f64 + vb * vb / (nb - 1) as f64);
    // P(|T| > |t|) for Student's t with df degrees of freedom.
    let dist = StudentsT::new(0.0, 1.0, df).ok()?;
    Some((2.0 * dist.sf(t.abs())).clamp(0.0, 1.0))
}

impl Comparison {
    /// The exit status: `TESTS_FAILED` when B regressed, else `OK`.
    pub fn exit_code(&self) -> u8 {
        if self.regressed {
            crate::error::exit::TESTS_FAILED
        } else {
            crate::error::exit::OK
        }
    }

    /// The comparison as text for the terminal.
    pub fn text(&self) -> String {
        let mut t = String::new();
        let _ = writeln!(t, "A: {}\nB: {}", self.a, self.b);
        let status = |s: &Option<String>| s.as_deref().unwrap_or("absent").to_string();
        let case_lines = |t: &mut String, title: &str, v: &[CaseChange]| {
            if v.is_empty() {
                return;
            }
            let _ = writeln!(t, "{title} ({}):", v.len());
            for c in v {
                let _ = write!(
                    t,
                    "  {} {}: {} -> {}",
                    c.cell,
                    c.case,
                    status(&c.from),
                    status(&c.to)
                );
                match &c.message {
                    Some(m) if c.to.as_deref() != Some("pass") => {
                        let first = m.lines().next().unwrap_or_default();
                        let _ = writeln!(t, ": {first}");
                    }
                    _ => t.push('\n'),
                }
            }
        };
        case_lines(&mut t, "new failures", &self.new_failures);
        case_lines(&mut t, "fixed", &self.fixes);
        let flaky_lines = |t: &mut String, title: &str, v: &[FlakyChange]| {
            if v.is_empty() {
                return;
            }
            let _ = writeln!(t, "{title} ({}):", v.len());
            let runs = |r: Option<(u32, u32)>| match r {
                Some((f, n)) => format!("failed {f} of {n}"),
                None => "steady".to_string(),
            };
            for f in v {
                let _ = writeln!(t, "  {} {}: {} -> {}", f.cell, f.case, runs(f.a), runs(f.b));
            }
        };
        flaky_lines(&mut t, "newly flaky", &self.newly_flaky);
        flaky_lines(&mut t, "no longer flaky", &self.no_longer_flaky);
        case_lines(&mut t, "expected failures changed", &self.xfail_changes);
        if !self.cell_changes.is_empty() {
            let _ = writeln!(t, "cells changed ({}):", self.cell_changes.len());
            for c in &self.cell_changes {
                let _ = writeln!(t, "  {}: {} -> {}", c.cell, c.from, c.to);
            }
        }
        for (title, v) in [
            ("cells only in B", &self.appeared),
            ("cells vanished (only in A)", &self.vanished),
        ] {
            if !v.is_empty() {
                let _ = writeln!(t, "{title} ({}):", v.len());
                for c in v {
                    let _ = writeln!(t, "  {c}");
                }
            }
        }
        if !self.new_kernel_reports.is_empty() {
            let _ = writeln!(t, "new kernel reports ({}):", self.new_kernel_reports.len());
            for r in &self.new_kernel_reports {
                let during = r
                    .test
                    .as_deref()
                    .map(|x| format!(" (during {x})"))
                    .unwrap_or_default();
                let _ = writeln!(t, "  {} {}: {}{during}", r.cell, r.kind, r.title);
            }
        }
        if !self.bench.is_empty() {
            let _ = writeln!(
                t,
                "bench (ops/s; Welch's t-test, alpha {ALPHA}, at least {:.0}%):",
                MIN_EFFECT * 100.0
            );
            for d in &self.bench {
                let p = d.p.map(|p| format!(", p={p:.3}")).unwrap_or_default();
                let verdict = match d.verdict {
                    BenchVerdict::Regression => "REGRESSION",
                    BenchVerdict::Improvement => "improvement",
                    BenchVerdict::Noise => "no significant change",
                    BenchVerdict::Untested => "too few rounds to test",
                };
                let _ = writeln!(
                    t,
                    "  {} {}: {:.0} ±{:.0} (n={}) -> {:.0} ±{:.0} (n={}), {:+.1}%{p}: {verdict}",
                    d.cell,
                    d.config,
                    d.a.0,
                    d.a.1,
                    d.a.2,
                    d.b.0,
                    d.b.1,
                    d.b.2,
                    d.change * 100.0
                );
            }
        }
        let _ = writeln!(
            t,
            "{}",
            if self.regressed {
                "B regressed against A"
            } else {
                "no regression from A to B"
            }
        );
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn case(name: &str, status: &str) -> results::Case {
        results::Case {
            name: name.into(),
            status: status.into(),
            message: (status != "pass").then(|| format!("{name} said no")),
            ..Default::default()
        }
    }

    fn repeated(name: &str, failures: u32, runs: u32) -> results::Case {
        results::Case {
            repeat: Some(results::CaseRepeat {
                runs,
                failures,
                first_failure: None,
            }),
            ..case(name, if failures > 0 { "fail" } else { "pass" })
        }
    }

    fn cell(name: &str, status: &str, cases: Vec<results::Case>) -> results::Cell {
        results::Cell {
            name: name.into(),
            kernel_name: "k".into(),
            topology: "t".into(),
            status: status.into(),
            cases,
            ..Default::default()
        }
    }

    fn side(label: &str, cells: Vec<results::Cell>) -> Side {
        Side {
            label: label.into(),
            results: Results {
                cells,
                ..Default::default()
            },
        }
    }

    fn names(v: &[CaseChange]) -> Vec<&str> {
        v.iter().map(|c| c.case.as_str()).collect()
    }

    #[test]
    fn the_same_run_twice_is_no_regression() {
        let a = side(
            "a",
            vec![cell(
                "c",
                "failed",
                vec![case("x", "pass"), case("y", "fail")],
            )],
        );
        let c = compare(&a, &a.clone());
        assert!(!c.regressed, "{c:#?}");
        assert_eq!(c.exit_code(), crate::error::exit::OK);
        assert!(c.text().ends_with("no regression from A to B\n"));
    }

    #[test]
    fn failures_fixes_and_expected_failures_are_told_apart() {
        let a = side(
            "a",
            vec![cell(
                "c",
                "failed",
                vec![
                    case("broke", "pass"),
                    case("fixed", "fail"),
                    case("still", "fail"),
                    case("known", "xfail"),
                    case("known-now-fails", "xfail"),
                    case("skipped", "skip"),
                    case("newly-known", "pass"),
                ],
            )],
        );
        let b = side(
            "b",
            vec![cell(
                "c",
                "failed",
                vec![
                    case("broke", "fail"),
                    case("fixed", "pass"),
                    case("still", "fail"),
                    case("known", "pass"),
                    case("known-now-fails", "fail"),
                    case("skipped", "fail"),
                    case("newly-known", "xfail"),
                    case("brand-new", "fail"),
                ],
            )],
        );
        let c = compare(&a, &b);
        assert_eq!(
            names(&c.new_failures),
            ["broke", "known-now-fails", "skipped", "brand-new"]
        );
        assert_eq!(c.new_failures[3].from, None);
        assert_eq!(names(&c.fixes), ["fixed"]);
        assert_eq!(names(&c.xfail_changes), ["known", "newly-known"]);
        assert!(c.regressed);
        assert_eq!(c.exit_code(), crate::error::exit::TESTS_FAILED);
        let text = c.text();
        assert!(
            text.contains("new failures (4):\n  c broke: pass -> fail: broke said no\n"),
            "{text}"
        );
        assert!(
            text.contains("fixed (1):\n  c fixed: fail -> pass\n"),
            "{text}"
        );
        assert!(text.ends_with("B regressed against A\n"));
    }

    #[test]
    fn a_fix_alone_is_no_regression() {
        let a = side("a", vec![cell("c", "failed", vec![case("x", "fail")])]);
        let b = side("b", vec![cell("c", "passed", vec![case("x", "pass")])]);
        let c = compare(&a, &b);
        assert_eq!(names(&c.fixes), ["x"]);
        assert!(!c.regressed);
    }

    #[test]
    fn flakiness_comes_from_the_repeats() {
        let a = side(
            "a",
            vec![cell(
                "c",
                "failed",
                vec![repeated("steady", 0, 10), repeated("was-flaky", 2, 10)],
            )],
        );
        let b = side(
            "b",
            vec![cell(
                "c",
                "failed",
                vec![repeated("steady", 1, 10), repeated("was-flaky", 0, 10)],
            )],
        );
        let c = compare(&a, &b);
        assert_eq!(c.newly_flaky.len(), 1);
        assert_eq!(c.newly_flaky[0].b, Some((1, 10)));
        // A newly flaky case is not also a new failure.
        assert!(c.new_failures.is_empty());
        assert_eq!(c.no_longer_flaky[0].case, "was-flaky");
        assert!(c.regressed);
        assert!(c
            .text()
            .contains("newly flaky (1):\n  c steady: steady -> failed 1 of 10\n"));
    }

    #[test]
    fn cells_that_come_go_or_stop_passing() {
        let a = side(
            "a",
            vec![
                cell("kept", "passed", vec![]),
                cell("gone", "passed", vec![]),
            ],
        );
        let b = side(
            "b",
            vec![cell("kept", "error", vec![]), cell("new", "passed", vec![])],
        );
        let c = compare(&a, &b);
        assert_eq!(c.vanished, ["gone"]);
        assert_eq!(c.appeared, ["new"]);
        assert_eq!(c.cell_changes[0].to, "error");
        assert!(c.regressed);
        // Only a new cell: no regression.
        let only_new = compare(
            &side("a", vec![]),
            &side("b", vec![cell("new", "passed", vec![])]),
        );
        assert!(!only_new.regressed);
    }

    #[test]
    fn a_kernel_report_is_new_by_kind_and_title_numbers_aside() {
        let with = |titles: &[&str]| {
            let mut c = cell("c", "passed", vec![]);
            c.vm = Some(results::Vm {
                kernel_reports: titles
                    .iter()
                    .map(|t| results::KernelReport {
                        kind: "warning".into(),
                        title: t.to_string(),
                        test: Some("futex-wake".into()),
                        case: None,
                        line: 1,
                        excerpt: String::new(),
                    })
                    .collect(),
                ..Default::default()
            });
            c
        };
        let a = side(
            "a",
            vec![with(&[
                "WARNING: CPU: 0 PID: 70 at kernel/futex/core.c:1203 x",
            ])],
        );
        let b = side(
            "b",
            vec![with(&[
                "WARNING: CPU: 1 PID: 73 at kernel/futex/core.c:1210 x",
                "WARNING: CPU: 1 PID: 80 at mm/slub.c:99 y",
            ])],
        );
        let c = compare(&a, &b);
        assert_eq!(c.new_kernel_reports.len(), 1);
        assert!(c.new_kernel_reports[0].title.contains("slub"));
        assert!(c.regressed);
    }

    fn bench_cell(mean: f64, sd: f64, n: usize) -> results::Cell {
        let mut c = cell("k/t/bench", "passed", vec![]);
        c.bench = vec![results::Bench {
            test: "futex-bench".into(),
            config: "private".into(),
            ops_per_s: mean,
            sd,
            n,
            ..Default::default()
        }];
        c
    }

    fn bench_verdict(a: (f64, f64, usize), b: (f64, f64, usize)) -> BenchVerdict {
        let c = compare(
            &side("a", vec![bench_cell(a.0, a.1, a.2)]),
            &side("b", vec![bench_cell(b.0, b.1, b.2)]),
        );
        c.bench[0].verdict
    }

    #[test]
    fn bench_deltas_need_significance_and_size() {
        use BenchVerdict::*;
        // 20% slower with tight rounds: a regression.
        assert_eq!(bench_verdict((1e6, 1e4, 5), (8e5, 1e4, 5)), Regression);
        assert_eq!(bench_verdict((8e5, 1e4, 5), (1e6, 1e4, 5)), Improvement);
        // 20% slower but the rounds scatter widely: noise.
        assert_eq!(bench_verdict((1e6, 3e5, 3), (8e5, 3e5, 3)), Noise);
        // Significant but 2%: too small to matter.
        assert_eq!(bench_verdict((1e6, 1e3, 10), (9.8e5, 1e3, 10)), Noise);
        // One round: nothing to test.
        assert_eq!(bench_verdict((1e6, 0.0, 1), (5e5, 0.0, 1)), Untested);
        let c = compare(
            &side("a", vec![bench_cell(1e6, 1e4, 5)]),
            &side("b", vec![bench_cell(8e5, 1e4, 5)]),
        );
        assert!(c.regressed);
        assert!(c.text().contains("k/t/bench futex-bench/private: 1000000 ±10000 (n=5) -> 800000 ±10000 (n=5), -20.0%, p=0.000: REGRESSION"), "{}", c.text());
    }

    #[test]
    fn welch_matches_known_values() {
        // t = 2, df = 10 (equal n, equal sd): two-sided p = 0.0734 (tables).
        let p = welch_p((0.0, 1.0, 6), (2.0 * (2.0f64 / 6.0).sqrt(), 1.0, 6)).unwrap();
        assert!((p - 0.0734).abs() < 5e-4, "{p}");
        // t = 0: p = 1.
        assert!((welch_p((5.0, 1.0, 4), (5.0, 2.0, 4)).unwrap() - 1.0).abs() < 1e-9);
        // sd 1 and n 3 on both: df = 4, where t = 4.604 is p = 0.01.
        let se = (2.0f64 / 3.0).sqrt();
        let p4 = welch_p((0.0, 1.0, 3), (4.604 * se, 1.0, 3)).unwrap();
        assert!((p4 - 0.01).abs() < 5e-4, "{p4}");
    }

    #[test]
    fn a_side_is_a_file_or_a_run() {
        let d = tempfile::tempdir().unwrap();
        let file = d.path().join("r.json");
        let doc = Results {
            schema_version: 1,
            cells: vec![cell("c", "passed", vec![case("x", "pass")])],
            ..Default::default()
        };
        std::fs::write(&file, serde_json::to_string(&doc).unwrap()).unwrap();
        let db = d.path().join("h.sqlite");
        let s = load(file.to_str().unwrap(), &db).unwrap();
        assert_eq!(s.results.cells[0].cases[0].name, "x");
        assert!(matches!(
            load("nonsense", &db),
            Err(CompareError::Unknown { .. })
        ));
        assert!(matches!(
            load("last", &db),
            Err(CompareError::History(HistoryError::Missing { .. }))
        ));
        let mut h = Database::open(&db).unwrap();
        let id = h
            .begin_run(&crate::history::NewRun {
                what: "harness run".into(),
                ..Default::default()
            })
            .unwrap();
        h.add_cell(id, &doc.cells[0]).unwrap();
        let s = load("last", &db).unwrap();
        assert_eq!(s.label, format!("run {id} (harness run)"));
        assert_eq!(s.results.cells[0].cases[0].status, "pass");
        std::fs::write(&file, "{not json").unwrap();
        assert!(matches!(
            load(file.to_str().unwrap(), &db),
            Err(CompareError::Parse { .. })
        ));
    }
}

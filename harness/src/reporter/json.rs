//! The JSON results file (`--json FILE` on `run` and `matrix`): one
//! versioned document with the run's metadata, every cell and every case,
//! rewritten atomically after each cell so a killed run leaves what it
//! had. The layout is `docs/results.md`, exactly `docs/results.schema.json`
//! (a new field goes there too); bump [`SCHEMA_VERSION`] on any
//! incompatible change.

use super::{write_atomic, ReportError, Reporter};
use crate::events::{CellOutcome, Event, HostFacts, RunStats};
use crate::profile::{CellProfile, CellTimes, Phase};
use crate::verdict::CaseStatus;
use guest_tests::bench::{BenchLine, BENCH_TAG};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// The version of the document's layout.
pub const SCHEMA_VERSION: u32 = 1;

/// Longest message kept per case (guest output is untrusted and unbounded).
const MAX_MESSAGE: usize = 4096;

/// Writes the results file as cells finish.
pub struct Json {
    path: PathBuf,
    run: Value,
    cells: Vec<Value>,
    /// The cells that ran, for the run's phases.
    ran: Vec<CellTimes>,
    /// Known-failure entries that excused nothing (`run.stale_known_failures`,
    /// `run.unseen_known_failures`).
    staleness: crate::known::Staleness,
}

impl Json {
    /// The document at `path`.
    pub fn new(path: &Path) -> Json {
        Json {
            path: path.to_path_buf(),
            run: json!({}),
            cells: Vec::new(),
            ran: Vec::new(),
            staleness: Default::default(),
        }
    }

    fn write(&mut self) -> Result<(), ReportError> {
        let entry = |k: &crate::result::KnownFailure| {
            let mut v = json!({
                "entry": k.at,
                "suite": k.suite,
                "case": k.case,
                "message": k.message,
                "kernels": k.kernels,
                "reason": k.reason,
            });
            if let (Some(i), Some(o)) = (&k.intermittent, v.as_object_mut()) {
                o.insert("intermittent".into(), i.clone().into());
            }
            v
        };
        let stale: Vec<Value> = self.staleness.stale().into_iter().map(entry).collect();
        let unseen: Vec<Value> = self.staleness.unseen().into_iter().map(entry).collect();
        if let Some(run) = self.run.as_object_mut() {
            run.insert("stale_known_failures".into(), stale.into());
            run.insert("unseen_known_failures".into(), unseen.into());
        }
        let doc = json!({
            "schema_version": SCHEMA_VERSION,
            "run": self.run,
            "cells": self.cells,
        });
        let mut text = serde_json::to_string_pretty(&doc).unwrap_or_default();
        text.push('\n');
        write_atomic(&self.path, text.as_bytes())
    }
}

fn seconds(t: SystemTime) -> f64 {
    t.duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// Cuts `s` to at most `max` bytes on a character boundary.
fn bounded(s: &str, max: usize) -> String {
    let mut end = s.len().min(max);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s[..end].to_string()
}

/// The document's `run`, before its `stats`.
pub fn run_meta(host: &HostFacts, at: SystemTime) -> Value {
    json!({
        "harness_version": host.harness_version,
        "qemu_version": host.qemu_version,
        "host_cpus": std::thread::available_parallelism().map_or(0, |n| n.get()),
        "started": seconds(at),
    })
}

/// One cell as the document carries it.
pub fn cell_value(o: &CellOutcome) -> Value {
    let cases: Vec<Value> = o
        .cases
        .iter()
        .map(|c| {
            let message = match &c.status {
                CaseStatus::Pass => None,
                CaseStatus::Skip(r) => Some(r.as_str()),
                CaseStatus::Fail { message, .. } | CaseStatus::Xfail { message, .. } => {
                    Some(message.as_str())
                }
            };
            let mut v = json!({
                "name": bounded(&c.name, MAX_MESSAGE),
                "status": c.status.word(),
                "message": message.map(|m| bounded(m, MAX_MESSAGE)),
            });
            if let CaseStatus::Xfail { reason, entry, .. } = &c.status {
                v["known_failure"] = json!({
                    "entry": bounded(entry, MAX_MESSAGE),
                    "reason": bounded(reason, MAX_MESSAGE),
                });
            }
            if let Some(r) = o.repeat.as_ref().and_then(|r| r.case(&c.name)) {
                v["repeat"] = json!({
                    "runs": r.runs,
                    "failures": r.failures,
                    "first_failure": r.first_failure,
                });
            }
            v
        })
        .collect();
    let error = match &o.status {
        crate::events::CellStatus::Error(e) | crate::events::CellStatus::NotRun(e) => {
            Some(bounded(e, MAX_MESSAGE))
        }
        _ => None,
    };
    let vm = o.result.as_ref().map(|r| {
        let mut kinds: Vec<&str> = r.console.reports.iter().map(|k| k.kind.name()).collect();
        kinds.sort_unstable();
        kinds.dedup();
        json!({
            "accel": r.accel,
            "qemu_version": r.qemu_version,
            "end": crate::verdict::describe(&r.end),
            "started": seconds(r.started),
            "console_reports": kinds,
            "console_log": r.console_log.as_ref().map(|p| p.display().to_string()),
            "notes": r.notes.iter().map(|n| bounded(n, MAX_MESSAGE)).collect::<Vec<_>>(),
            "boot_retries": r.boot_retries.iter().map(|b| json!({
                "signature": b.signature,
                "attempt": b.attempt,
                "line": bounded(&b.line, MAX_MESSAGE),
            })).collect::<Vec<_>>(),
            "kernel_reports": r.console.reports.iter().map(|k| json!({
                "kind": k.kind.name(),
                "test": k.test,
                "line": k.line,
                "title": bounded(&k.title, MAX_MESSAGE),
                "excerpt": bounded(&k.excerpt, MAX_MESSAGE),
            })).collect::<Vec<_>>(),
            "profile": profile_value(&r.profile),
        })
    });
    let facts = o.meta.facts.as_deref();
    json!({
        "name": o.meta.name,
        "kernel": o.meta.kernel,
        "kernel_name": o.meta.kernel_name,
        "topology": o.meta.topology,
        "suite": o.meta.suite,
        "expect": o.meta.expect,
        "status": o.status.word(),
        "error": error,
        "duration_s": o.duration.as_secs_f64(),
        "counts": {"pass": o.counts.pass, "fail": o.counts.fail, "xfail": o.counts.xfail, "skip": o.counts.skip},
        "vm": vm,
        "cases": cases,
        "out_dir": o.meta.out_dir.display().to_string(),
        "kernel_facts": facts.and_then(|f| f.kernel.as_ref()).map(|k| serde_json::to_value(k).unwrap_or_default()),
        "topology_layout": facts.map(|f| layout_value(&f.topology)),
        "bench": o.result.as_ref().map(|r| bench_rows(&r.ktap)).unwrap_or_default(),
        "repeat": o.repeat.as_ref().map(|r| json!({
            "times": r.repeat.times,
            "until_fail": r.repeat.until_fail,
            "fresh_boot": r.repeat.fresh_boot,
            "iterations": r.iterations,
            "first_failure": r.first_failure,
            "failing_iteration_logs": r.kept.as_ref().map(|p| p.display().to_string()),
        })),
    })
}

/// The nodes and distances of a topology.
fn layout_value(t: &crate::topology::Topology) -> Value {
    json!({
        "nodes": t.nodes().iter().map(|n| json!({"cpus": n.cpus, "mem_mib": n.mem_mib})).collect::<Vec<_>>(),
        "distances": t.distances(),
    })
}

/// The `# BENCH` summaries of a cell's KTAP document, each with the
/// top-level test that printed it.
fn bench_rows(doc: &crate::ktap::Document) -> Vec<Value> {
    fn walk(node: &crate::ktap::TestNode, test: &str, out: &mut Vec<Value>) {
        for d in node.diagnostics.iter().filter(|d| d.starts_with(BENCH_TAG)) {
            if let Some(BenchLine::Summary(s)) = BenchLine::parse(&format!("# {d}")) {
                out.push(json!({
                    "test": test,
                    "config": s.config,
                    "spec": s.spec,
                    "ops_per_s": s.total.mean,
                    "sd": s.total.sd,
                    "n": s.total.n,
                    "min": s.total.min,
                    "max": s.total.max,
                    "threads": s.threads,
                }));
            }
        }
        for sub in &node.subtests {
            walk(sub, test, out);
        }
    }
    let mut out = Vec::new();
    for top in &doc.tests {
        walk(top, &top.name, &mut out);
    }
    out
}

/// A cell's phases (every one but the run's prepare) and test binaries.
fn profile_value(p: &CellProfile) -> Value {
    let phases: serde_json::Map<String, Value> = Phase::ALL[1..]
        .iter()
        .map(|&ph| (ph.word().to_string(), json!(p.phase(ph).as_secs_f64())))
        .collect();
    json!({
        "phases": phases,
        "tests": p.tests.iter().map(|t| json!({
            "number": t.number,
            "name": bounded(&t.name, MAX_MESSAGE),
            "s": t.duration.as_secs_f64(),
        })).collect::<Vec<_>>(),
    })
}

fn stats_value(stats: &RunStats, interrupted: bool, cells: &[CellTimes]) -> Value {
    let totals = crate::profile::totals(stats.prepare, cells);
    let phases: serde_json::Map<String, Value> = totals
        .phases
        .iter()
        .map(|&(ph, d)| {
            let v = json!({"s": d.as_secs_f64(), "share": totals.share(d)});
            (ph.word().to_string(), v)
        })
        .collect();
    json!({
        "prepare_s": stats.prepare.as_secs_f64(),
        "cells_wall_s": stats.cells_wall.as_secs_f64(),
        "cells_cpu_s": stats.cells_cpu,
        "interrupted": interrupted,
        "work_s": totals.work.as_secs_f64(),
        "phases": phases,
    })
}

impl Reporter for Json {
    fn report(&mut self, event: &Event) -> Result<(), ReportError> {
        match event {
            Event::RunStarted { cells, host, at } => {
                self.run = run_meta(host, *at);
                self.cells = cells
                    .iter()
                    .map(|m| {
                        cell_value(&CellOutcome::without_result(
                            m.clone(),
                            crate::events::CellStatus::NotRun("not run".into()),
                        ))
                    })
                    .collect();
                self.write()
            }
            Event::CellFinished(o) => {
                self.ran.extend(o.times());
                self.staleness.observe(o);
                let v = cell_value(o);
                match self.cells.get_mut(o.meta.index) {
                    Some(slot) => *slot = v,
                    None => self.cells.push(v),
                }
                self.write()
            }
            Event::RunFinished { stats, interrupted } => {
                if let Some(run) = self.run.as_object_mut() {
                    let stats = stats_value(stats, *interrupted, &self.ran);
                    run.insert("stats".into(), stats);
                }
                self.write()
            }
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::{CellMeta, CellStatus};
    use crate::verdict::{Case, Counts};

    #[test]
    fn the_document_has_every_cell_and_case_and_survives_hostile_text() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("r.json");
        let mut j = Json::new(&path);
        let meta = |index| CellMeta {
            index,
            name: format!("k/t/s{index}"),
            kernel: "debian:7.3".into(),
            kernel_name: "d73".into(),
            topology: "t".into(),
            suite: "futex".into(),
            expect: None,
            out_dir: d.path().into(),
            facts: None,
        };
        j.report(&Event::RunStarted {
            cells: vec![meta(0), meta(1)],
            host: HostFacts {
                qemu_version: "QEMU 10".into(),
                harness_version: "0.1.0".into(),
            },
            at: SystemTime::now(),
        })
        .unwrap();
        let mut o = CellOutcome::without_result(meta(1), CellStatus::Failed);
        o.cases = vec![
            Case {
                name: "futex-numa/x".into(),
                status: CaseStatus::Fail {
                    message: format!("\u{0}\"<{}", "é".repeat(5000)),
                    text: String::new(),
                },
            },
            Case {
                name: "topology/nodes".into(),
                status: CaseStatus::Pass,
            },
        ];
        o.counts = Counts {
            pass: 1,
            fail: 1,
            skip: 0,
            xfail: 0,
        };
        j.report(&Event::CellFinished(Box::new(o))).unwrap();
        j.report(&Event::RunFinished {
            stats: RunStats::default(),
            interrupted: false,
        })
        .unwrap();
        let v: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        assert_eq!(v["schema_version"], 1);
        assert_eq!(v["run"]["qemu_version"], "QEMU 10");
        assert_eq!(v["run"]["stats"]["interrupted"], false);
        // Every phase, even with no cell that ran.
        assert_eq!(v["run"]["stats"]["phases"]["boot"]["share"], 0.0);
        assert_eq!(v["run"]["stats"]["phases"].as_object().unwrap().len(), 9);
        assert_eq!(v["cells"][0]["status"], "not-run");
        assert_eq!(v["cells"][1]["status"], "failed");
        assert_eq!(v["cells"][1]["counts"]["fail"], 1);
        let msg = v["cells"][1]["cases"][0]["message"].as_str().unwrap();
        assert!(msg.len() <= MAX_MESSAGE && msg.starts_with("\u{0}\"<"));
        assert_eq!(v["cells"][1]["cases"][1]["status"], "pass");
        // What `report kcidb` reads: a cell never planned has no facts.
        assert_eq!(v["cells"][1]["out_dir"], d.path().display().to_string());
        assert!(v["cells"][1]["kernel_facts"].is_null());
        assert!(v["cells"][1]["topology_layout"].is_null());
        assert_eq!(v["cells"][1]["bench"], json!([]));
    }

    #[test]
    fn each_boot_retry_is_in_the_vm() {
        let meta = CellMeta {
            index: 0,
            name: "k/t/s".into(),
            kernel: "debian:6.12".into(),
            kernel_name: "debian-6.12".into(),
            topology: "t".into(),
            suite: "smoke".into(),
            expect: None,
            out_dir: "/o".into(),
            facts: None,
        };
        let mut o = CellOutcome::without_result(meta, CellStatus::Passed);
        let mut r = crate::result::tests_support::cell_result();
        assert_eq!(cell_value(&o)["vm"], Value::Null);
        o.result = Some(Box::new(r.clone()));
        assert_eq!(cell_value(&o)["vm"]["boot_retries"], json!([]));
        r.boot_retries = vec![crate::result::BootRetry {
            signature: "qemu7-tcg-debian-6.12".into(),
            attempt: 1,
            line: "init[1]: segfault at 8 \"x\"".into(),
        }];
        o.result = Some(Box::new(r));
        assert_eq!(
            cell_value(&o)["vm"]["boot_retries"],
            json!([{
                "signature": "qemu7-tcg-debian-6.12",
                "attempt": 1,
                "line": "init[1]: segfault at 8 \"x\"",
            }])
        );
    }
}

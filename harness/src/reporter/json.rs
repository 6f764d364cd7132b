//! The JSON results file (`--json FILE` on `run` and `matrix`): one
//! versioned document with the run's metadata, every cell and every case,
//! rewritten atomically after each cell so a killed run leaves what it
//! had. The document is [`crate::results::Results`] (its prose is
//! `docs/results.md`, its schema generated from it); this reporter builds
//! it from the run's events.

use super::{write_atomic, ReportError, Reporter};
use crate::events::{CellOutcome, CellStatus, Event, HostFacts, RunStats};
use crate::profile::{CellProfile, CellTimes, Phase};
use crate::results::{self as model, Results, MAX_MESSAGE};
use crate::verdict::CaseStatus;
use guest_tests::bench::BenchLine;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

pub use crate::results::SCHEMA_VERSION;

/// Writes the results file as cells finish.
pub struct Json {
    path: PathBuf,
    doc: Document,
}

impl Json {
    /// The document at `path`.
    pub fn new(path: &Path) -> Json {
        Json {
            path: path.to_path_buf(),
            doc: Document::new(),
        }
    }
}

/// The results document as a run's events build it: what the JSON file
/// holds and what the HTML report ([`super::html`]) renders, built in this
/// one place.
pub struct Document {
    doc: Results,
    /// The cells that ran, for the run's phases.
    ran: Vec<CellTimes>,
    /// Known-failure entries that excused nothing (`run.stale_known_failures`,
    /// `run.unseen_known_failures`).
    staleness: crate::known::Staleness,
}

impl Default for Document {
    fn default() -> Document {
        Document::new()
    }
}

impl Document {
    /// No run yet.
    pub fn new() -> Document {
        Document {
            doc: Results {
                schema_version: SCHEMA_VERSION,
                ..Results::default()
            },
            ran: Vec::new(),
            staleness: Default::default(),
        }
    }

    /// Takes one event; true when the document changed (a file to rewrite).
    pub fn observe(&mut self, event: &Event) -> bool {
        match event {
            Event::RunStarted { cells, host, at } => {
                self.doc.run = run_meta(host, *at);
                self.doc.cells = cells
                    .iter()
                    .map(|m| {
                        cell(&CellOutcome::without_result(
                            m.clone(),
                            CellStatus::NotRun("not run".into()),
                        ))
                    })
                    .collect();
            }
            Event::CellFinished(o) => {
                self.ran.extend(o.times());
                self.staleness.observe(o);
                let v = cell(o);
                match self.doc.cells.get_mut(o.meta.index) {
                    Some(slot) => *slot = v,
                    None => self.doc.cells.push(v),
                }
            }
            Event::RunFinished {
                stats: s,
                interrupted,
            } => {
                self.doc.run.stats = Some(stats(s, *interrupted, &self.ran));
            }
            _ => return false,
        }
        true
    }

    /// The document as of now, its known-failure lists brought up to date.
    pub fn results(&mut self) -> &Results {
        let entry = |k: &crate::result::KnownFailure| model::KnownFailureEntry {
            entry: k.at.clone(),
            suite: k.suite.clone(),
            case: k.case.clone(),
            message: k.message.clone(),
            kernels: k.kernels.clone(),
            reason: k.reason.clone(),
            intermittent: k.intermittent.clone(),
        };
        self.doc.run.stale_known_failures = self.staleness.stale().into_iter().map(entry).collect();
        self.doc.run.unseen_known_failures =
            self.staleness.unseen().into_iter().map(entry).collect();
        &self.doc
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

/// The document's `run`, before its `stats` and known-failure lists.
pub fn run_meta(host: &HostFacts, at: SystemTime) -> model::Run {
    model::Run {
        harness_version: host.harness_version.clone(),
        qemu_version: host.qemu_version.clone(),
        host_cpus: std::thread::available_parallelism().map_or(0, |n| n.get()),
        started: seconds(at),
        ..model::Run::default()
    }
}

/// One case as the document carries it.
fn case(c: &crate::verdict::Case, repeat: Option<&crate::repeat::RepeatSummary>) -> model::Case {
    let message = match &c.status {
        CaseStatus::Pass => None,
        CaseStatus::Skip(r) => Some(r.as_str()),
        CaseStatus::Fail { message, .. } | CaseStatus::Xfail { message, .. } => {
            Some(message.as_str())
        }
    };
    let known_failure = match &c.status {
        CaseStatus::Xfail { reason, entry, .. } => Some(model::KnownFailureRef {
            entry: bounded(entry, MAX_MESSAGE),
            reason: bounded(reason, MAX_MESSAGE),
        }),
        _ => None,
    };
    model::Case {
        name: bounded(&c.name, MAX_MESSAGE),
        status: c.status.word().to_string(),
        message: message.map(|m| bounded(m, MAX_MESSAGE)),
        known_failure,
        repeat: repeat
            .and_then(|r| r.case(&c.name))
            .map(|r| model::CaseRepeat {
                runs: r.runs,
                failures: r.failures,
                first_failure: r.first_failure,
            }),
    }
}

/// What a cell's VM did.
fn vm(r: &crate::result::CellResult) -> model::Vm {
    let mut kinds: Vec<String> = r
        .console
        .reports
        .iter()
        .map(|k| k.kind.name().to_string())
        .collect();
    kinds.sort_unstable();
    kinds.dedup();
    model::Vm {
        accel: r.accel.clone(),
        qemu_version: r.qemu_version.clone(),
        end: crate::verdict::describe(&r.end),
        started: seconds(r.started),
        console_reports: kinds,
        console_log: r.console_log.as_ref().map(|p| p.display().to_string()),
        qemu_command: r.qemu_command.clone(),
        notes: r.notes.iter().map(|n| bounded(n, MAX_MESSAGE)).collect(),
        boot_retries: r
            .boot_retries
            .iter()
            .map(|b| model::BootRetry {
                signature: b.signature.clone(),
                attempt: b.attempt,
                line: bounded(&b.line, MAX_MESSAGE),
            })
            .collect(),
        kernel_reports: r
            .console
            .reports
            .iter()
            .map(|k| model::KernelReport {
                kind: k.kind.name().to_string(),
                test: k.test.clone(),
                case: k.case.clone(),
                line: k.line,
                title: bounded(&k.title, MAX_MESSAGE),
                excerpt: bounded(&k.excerpt, MAX_MESSAGE),
            })
            .collect(),
        profile: profile(&r.profile),
    }
}

/// One cell as the document carries it.
pub fn cell(o: &CellOutcome) -> model::Cell {
    let error = match &o.status {
        CellStatus::Error(e) | CellStatus::NotRun(e) => Some(bounded(e, MAX_MESSAGE)),
        _ => None,
    };
    let facts = o.meta.facts.as_deref();
    model::Cell {
        name: o.meta.name.clone(),
        kernel: o.meta.kernel.clone(),
        kernel_name: o.meta.kernel_name.clone(),
        arch: facts
            .map_or(crate::arch::Arch::X86_64, |f| f.arch)
            .name()
            .to_string(),
        topology: o.meta.topology.clone(),
        suite: o.meta.suite.clone(),
        expect: o.meta.expect.clone(),
        status: o.status.word().to_string(),
        error,
        duration_s: o.duration.as_secs_f64(),
        counts: model::Counts {
            pass: o.counts.pass,
            fail: o.counts.fail,
            xfail: o.counts.xfail,
            skip: o.counts.skip,
        },
        vm: o.result.as_deref().map(vm),
        cases: o
            .cases
            .iter()
            .map(|c| case(c, o.repeat.as_deref()))
            .collect(),
        out_dir: o.meta.out_dir.display().to_string(),
        kernel_facts: facts.and_then(|f| f.kernel.clone()),
        topology_layout: facts.map(|f| layout(&f.topology)),
        bench: o
            .result
            .as_ref()
            .map(|r| bench_rows(&r.ktap))
            .unwrap_or_default(),
        repeat: o.repeat.as_ref().map(|r| model::CellRepeat {
            times: r.repeat.times,
            until_fail: r.repeat.until_fail,
            fresh_boot: r.repeat.fresh_boot,
            iterations: r.iterations,
            first_failure: r.first_failure,
            failing_iteration_logs: r.kept.as_ref().map(|p| p.display().to_string()),
        }),
    }
}

/// The nodes and distances of a topology.
fn layout(t: &crate::topology::Topology) -> model::Layout {
    model::Layout {
        nodes: t
            .nodes()
            .iter()
            .map(|n| model::Node {
                cpus: n.cpus.into(),
                mem_mib: n.mem_mib,
            })
            .collect(),
        distances: t.distances().map(<[Vec<u8>]>::to_vec),
    }
}

/// The `# BENCH` summaries of a cell's KTAP document, each with the
/// top-level test that printed it.
fn bench_rows(doc: &crate::ktap::Document) -> Vec<model::Bench> {
    let mut out = Vec::new();
    for top in &doc.tests {
        for d in top.all_diagnostics() {
            if let Some(BenchLine::Summary(s)) = BenchLine::parse(&format!("# {d}")) {
                out.push(model::Bench {
                    test: top.name.clone(),
                    config: s.config,
                    spec: s.spec,
                    ops_per_s: s.total.mean,
                    sd: s.total.sd,
                    n: s.total.n,
                    min: s.total.min,
                    max: s.total.max,
                    threads: s.threads,
                });
            }
        }
    }
    out
}

/// A cell's phases (every one but the run's prepare) and test binaries.
fn profile(p: &CellProfile) -> model::Profile {
    model::Profile {
        phases: Phase::ALL[1..]
            .iter()
            .map(|&ph| (ph.word().to_string(), p.phase(ph).as_secs_f64()))
            .collect(),
        tests: p
            .tests
            .iter()
            .map(|t| model::ProfileTest {
                number: t.number,
                name: bounded(&t.name, MAX_MESSAGE),
                s: t.duration.as_secs_f64(),
            })
            .collect(),
    }
}

fn stats(stats: &RunStats, interrupted: bool, cells: &[CellTimes]) -> model::Stats {
    let totals = crate::profile::totals(stats.prepare, cells);
    model::Stats {
        prepare_s: stats.prepare.as_secs_f64(),
        cells_wall_s: stats.cells_wall.as_secs_f64(),
        cells_cpu_s: stats.cells_cpu,
        interrupted,
        work_s: totals.work.as_secs_f64(),
        phases: totals
            .phases
            .iter()
            .map(|&(ph, d)| {
                let phase = model::RunPhase {
                    s: d.as_secs_f64(),
                    share: totals.share(d),
                };
                (ph.word().to_string(), phase)
            })
            .collect(),
    }
}

impl Reporter for Json {
    fn report(&mut self, event: &Event) -> Result<(), ReportError> {
        if !self.doc.observe(event) {
            return Ok(());
        }
        let mut text = serde_json::to_string_pretty(self.doc.results()).unwrap_or_default();
        text.push('\n');
        write_atomic(&self.path, text.as_bytes())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::CellMeta;
    use crate::verdict::{Case, Counts};
    use serde_json::{json, Value};

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
        let vm = |o: &CellOutcome| serde_json::to_value(cell(o)).unwrap()["vm"].clone();
        assert_eq!(vm(&o), Value::Null);
        o.result = Some(Box::new(r.clone()));
        assert_eq!(vm(&o)["boot_retries"], json!([]));
        r.boot_retries = vec![crate::result::BootRetry {
            signature: "qemu7-tcg-debian-6.12".into(),
            attempt: 1,
            line: "init[1]: segfault at 8 \"x\"".into(),
        }];
        o.result = Some(Box::new(r));
        assert_eq!(
            vm(&o)["boot_retries"],
            json!([{
                "signature": "qemu7-tcg-debian-6.12",
                "attempt": 1,
                "line": "init[1]: segfault at 8 \"x\"",
            }])
        );
    }
}

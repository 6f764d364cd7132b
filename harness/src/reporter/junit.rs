//! The JUnit reporter: builds each finished cell's testsuite once and
//! writes it — into the cell's own `junit.xml` (per-cell mode) and into the
//! run's aggregate report, which lists every cell of the run from the
//! start (unfinished ones as placeholders), so a killed run leaves a
//! complete, honest report. Every write is atomic.

use super::{ReportError, Reporter};
use crate::events::{CellMeta, CellOutcome, CellStatus, Event};
use crate::junit::{write_atomic, xml_safe, MAX_SHORT};
use quick_junit::{NonSuccessKind, Property, Report, TestCase, TestCaseStatus, TestSuite};
use std::path::{Path, PathBuf};

/// Writes JUnit as cells finish.
pub struct Junit {
    aggregate: PathBuf,
    name: String,
    per_cell: bool,
    slots: Vec<TestSuite>,
}

impl Junit {
    /// The aggregate report at `path`, named `name` (`harness run`,
    /// `harness matrix`).
    pub fn new(path: &Path, name: &str) -> Junit {
        Junit {
            aggregate: path.to_path_buf(),
            name: name.into(),
            per_cell: false,
            slots: Vec::new(),
        }
    }

    /// Also each cell's own report, `<cell out dir>/junit.xml`, written
    /// before the next cell is started.
    pub fn per_cell(mut self) -> Junit {
        self.per_cell = true;
        self
    }

    fn write_aggregate(&self) -> Result<(), ReportError> {
        if let Some(dir) = self
            .aggregate
            .parent()
            .filter(|d| !d.as_os_str().is_empty())
        {
            std::fs::create_dir_all(dir).map_err(|source| ReportError::Write {
                path: dir.to_path_buf(),
                source,
            })?;
        }
        let mut r = Report::new(xml_safe(&self.name, MAX_SHORT));
        r.set_time(self.slots.iter().filter_map(|s| s.time).sum());
        if let Some(t) = self.slots.iter().filter_map(|s| s.timestamp).min() {
            r.set_timestamp(t);
        }
        r.add_test_suites(self.slots.iter().cloned());
        Ok(write_atomic(&r, &self.aggregate)?)
    }
}

impl Reporter for Junit {
    fn report(&mut self, event: &Event) -> Result<(), ReportError> {
        match event {
            Event::RunStarted { cells, .. } => {
                self.slots = cells
                    .iter()
                    .map(|m| placeholder(m, &CellStatus::NotRun("not run".into())))
                    .collect();
                self.write_aggregate()
            }
            Event::CellFinished(o) => {
                let ts = testsuite(o);
                if self.per_cell {
                    write_cell(&ts, &o.meta.out_dir.join("junit.xml"))?;
                }
                match self.slots.get_mut(o.meta.index) {
                    Some(slot) => *slot = ts,
                    None => self.slots.push(ts),
                }
                self.write_aggregate()
            }
            _ => Ok(()),
        }
    }
}

/// A cell's testsuite: the VM's results with the reported cases, or a
/// placeholder saying why there are none; with the cell's facts as
/// properties (`status`, `kernel_name`, `expect`, ...).
pub fn testsuite(o: &CellOutcome) -> TestSuite {
    let Some(result) = &o.result else {
        return placeholder(&o.meta, &o.status);
    };
    let mut ts = crate::junit::testsuite(result, &o.cases);
    ts.add_property(Property::new("status", o.status.word()));
    if let Some(f) = o.meta.facts.as_deref() {
        ts.add_property(Property::new("arch", f.arch.name()));
    }
    ts.add_property(Property::new(
        "kernel_name",
        xml_safe(&o.meta.kernel_name, MAX_SHORT),
    ));
    if let Some(e) = &o.meta.expect {
        ts.add_property(Property::new("expect", xml_safe(e, MAX_SHORT)));
    }
    if let Some(r) = &o.repeat {
        repeat_properties(&mut ts, r);
    }
    ts
}

/// A repeated cell: the suite says how it repeated, each testcase its
/// `runs`, `failures` and `first_failure` (the iteration, 1-based).
fn repeat_properties(ts: &mut TestSuite, r: &crate::repeat::RepeatSummary) {
    ts.add_property(Property::new("repeat_iterations", r.iterations.to_string()));
    ts.add_property(Property::new(
        "repeat_mode",
        match (r.repeat.until_fail, r.repeat.fresh_boot) {
            (true, true) => "until-fail, fresh boot",
            (true, false) => "until-fail",
            (false, true) => "repeat, fresh boot",
            (false, false) => "repeat",
        },
    ));
    if let Some(k) = &r.kept {
        ts.add_property(Property::new(
            "failing_iteration_logs",
            xml_safe(&k.display().to_string(), MAX_SHORT),
        ));
    }
    for tc in &mut ts.test_cases {
        let Some(c) = r.case(tc.name.as_str()) else {
            continue;
        };
        tc.properties
            .push(Property::new("runs", c.runs.to_string()));
        tc.properties
            .push(Property::new("failures", c.failures.to_string()));
        if let Some(k) = c.first_failure {
            tc.properties
                .push(Property::new("first_failure", k.to_string()));
        }
    }
}

/// A testsuite for a cell that has no results: one testcase saying why.
pub fn placeholder(meta: &CellMeta, status: &CellStatus) -> TestSuite {
    let short = |s: &str| xml_safe(s, MAX_SHORT);
    let mut ts = TestSuite::new(short(&meta.name));
    let mut props = vec![
        ("kernel", meta.kernel.as_str()),
        ("kernel_name", meta.kernel_name.as_str()),
        ("topology", meta.topology.as_str()),
        ("suite", meta.suite.as_str()),
    ];
    if let Some(e) = &meta.expect {
        props.push(("expect", e));
    }
    for (k, v) in props {
        ts.add_property(Property::new(k, short(v)));
    }
    ts.add_property(Property::new("status", status.word()));
    let tc_status = match status {
        CellStatus::Error(why) => {
            let mut s = TestCaseStatus::non_success(NonSuccessKind::Error);
            s.set_message(short(why));
            s
        }
        CellStatus::NotRun(why) => {
            let mut s = TestCaseStatus::skipped();
            s.set_message(short(why));
            s
        }
        _ => TestCaseStatus::success(),
    };
    let mut tc = TestCase::new(status.word(), tc_status);
    tc.set_classname(short(&meta.name));
    ts.add_test_case(tc);
    ts
}

/// Writes a one-suite report for a cell.
pub fn write_cell(ts: &TestSuite, path: &Path) -> Result<(), ReportError> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|source| ReportError::Write {
            path: dir.to_path_buf(),
            source,
        })?;
    }
    let mut r = Report::new(xml_safe(&ts.name, MAX_SHORT));
    r.set_time(ts.time.unwrap_or_default());
    if let Some(t) = ts.timestamp {
        r.set_timestamp(t);
    }
    r.add_test_suite(ts.clone());
    Ok(write_atomic(&r, path)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::{HostFacts, RunStats};

    fn meta(index: usize, out: &Path) -> CellMeta {
        CellMeta {
            index,
            name: format!("k/t/s{index}"),
            kernel: "debian:7.3".into(),
            kernel_name: "debian-7.3".into(),
            topology: "t".into(),
            suite: format!("s{index}"),
            expect: Some("numa=1".into()),
            out_dir: out.join(format!("c{index}")),
            facts: None,
        }
    }

    #[test]
    fn aggregate_lists_every_cell_from_the_start_and_cells_get_their_own_file() {
        let d = tempfile::tempdir().unwrap();
        // The aggregate's directory need not exist yet (`harness run`'s
        // default is inside the cell's output directory).
        let agg = d.path().join("not-yet/junit.xml");
        let mut j = Junit::new(&agg, "harness matrix").per_cell();
        let cells = vec![meta(0, d.path()), meta(1, d.path())];
        j.report(&Event::RunStarted {
            cells: cells.clone(),
            host: HostFacts {
                qemu_version: "10".into(),
                harness_version: "0".into(),
            },
            at: std::time::SystemTime::now(),
        })
        .unwrap();
        let text = std::fs::read_to_string(&agg).unwrap();
        assert_eq!(text.matches("<testsuite ").count(), 2);
        assert_eq!(text.matches("not-run").count(), 4, "{text}");

        let o =
            CellOutcome::without_result(cells[1].clone(), CellStatus::Error("no kernel".into()));
        j.report(&Event::CellFinished(Box::new(o))).unwrap();
        let text = std::fs::read_to_string(&agg).unwrap();
        assert!(
            text.contains("no kernel") && text.contains("k/t/s0"),
            "{text}"
        );
        let own = std::fs::read_to_string(d.path().join("c1/junit.xml")).unwrap();
        assert!(own.contains("no kernel") && !own.contains("k/t/s0"));
        j.report(&Event::RunFinished {
            stats: RunStats::default(),
            interrupted: false,
        })
        .unwrap();
    }
}

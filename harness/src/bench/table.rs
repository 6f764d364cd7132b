//! The bench table as a reporter of the run's events: each finished cell's
//! `# BENCH` lines (from the KTAP already parsed into its result) become
//! rows; at the run's end the ratios against the baseline are applied and
//! `bench.csv`, `bench.json` and `bench.svg` written (atomically). The door
//! takes the table from [`BenchTable::finish`] after the run.

use super::plot;
use super::report::{self, Meta, Report, Row, RowStatus};
use super::{Benched, Measured};
use crate::events::Event;
use crate::reporter::{ReportError, Reporter};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

/// What one planned cell measures: its kernel and topology labels and its
/// configurations' names, by the cell's index in the run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Measures {
    /// The kernel as written.
    pub kernel: String,
    /// The topology as written.
    pub topology: String,
    /// The configurations, in order.
    pub configs: Vec<String>,
}

/// The run's facts the table's header carries.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Setup {
    /// Where the files go.
    pub out: PathBuf,
    /// QEMU's version.
    pub qemu: String,
    /// The configuration the ratios are against.
    pub baseline: String,
    /// Rounds per configuration.
    pub rounds: usize,
    /// Seconds per round.
    pub runtime_s: f64,
}

#[derive(Debug, Default)]
struct State {
    setup: Setup,
    cells: Vec<Measures>,
    rows: Vec<Row>,
    accels: Vec<String>,
    lines: Vec<String>,
    any_bad: bool,
    done: Option<Benched>,
}

/// The reporter; clones share one table (the door keeps one to
/// [`BenchTable::finish`]).
#[derive(Debug, Clone, Default)]
pub struct BenchTable {
    state: Arc<Mutex<State>>,
}

impl BenchTable {
    /// A table of the cells `cells` (by index) under `setup`.
    pub fn new(setup: Setup, cells: Vec<Measures>) -> BenchTable {
        BenchTable {
            state: Arc::new(Mutex::new(State {
                setup,
                cells,
                ..State::default()
            })),
        }
    }

    /// The table and what was measured, once the run has finished (`None`
    /// before).
    pub fn finish(&self) -> Option<Benched> {
        self.lock().done.clone()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Reporter for BenchTable {
    fn report(&mut self, event: &Event) -> Result<(), ReportError> {
        let mut s = self.lock();
        match event {
            Event::CellFinished(o) => {
                let Some(m) = s.cells.get(o.meta.index).cloned() else {
                    return Ok(());
                };
                let lines = o
                    .result
                    .as_ref()
                    .map(|r| report::bench_lines(&r.ktap))
                    .unwrap_or_default();
                let rows = report::rows_from_lines(&m.kernel, &m.topology, &m.configs, &lines);
                if let Some(r) = &o.result {
                    if !s.accels.contains(&r.accel) {
                        s.accels.push(r.accel.clone());
                    }
                    s.lines.push(format!(
                        "{}: {} in {:.1} s ({} failed cases; console {})",
                        o.meta.name,
                        crate::verdict::describe(&r.end),
                        r.duration.as_secs_f64(),
                        o.counts.fail,
                        o.meta.out_dir.join("console.log").display()
                    ));
                }
                s.any_bad |= rows
                    .iter()
                    .any(|r| matches!(r.status, RowStatus::Fail | RowStatus::Missing));
                s.rows.extend(rows);
            }
            Event::RunFinished { .. } => {
                let done = write(&mut s)?;
                s.done = Some(done);
            }
            _ => {}
        }
        Ok(())
    }
}

/// The ratios, the files and the summary of a finished run.
fn write(s: &mut State) -> Result<Benched, ReportError> {
    let mut rows = std::mem::take(&mut s.rows);
    report::apply_ratios(&mut rows, &s.setup.baseline);
    let accel = s.accels.join("+");
    let rep = Report {
        meta: Meta {
            note: Meta::note_for(&accel),
            accel,
            qemu: s.setup.qemu.clone(),
            baseline: s.setup.baseline.clone(),
            rounds: s.setup.rounds,
            runtime_s: s.setup.runtime_s,
            host_cpus: std::thread::available_parallelism().map_or(0, |n| n.get()),
        },
        rows,
    };
    let out = s.setup.out.clone();
    let put = |name: &str, text: String| -> Result<PathBuf, ReportError> {
        let p = out.join(name);
        crate::reporter::write_atomic(&p, text.as_bytes())?;
        Ok(p)
    };
    let csv = put("bench.csv", report::csv(&rep))?;
    let json = put("bench.json", report::json(&rep))?;
    let svg = out.join("bench.svg");
    plot::write(&rep, &svg).map_err(ReportError::Render)?;
    let mut summary: String = s.lines.iter().map(|l| format!("{l}\n")).collect();
    summary.push_str(&format!(
        "{}CSV {}  JSON {}  plot {}\n",
        report::table(&rep),
        csv.display(),
        json.display(),
        svg.display()
    ));
    Ok(Benched {
        measured: if s.any_bad {
            Measured::Missing
        } else {
            Measured::All
        },
        summary,
    })
}

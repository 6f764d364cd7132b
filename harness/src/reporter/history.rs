//! The results history reporter (`<out>/history.sqlite`, `--history FILE`):
//! opens the history when the run starts and records the run, then each
//! cell as it finishes (the same [`crate::results::Cell`] the JSON reporter
//! builds, [`super::json::cell`]), and marks the run finished at its end.
//! Each cell is one transaction: a killed run leaves its finished cells.

use super::{ReportError, Reporter};
use crate::events::Event;
use crate::history::{Database, NewRun};
use std::path::{Path, PathBuf};

/// Records a run in the history file.
pub struct History {
    path: PathBuf,
    what: String,
    /// The open file and the run's id, from [`Event::RunStarted`] on.
    open: Option<(Database, i64)>,
}

impl History {
    /// A run described as `what` (its command line), recorded at `path`.
    pub fn new(path: &Path, what: String) -> History {
        History {
            path: path.to_path_buf(),
            what,
            open: None,
        }
    }
}

impl From<crate::history::HistoryError> for ReportError {
    fn from(e: crate::history::HistoryError) -> Self {
        ReportError::History(Box::new(e))
    }
}

impl Reporter for History {
    fn report(&mut self, event: &Event) -> Result<(), ReportError> {
        match event {
            Event::RunStarted { host, at, .. } => {
                let mut db = Database::open(&self.path)?;
                let meta = super::json::run_meta(host, *at);
                let id = db.begin_run(&NewRun {
                    started: meta.started,
                    harness_version: meta.harness_version,
                    host: crate::history::host_name(),
                    qemu_version: meta.qemu_version,
                    what: self.what.clone(),
                })?;
                self.open = Some((db, id));
                Ok(())
            }
            Event::CellFinished(o) => match &mut self.open {
                Some((db, id)) => Ok(db.add_cell(*id, &super::json::cell(o))?),
                None => Ok(()),
            },
            Event::RunFinished { interrupted, .. } => match &mut self.open {
                Some((db, id)) => Ok(db.finish_run(*id, *interrupted)?),
                None => Ok(()),
            },
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::{CellOutcome, CellStatus, HostFacts, RunStats};

    #[test]
    fn a_run_is_recorded_cell_by_cell_and_finished() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("out/history.sqlite");
        let mut h = History::new(&path, "harness matrix -j 1".into());
        let meta = |index| crate::events::CellMeta {
            index,
            name: format!("k/t/s{index}"),
            ..crate::events::tests_support::meta()
        };
        h.report(&Event::RunStarted {
            cells: vec![meta(0), meta(1)],
            host: HostFacts {
                qemu_version: "QEMU 10".into(),
                harness_version: "0.1.0".into(),
            },
            at: std::time::SystemTime::now(),
        })
        .unwrap();
        let o = CellOutcome::without_result(meta(0), CellStatus::Passed);
        h.report(&Event::CellFinished(Box::new(o))).unwrap();
        let runs = Database::open_existing(&path).unwrap().runs().unwrap();
        assert_eq!((runs[0].cells, runs[0].finished), (1, false));
        assert_eq!(runs[0].what, "harness matrix -j 1");
        h.report(&Event::RunFinished {
            stats: RunStats::default(),
            interrupted: true,
        })
        .unwrap();
        let runs = Database::open_existing(&path).unwrap().runs().unwrap();
        assert!(runs[0].finished && runs[0].interrupted);
    }
}

//! The learned-costs file ([`crate::costs`]) as a reporter: each cell whose
//! guest finished its plan adds its wall and QEMU CPU time, and the file is
//! rewritten (atomically) at once, so a run cut short keeps what its
//! finished cells taught; a cell cut short teaches nothing.

use super::{ReportError, Reporter};
use crate::costs::Costs;
use crate::events::Event;
use crate::result::VmEnd;
use std::path::PathBuf;

/// Learns from a run's cells into `path`.
#[derive(Debug)]
pub struct CostsFile {
    path: PathBuf,
    costs: Costs,
}

impl CostsFile {
    /// Starts from what `costs` (read from `path` by the front door) holds.
    pub fn new(path: PathBuf, costs: Costs) -> CostsFile {
        CostsFile { path, costs }
    }
}

impl Reporter for CostsFile {
    fn report(&mut self, event: &Event) -> Result<(), ReportError> {
        // Only whole, ordinary runs: a watchdog or panic cuts a cell short,
        // a repeated one is many runs.
        let Event::CellFinished(o) = event else {
            return Ok(());
        };
        let Some(r) = o.result.as_deref() else {
            return Ok(());
        };
        if r.end != VmEnd::Finished || o.repeat.is_some() {
            return Ok(());
        }
        self.costs.record(&o.meta.name, o.duration, r.qemu_cpu);
        self.costs
            .save(&self.path)
            .map_err(|source| ReportError::Write {
                path: self.path.clone(),
                source,
            })?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::{CellOutcome, CellStatus};
    use crate::result::{Wedge, WedgeWhy};
    use std::time::Duration;

    fn finished(name: &str, end: VmEnd) -> Event {
        let mut meta = crate::events::tests_support::meta();
        meta.name = name.into();
        let mut o = CellOutcome::without_result(meta, CellStatus::Failed);
        o.duration = Duration::from_secs(500);
        let mut r = crate::result::tests_support::cell_result();
        r.end = end;
        o.result = Some(Box::new(r));
        Event::CellFinished(Box::new(o))
    }

    #[test]
    fn a_wedged_cell_teaches_no_cost_and_a_finished_one_does() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("costs.json");
        let mut r = CostsFile::new(path.clone(), Costs::default());
        let wedged = VmEnd::Wedged(Wedge {
            report: None,
            by: None,
            test: Some("livelock".into()),
            why: WedgeWhy::CpuHeld,
        });
        r.report(&finished("k/t/wedged", wedged)).unwrap();
        r.report(&finished("k/t/ok", VmEnd::Finished)).unwrap();
        let (costs, note) = Costs::load(&path);
        assert_eq!(note, None);
        assert!(costs.get("k/t/wedged").is_none());
        assert!(costs.get("k/t/ok").is_some());
    }
}

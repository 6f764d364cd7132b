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

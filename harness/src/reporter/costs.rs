//! The learned-costs file ([`crate::costs`]) as a reporter: each cell whose
//! guest finished its plan adds its wall and QEMU CPU time; the file is
//! written (atomically) when the run ends, so an interrupted run teaches
//! nothing half-measured.

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
    learned: usize,
}

impl CostsFile {
    /// Starts from what `costs` (read from `path` by the front door) holds.
    pub fn new(path: PathBuf, costs: Costs) -> CostsFile {
        CostsFile {
            path,
            costs,
            learned: 0,
        }
    }
}

impl Reporter for CostsFile {
    fn report(&mut self, event: &Event) -> Result<(), ReportError> {
        match event {
            Event::CellFinished(o) => {
                // Only whole, ordinary runs: a watchdog or panic cuts a
                // cell short, a repeated one is many runs.
                if let Some(r) = o.result.as_deref() {
                    if r.end == VmEnd::Finished && o.repeat.is_none() {
                        self.costs.record(&o.meta.name, o.duration, r.qemu_cpu);
                        self.learned += 1;
                    }
                }
            }
            Event::RunFinished { interrupted, .. } if !interrupted && self.learned > 0 => {
                self.costs
                    .save(&self.path)
                    .map_err(|source| ReportError::Write {
                        path: self.path.clone(),
                        source,
                    })?;
            }
            _ => {}
        }
        Ok(())
    }
}

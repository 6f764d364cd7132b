//! The exit status of a run, from its events: the reporter keeps the
//! run's [`exit::RunSummary`], and [`exit::of_run`] (the one mapping, in
//! the exit-code table's module) decides.

use super::{ReportError, Reporter};
use crate::error::exit;
use crate::events::{CellStatus, Event};
use std::sync::{Arc, Mutex};

/// Collects the verdict; read it with [`ExitStatus::code`] after the run.
#[derive(Debug, Clone, Default)]
pub struct ExitStatus {
    summary: Arc<Mutex<exit::RunSummary>>,
}

impl ExitStatus {
    /// A fresh verdict (clone it: one copy to the reporters, one to read).
    pub fn new() -> ExitStatus {
        ExitStatus::default()
    }

    fn summary(&self) -> std::sync::MutexGuard<'_, exit::RunSummary> {
        self.summary.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Counts a result the front door found missing beyond the cells'
    /// statuses (a benchmark configuration without its number).
    pub fn unexpected(&self) {
        self.summary().unexpected += 1;
    }

    /// The run's exit status.
    pub fn code(&self) -> u8 {
        exit::of_run(&self.summary())
    }
}

impl Reporter for ExitStatus {
    fn report(&mut self, event: &Event) -> Result<(), ReportError> {
        let mut s = self.summary();
        match event {
            Event::CellFinished(o) => {
                s.cells += 1;
                match &o.status {
                    CellStatus::Passed => {}
                    CellStatus::Error(_) => s.errors += 1,
                    _ => s.unexpected += 1,
                }
            }
            Event::RunFinished { interrupted, .. } => s.interrupted |= interrupted,
            _ => {}
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::{CellOutcome, RunStats};

    fn finished(status: CellStatus) -> Event {
        let meta = crate::events::tests_support::meta();
        Event::CellFinished(Box::new(CellOutcome::without_result(meta, status)))
    }

    fn code(events: &[Event]) -> u8 {
        let e = ExitStatus::new();
        let mut r = e.clone();
        for ev in events {
            r.report(ev).unwrap();
        }
        e.code()
    }

    #[test]
    fn one_place_decides_the_exit_status() {
        let end = |interrupted| Event::RunFinished {
            stats: RunStats::default(),
            interrupted,
        };
        assert_eq!(code(&[finished(CellStatus::Passed), end(false)]), 0);
        assert_eq!(
            code(&[finished(CellStatus::Passed), finished(CellStatus::Failed)]),
            1
        );
        assert_eq!(code(&[finished(CellStatus::Error("x".into()))]), 69);
        assert_eq!(
            code(&[
                finished(CellStatus::Error("x".into())),
                finished(CellStatus::Failed)
            ]),
            1,
            "a test result outranks the host"
        );
        assert_eq!(code(&[finished(CellStatus::NotRun("x".into()))]), 1);
        assert_eq!(code(&[end(false)]), 1, "no cell is not a pass");
        assert_eq!(code(&[finished(CellStatus::Passed), end(true)]), 130);
    }

    #[test]
    fn a_missing_number_is_an_unexpected_result() {
        let e = ExitStatus::new();
        let mut r = e.clone();
        r.report(&finished(CellStatus::Passed)).unwrap();
        assert_eq!(e.code(), 0);
        e.unexpected();
        assert_eq!(e.code(), 1);
    }
}

//! The exit status of a run, decided from its events in one place: 130
//! after SIGINT/SIGTERM; else 1 on any unexpected test result (a failed
//! cell, or no cell at all); else 69 when a cell could not run for the
//! host's reasons (a kernel download, QEMU refusing the image); else 0.

use super::{ReportError, Reporter};
use crate::error::exit;
use crate::events::{CellStatus, Event};
use std::sync::{Arc, Mutex};

/// Collects the verdict; read it with [`ExitStatus::code`] after the run.
#[derive(Debug, Clone, Default)]
pub struct ExitStatus {
    state: Arc<Mutex<State>>,
}

#[derive(Debug, Default)]
struct State {
    cells: usize,
    bad: usize,
    errors: usize,
    interrupted: bool,
}

impl ExitStatus {
    /// A fresh verdict (clone it: one copy to the reporters, one to read).
    pub fn new() -> ExitStatus {
        ExitStatus::default()
    }

    /// The run's exit status.
    pub fn code(&self) -> u8 {
        let s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if s.interrupted {
            exit::INTERRUPTED
        } else if s.cells == 0 || s.bad > 0 {
            exit::TESTS_FAILED
        } else if s.errors > 0 {
            crate::error::ErrorKind::Infrastructure.exit_code()
        } else {
            exit::OK
        }
    }
}

impl Reporter for ExitStatus {
    fn report(&mut self, event: &Event) -> Result<(), ReportError> {
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        match event {
            Event::CellFinished(o) => {
                s.cells += 1;
                match &o.status {
                    CellStatus::Passed => {}
                    CellStatus::Error(_) => s.errors += 1,
                    _ => s.bad += 1,
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
}

//! Flattens a [`CellResult`] into test cases with a status: the one place
//! that decides pass/fail/skip, used by JUnit and the summary alike.

use crate::result::CellResult;

/// Status of one case.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CaseStatus {
    /// Passed.
    Pass,
    /// Skipped, with the reason.
    Skip(String),
    /// Failed: a one-line message and a longer text (diagnostics, console excerpt).
    Fail {
        /// One line.
        message: String,
        /// Details.
        text: String,
    },
}

/// One leaf test case.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Case {
    /// `binary/case` path of names.
    pub name: String,
    /// Status.
    pub status: CaseStatus,
}

/// The cases of a cell.
pub fn cases(_cell: &CellResult) -> Vec<Case> {
    Vec::new()
}

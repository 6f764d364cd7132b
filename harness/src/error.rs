//! What kind of failure an error is, so the binary maps it to an exit
//! status in one place: 2 for the user's input, 69 for the host.

/// The kind of an error that stops a command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// Bad command line or input file (exit 2).
    Usage,
    /// The host or the network failed (exit 69).
    Infrastructure,
}

impl ErrorKind {
    /// The exit status (sysexits: `EX_USAGE`-like 2, `EX_UNAVAILABLE` 69).
    pub fn exit_code(self) -> u8 {
        match self {
            ErrorKind::Usage => 2,
            ErrorKind::Infrastructure => 69,
        }
    }
}

/// An error with its kind: what every front door returns. It displays as
/// the error it wraps and continues that error's chain (so a cause is
/// printed once).
#[derive(Debug)]
pub struct Error {
    /// Usage or infrastructure.
    pub kind: ErrorKind,
    /// What went wrong.
    pub source: Box<dyn std::error::Error + Send + Sync>,
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.source.fmt(f)
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source.source()
    }
}

impl Error {
    /// A usage error.
    pub fn usage(e: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> Error {
        Error {
            kind: ErrorKind::Usage,
            source: e.into(),
        }
    }
    /// An infrastructure error.
    pub fn infra(e: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> Error {
        Error {
            kind: ErrorKind::Infrastructure,
            source: e.into(),
        }
    }
}

/// Exit statuses of every command.
pub mod exit {
    /// Every result as expected.
    pub const OK: u8 = 0;
    /// An unexpected test result (or no result at all).
    pub const TESTS_FAILED: u8 = 1;
    /// Interrupted by SIGINT/SIGTERM.
    pub const INTERRUPTED: u8 = 130;
}

//! Reporters: subscribers of the runner's [`Event`] stream. Each output of
//! a run is one reporter in one file — the terminal (in the binary), JUnit
//! ([`junit`]), the JSON results file ([`json`]), the HTML report
//! ([`html`]), the Markdown summary ([`markdown`]), the results history ([`history`]) and the exit status
//! ([`exit`]) — and a new output is a new file here, not a change to the
//! front doors or the runner (nextest-runner's `reporter/` is the model).

pub mod costs;
pub mod exit;
pub mod history;
pub mod html;
pub mod json;
pub mod junit;
pub mod kcidb;
pub mod markdown;

use crate::events::Event;

/// Why a reporter could not do its job (a report file not written).
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// A JUnit report.
    #[error(transparent)]
    Junit(#[from] crate::junit::JunitError),
    /// A file (JSON results, a directory).
    #[error("cannot write {}: {source}", path.display())]
    Write {
        /// The file.
        path: std::path::PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The results history (boxed: SQLite's error is large).
    #[error(transparent)]
    History(Box<crate::history::HistoryError>),
    /// A report that could not be drawn (the bench plot).
    #[error("{0}")]
    Render(String),
}

/// A subscriber of a run's events.
pub trait Reporter: Send {
    /// Takes one event; called in event order, from one task.
    fn report(&mut self, event: &Event) -> Result<(), ReportError>;
}

/// The reporters of one run: every event goes to each, in order.
#[derive(Default)]
pub struct Reporters {
    all: Vec<Box<dyn Reporter>>,
}

impl Reporters {
    /// No reporters yet.
    pub fn new() -> Reporters {
        Reporters::default()
    }

    /// Adds a reporter.
    pub fn add(&mut self, r: impl Reporter + 'static) -> &mut Reporters {
        self.all.push(Box::new(r));
        self
    }

    /// Sends `event` to every reporter; all of them get it even when one
    /// fails (the first error is returned).
    pub fn send(&mut self, event: &Event) -> Result<(), ReportError> {
        let mut first = None;
        for r in &mut self.all {
            if let Err(e) = r.report(event) {
                first.get_or_insert(e);
            }
        }
        first.map_or(Ok(()), Err)
    }

    /// A preparation step.
    pub fn step(&mut self, what: &str) -> Result<(), ReportError> {
        self.send(&Event::Step(what.to_string()))
    }

    /// Runs blocking work `f` (a download, a build) on a blocking thread;
    /// each note it gives its `say` argument is an [`Event::Step`] as it
    /// comes, so work outside the event loop reports progress the way the
    /// rest of a run does instead of printing. Errs only when `f` panicked.
    pub async fn blocking<T: Send + 'static>(
        &mut self,
        f: impl FnOnce(&(dyn Fn(&str) + Sync)) -> T + Send + 'static,
    ) -> Result<T, tokio::task::JoinError> {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<String>();
        let mut work = tokio::task::spawn_blocking(move || {
            let say = move |m: &str| {
                let _ = tx.send(m.to_string());
            };
            f(&say)
        });
        loop {
            tokio::select! {
                Some(note) = rx.recv() => {
                    let _ = self.step(&note);
                }
                done = &mut work => {
                    // Notes sent just before the end still come, in order.
                    while let Ok(note) = rx.try_recv() {
                        let _ = self.step(&note);
                    }
                    return done;
                }
            }
        }
    }
}

impl From<ReportError> for crate::error::Error {
    fn from(e: ReportError) -> Self {
        crate::error::Error::infra(e)
    }
}

/// Writes `bytes` to `path` atomically (a temp file beside it, renamed).
pub fn write_atomic(path: &std::path::Path, bytes: &[u8]) -> Result<(), ReportError> {
    let werr = |source| ReportError::Write {
        path: path.to_path_buf(),
        source,
    };
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => std::path::Path::new("."),
    };
    std::fs::create_dir_all(dir).map_err(werr)?;
    let mut tmp = tempfile::NamedTempFile::new_in(dir).map_err(werr)?;
    // A report is for reading (a web server, a colleague): the temp
    // file's 0600 would follow it through the rename.
    let readable = <std::fs::Permissions as std::os::unix::fs::PermissionsExt>::from_mode(0o644);
    tmp.as_file().set_permissions(readable).map_err(werr)?;
    std::io::Write::write_all(&mut tmp, bytes).map_err(werr)?;
    tmp.persist(path).map_err(|e| werr(e.error))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn write_atomic_leaves_a_readable_file() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("sub/report.html");
        super::write_atomic(&p, b"x").unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"x");
        let mode = std::fs::metadata(&p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o644);
    }
}

//! `matrix.yaml`: kernels x topologies x suites with per-kernel
//! expectations, run concurrently within a host budget, sharded for CI.
//!
//! Pipeline: text ──[`schema`] (serde, unknown keys are errors)──▶
//! `RawMatrix` ──[`model::validate`]──▶ [`Matrix`] (the only runnable type)
//! ──[`plan`] (filters, shard)──▶ cells ──[`run`]──▶ events + per-cell
//! results ──[`report`]──▶ per-cell and aggregate JUnit, summary table.
//! `--dry-run` stops after the plan: `dry_run` says what each cell would
//! do.
//!
//! See `docs/matrix.md` for the file format.

pub mod args;
pub mod cli;
mod dry_run;
pub use crate::glob;
pub mod locate;
pub mod model;
pub mod plan;
pub mod report;
pub mod run;
pub mod schema;
mod validate;

pub use model::{Cell, Matrix};
use std::path::{Path, PathBuf};

/// Errors loading a matrix; each names the file and, where known, the
/// line and column, and says what was expected.
#[derive(Debug, thiserror::Error)]
pub enum MatrixError {
    /// The file cannot be read.
    #[error("{}: cannot read: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A problem at a place in the file.
    #[error("{}:{line}:{column}: {message}", path.display())]
    At {
        /// The file.
        path: PathBuf,
        /// 1-based line.
        line: usize,
        /// 1-based column.
        column: usize,
        /// What is wrong and what was expected.
        message: String,
    },
    /// A problem the file as a whole has.
    #[error("{}: {message}", path.display())]
    File {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// A bad command line (filters, shard).
    #[error("{0}")]
    Usage(String),
}

/// Parses and validates matrix text; `path` is used in messages.
pub fn parse_str(text: &str, path: &Path) -> Result<Matrix, MatrixError> {
    let raw: schema::RawMatrix = serde_yaml_ng::from_str(text).map_err(|e| {
        let msg = e.to_string();
        match e.location() {
            Some(loc) => {
                // The message ends with " at line L column C": keep it once.
                let message = msg
                    .rsplit_once(" at line ")
                    .map(|(m, _)| m.to_string())
                    .unwrap_or(msg);
                MatrixError::At {
                    path: path.to_path_buf(),
                    line: loc.line(),
                    column: loc.column(),
                    message,
                }
            }
            None => MatrixError::File {
                path: path.to_path_buf(),
                message: msg,
            },
        }
    })?;
    model::validate(raw, path, text)
}

/// Reads, parses and validates a matrix file.
pub fn load(path: &Path) -> Result<Matrix, MatrixError> {
    let text = std::fs::read_to_string(path).map_err(|source| MatrixError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    parse_str(&text, path)
}

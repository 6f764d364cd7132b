//! Output paths (`--json`, `--junit`, `--kcidb`, `--out`) checked before
//! any work: a report that cannot be written is the user's input, said at
//! once (exit 2), not an infrastructure error after a kernel download.
//! Directories that do not exist yet are created when the run writes
//! (README: "Output paths"); what must hold now is that they can be: the
//! nearest existing ancestor is a directory this process may write into,
//! and a file path is not a directory.

use std::path::{Path, PathBuf};

/// Why an output path cannot be used.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum OutputError {
    /// A file path that is a directory.
    #[error("{flag} {path}: is a directory; expected a file path")]
    IsDirectory {
        /// The option.
        flag: String,
        /// As given.
        path: PathBuf,
    },
    /// A directory path that is something else.
    #[error("{flag} {path}: exists and is not a directory")]
    NotDirectory {
        /// The option.
        flag: String,
        /// As given.
        path: PathBuf,
    },
    /// An ancestor that would have to be a directory is a file.
    #[error("{flag} {path}: {ancestor} is a file, not a directory")]
    UnderFile {
        /// The option.
        flag: String,
        /// As given.
        path: PathBuf,
        /// The file in the way.
        ancestor: PathBuf,
    },
    /// The nearest existing directory may not be written into.
    #[error("{flag} {path}: cannot write into {ancestor}: {why}")]
    NotWritable {
        /// The option.
        flag: String,
        /// As given.
        path: PathBuf,
        /// The directory.
        ancestor: PathBuf,
        /// What `access(2)` said.
        why: String,
    },
}

/// `flag FILE`: a file the run will write (its directories created).
pub fn check_file(flag: &str, path: &Path) -> Result<(), OutputError> {
    if path.is_dir() {
        return Err(OutputError::IsDirectory {
            flag: flag.into(),
            path: path.into(),
        });
    }
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    creatable(flag, path, parent)
}

/// Each `(flag, FILE)` given on the command line, checked as `check_file`.
pub fn check_files(files: &[(&str, Option<&Path>)]) -> Result<(), OutputError> {
    for (flag, path) in files {
        if let Some(p) = path {
            check_file(flag, p)?;
        }
    }
    Ok(())
}

/// `flag DIR`: a directory the run will write into (created if missing).
pub fn check_dir(flag: &str, path: &Path) -> Result<(), OutputError> {
    if path.exists() && !path.is_dir() {
        return Err(OutputError::NotDirectory {
            flag: flag.into(),
            path: path.into(),
        });
    }
    creatable(flag, path, path)
}

/// Whether `dir` exists as a writable directory or can be created.
fn creatable(flag: &str, path: &Path, dir: &Path) -> Result<(), OutputError> {
    let mut at = dir;
    // `exists()` follows symlinks: a dangling one is "missing", and
    // creating through it fails later; rare enough to leave to the run.
    while !at.exists() {
        at = match at.parent() {
            Some(p) if !p.as_os_str().is_empty() => p,
            _ => Path::new("."),
        };
    }
    if !at.is_dir() {
        return Err(OutputError::UnderFile {
            flag: flag.into(),
            path: path.into(),
            ancestor: at.into(),
        });
    }
    let c = std::ffi::CString::new(std::os::unix::ffi::OsStrExt::as_bytes(at.as_os_str()))
        .map_err(|e| OutputError::NotWritable {
            flag: flag.into(),
            path: path.into(),
            ancestor: at.into(),
            why: e.to_string(),
        })?;
    // SAFETY: a NUL-terminated path we own.
    if unsafe { libc::access(c.as_ptr(), libc::W_OK | libc::X_OK) } != 0 {
        return Err(OutputError::NotWritable {
            flag: flag.into(),
            path: path.into(),
            ancestor: at.into(),
            why: std::io::Error::last_os_error().to_string(),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_that_can_be_written_pass_and_the_others_say_why() {
        let d = tempfile::tempdir().unwrap();
        let file = d.path().join("f");
        std::fs::write(&file, "x").unwrap();
        let deep = d.path().join("a/b/c.json");
        assert_eq!(check_file("--json", &deep), Ok(()), "parents are created");
        assert_eq!(check_file("--json", &file), Ok(()), "overwritten");
        assert_eq!(check_dir("--out", &d.path().join("new/out")), Ok(()));
        assert_eq!(check_file("--json", Path::new("r.json")), Ok(()));
        assert_eq!(
            check_file("--junit", d.path()),
            Err(OutputError::IsDirectory {
                flag: "--junit".into(),
                path: d.path().into()
            })
        );
        assert_eq!(
            check_dir("--out", &file).unwrap_err().to_string(),
            format!("--out {}: exists and is not a directory", file.display())
        );
        let under = file.join("x/r.json");
        assert_eq!(
            check_file("--json", &under).unwrap_err().to_string(),
            format!(
                "--json {}: {} is a file, not a directory",
                under.display(),
                file.display()
            )
        );
    }
}

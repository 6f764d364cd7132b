//! One validator per section of `matrix.yaml`, each from its raw
//! [`super::schema`] part to the validated [`super::model`] part, reporting
//! errors at the file, line and column of the offending entry.
//! [`super::model::validate`] calls them in file order; they know nothing
//! of running a cell.

mod cells;
mod kernels;
mod overrides;
mod shares;
mod suites;
mod topologies;

pub(super) use cells::{cells, CellDefaults};
pub(super) use kernels::kernels;
pub(super) use overrides::overrides;
pub(super) use shares::shares;
pub(super) use suites::suites;
pub(super) use topologies::topologies;

use super::glob;
use super::locate::{self, Pos};
use super::model::{Kernel, NamedTopology, Suite};
use super::schema::RawRule;
use super::MatrixError;
use std::collections::HashSet;
use std::path::Path;

/// The file being validated, for error positions.
pub(super) struct Ctx<'a> {
    /// The matrix file.
    pub(super) path: &'a Path,
    /// Its text.
    pub(super) text: &'a str,
}

impl Ctx<'_> {
    fn err(&self, pos: Option<Pos>, message: String) -> MatrixError {
        match pos {
            Some((line, column)) => MatrixError::At {
                path: self.path.to_path_buf(),
                line,
                column,
                message,
            },
            None => MatrixError::File {
                path: self.path.to_path_buf(),
                message,
            },
        }
    }

    fn at_item(&self, sect: &str, name: &str, field: Option<&str>, msg: String) -> MatrixError {
        self.err(locate::item(self.text, sect, name, field), msg)
    }

    /// The matrix file's directory: relative share paths start there.
    fn dir(&self) -> &Path {
        self.path.parent().unwrap_or(Path::new(""))
    }
}

fn check_name(what: &str, name: &str) -> Result<(), String> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c));
    if ok {
        Ok(())
    } else {
        Err(format!(
            "{what} name {name:?}: expected 1-64 characters of [A-Za-z0-9._-]"
        ))
    }
}

/// The entries of one section seen so far: each name must be valid and
/// given once.
struct Declared {
    /// The section (`kernels`).
    section: &'static str,
    /// What one entry is called in messages (`kernel`).
    what: &'static str,
    seen: HashSet<String>,
}

impl Declared {
    fn new(section: &'static str, what: &'static str) -> Declared {
        Declared {
            section,
            what,
            seen: HashSet::new(),
        }
    }

    /// An error unless the section has an entry.
    fn at_least_one<T>(&self, cx: &Ctx, entries: &[T]) -> Result<(), MatrixError> {
        if entries.is_empty() {
            let (section, what) = (self.section, self.what);
            return Err(cx.err(
                locate::section(cx.text, section),
                format!("{section}: expected at least one {what}"),
            ));
        }
        Ok(())
    }

    /// Checks the next entry's name.
    fn add(&mut self, cx: &Ctx, name: &str) -> Result<(), MatrixError> {
        let (section, what) = (self.section, self.what);
        check_name(what, name).map_err(|m| cx.at_item(section, name, None, m))?;
        if !self.seen.insert(name.to_string()) {
            return Err(cx.at_item(
                section,
                name,
                None,
                format!("{what} {name:?} is declared twice"),
            ));
        }
        Ok(())
    }
}

/// The validated kernels, topologies and suites that the globs of
/// `cells:` and `overrides:` rules name.
pub(super) struct Axes<'a> {
    /// Kernels, in file order.
    pub(super) kernels: &'a [Kernel],
    /// Topologies, in file order.
    pub(super) topologies: &'a [NamedTopology],
    /// Suites, in file order (implicit built-ins after).
    pub(super) suites: &'a [Suite],
}

impl Axes<'_> {
    /// The first glob of `rule` that matches no name, as (what, glob,
    /// known names); a glob that matches nothing is a typo.
    fn unmatched<'r>(&'r self, rule: &'r RawRule) -> Option<(&'static str, &'r str, Vec<&'r str>)> {
        [
            (
                "kernel",
                &rule.kernel,
                self.kernels
                    .iter()
                    .map(|k| k.name.as_str())
                    .collect::<Vec<_>>(),
            ),
            (
                "topology",
                &rule.topology,
                self.topologies.iter().map(|t| t.name.as_str()).collect(),
            ),
            (
                "suite",
                &rule.suite,
                self.suites.iter().map(|s| s.name.as_str()).collect(),
            ),
        ]
        .into_iter()
        .find_map(|(what, pat, known)| {
            let p = pat.as_deref()?;
            (!known.iter().any(|n| glob::matches(p, n))).then_some((what, p, known))
        })
    }
}

/// Whether every glob `rule` gives matches the cell's names.
fn rule_matches(rule: &RawRule, kernel: &str, topology: &str, suite: &str) -> bool {
    rule.kernel
        .as_deref()
        .is_none_or(|p| glob::matches(p, kernel))
        && rule
            .topology
            .as_deref()
            .is_none_or(|p| glob::matches(p, topology))
        && rule
            .suite
            .as_deref()
            .is_none_or(|p| glob::matches(p, suite))
}

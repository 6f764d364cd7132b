//! Command-line groups more than one front door takes (`run` and
//! `matrix`): clap types whose values are already the typed ones their
//! door uses (the parsers run at the edge, before anything is fetched).

use crate::reporter::kcidb;
use std::path::PathBuf;

/// `--history FILE|none` of `run` and `matrix`.
#[derive(Debug, Clone, clap::Args)]
pub struct HistoryArgs {
    /// The results history to add this run to (SQLite, docs/history.md;
    /// `harness history`, `harness compare`), or `none` (default:
    /// <out>/history.sqlite).
    #[arg(long, value_name = "FILE|none")]
    pub history: Option<String>,
}

impl HistoryArgs {
    /// Where the run's history goes.
    pub fn target(&self) -> crate::history::Target {
        self.history.as_deref().map_or(
            crate::history::Target::Default,
            crate::history::Target::parse,
        )
    }
}

/// `--profile [N]` of `run` and `matrix`.
#[derive(Debug, Clone, clap::Args)]
pub struct ProfileArgs {
    /// After the summary, the N costliest items (cell phases and test
    /// binaries, with their share of the run's time; README "Where the
    /// time goes").
    #[arg(long, value_name = "N", num_args = 0..=1, default_missing_value = "20")]
    pub profile: Option<usize>,
}

/// `--kcidb FILE --origin NAME [--log-base-url URL]` of `run` and `matrix`.
#[derive(Debug, Clone, clap::Args)]
pub struct KcidbArgs {
    /// KernelCI KCIDB document of the run (schema 5.3; docs/kcidb.md),
    /// rewritten as cells finish. Needs --origin.
    #[arg(long, value_name = "FILE", requires = "origin")]
    pub kcidb: Option<PathBuf>,
    /// The CI system's KCIDB origin name ([a-z0-9_]+), the prefix of every
    /// id in the --kcidb document.
    #[arg(long, value_name = "NAME", requires = "kcidb", value_parser = origin)]
    pub origin: Option<String>,
    /// Where the cell directories are published: the base of the
    /// console-log, JUnit, patch and build-log URLs of the --kcidb document
    /// (none without it).
    #[arg(long, value_name = "URL", requires = "kcidb", value_parser = base_url)]
    pub log_base_url: Option<String>,
}

impl KcidbArgs {
    /// The document's path and options, when asked for.
    pub fn output(&self) -> Option<(PathBuf, kcidb::Options)> {
        let path = self.kcidb.clone()?;
        let opts = kcidb::Options {
            origin: self.origin.clone()?,
            log_base_url: self.log_base_url.clone(),
        };
        Some((path, opts))
    }
}

/// `--origin`: checked before anything runs (a usage error, exit 2).
pub fn origin(s: &str) -> Result<String, String> {
    kcidb::check_origin(s).map_err(|_| kcidb::ORIGIN_RULE.to_string())
}

/// `--log-base-url`.
pub fn base_url(s: &str) -> Result<String, String> {
    kcidb::check_base_url(s).map_err(|_| kcidb::BASE_URL_RULE.to_string())
}

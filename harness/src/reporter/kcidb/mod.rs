//! The KCIDB reporter (`--kcidb FILE`): the run as a KernelCI KCIDB I/O
//! document (schema 5.3), rewritten atomically as cells finish; and
//! [`convert`], the same document from a JSON results file written earlier
//! (`harness report kcidb`), which [`submit`] can post to a KCIDB-ng
//! service. Both read the cells through the results file's shape
//! ([`results`]), so a run's document and its later conversion agree.
//! The mapping is `docs/kcidb.md`.

pub mod document;
pub mod facts;
pub mod mapping;
pub mod results;
pub mod submit;

pub use facts::kernel_facts;

use super::{write_atomic, ReportError, Reporter};
use crate::events::Event;
use std::path::{Path, PathBuf};

/// What the document says of its submitter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Options {
    /// The CI system's name in KCIDB (`[a-z0-9_]+`), the prefix of every id.
    pub origin: String,
    /// Where the cell directories, patches and build logs are published:
    /// the base of `output_files`, `patchset_files` and `log_url`.
    pub log_base_url: Option<String>,
}

/// Why a document could not be made.
#[derive(Debug, thiserror::Error)]
pub enum KcidbError {
    /// An origin KCIDB does not accept.
    #[error("--origin {0:?}: {ORIGIN_RULE}")]
    BadOrigin(String),
    /// A `--log-base-url` that is not a URL.
    #[error("--log-base-url {0:?}: {BASE_URL_RULE}")]
    BadBaseUrl(String),
    /// The results file could not be read.
    #[error("cannot read {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The results file is not a results file.
    #[error("{}: not a JSON results file (docs/results.md): {message}", path.display())]
    Parse {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// Writing the document failed.
    #[error(transparent)]
    Write(#[from] ReportError),
    /// Submitting it failed.
    #[error(transparent)]
    Submit(#[from] submit::SubmitError),
}

impl From<KcidbError> for crate::error::Error {
    fn from(e: KcidbError) -> Self {
        let usage = match &e {
            KcidbError::Submit(s) => s.is_usage(),
            KcidbError::Write(_) => false,
            _ => true,
        };
        if usage {
            crate::error::Error::usage(e)
        } else {
            crate::error::Error::infra(e)
        }
    }
}

/// What an origin must be.
pub const ORIGIN_RULE: &str =
    "expected the CI system's KCIDB origin name: lower-case letters, digits and '_' ([a-z0-9_]+)";
/// What a `--log-base-url` must be.
pub const BASE_URL_RULE: &str =
    "expected an http:// or https:// URL without spaces, query or credentials";

/// Checks an origin: `[a-z0-9_]+`, as KCIDB's schema wants.
pub fn check_origin(origin: &str) -> Result<String, KcidbError> {
    let ok = !origin.is_empty()
        && origin
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
    if ok {
        Ok(origin.to_string())
    } else {
        Err(KcidbError::BadOrigin(origin.to_string()))
    }
}

/// Checks a `--log-base-url`: `http(s)://host...`, no whitespace, no
/// credentials.
pub fn check_base_url(url: &str) -> Result<String, KcidbError> {
    let rest = url
        .strip_prefix("https://")
        .or_else(|| url.strip_prefix("http://"));
    let authority = rest.map(|r| r.split(['/', '?', '#']).next().unwrap_or(""));
    let ok = authority.is_some_and(|a| !a.is_empty() && !a.contains('@'))
        && !url
            .contains(|c: char| c.is_whitespace() || c.is_control() || "?#\"<>\\^`{|}".contains(c));
    if ok {
        Ok(url.to_string())
    } else {
        Err(KcidbError::BadBaseUrl(url.to_string()))
    }
}

impl Options {
    /// Checked options.
    pub fn new(origin: &str, log_base_url: Option<&str>) -> Result<Options, KcidbError> {
        Ok(Options {
            origin: check_origin(origin)?,
            log_base_url: log_base_url.map(check_base_url).transpose()?,
        })
    }
}

/// The document's bytes: compact JSON and a newline.
pub fn render(results: &results::Results, opts: &Options) -> Vec<u8> {
    let mut bytes = serde_json::to_vec(&document::document(results, opts)).unwrap_or_default();
    bytes.push(b'\n');
    bytes
}

/// The document of the JSON results file at `path`.
pub fn convert(path: &Path, opts: &Options) -> Result<Vec<u8>, KcidbError> {
    let text = std::fs::read(path).map_err(|source| KcidbError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    let parse = |message: String| KcidbError::Parse {
        path: path.to_path_buf(),
        message,
    };
    let value: serde_json::Value =
        serde_json::from_slice(&text).map_err(|e| parse(e.to_string()))?;
    if !value.is_object() {
        return Err(parse("not a JSON object".into()));
    }
    let results: results::Results =
        serde_json::from_value(value).map_err(|e| parse(e.to_string()))?;
    if results.schema_version != super::json::SCHEMA_VERSION {
        return Err(parse(format!(
            "schema_version {}, this harness reads {}",
            results.schema_version,
            super::json::SCHEMA_VERSION
        )));
    }
    Ok(render(&results, opts))
}

/// What `harness report kcidb` was asked to do.
#[derive(Debug, Clone)]
pub struct ReportRequest {
    /// The JSON results file.
    pub results: PathBuf,
    /// Origin and log base URL.
    pub options: Options,
    /// Where to write the document (stdout when neither this nor `submit`).
    pub output: Option<PathBuf>,
    /// The KCIDB-ng service to post it to.
    pub submit: Option<String>,
    /// How long to wait for the service to process it.
    pub wait: std::time::Duration,
}

/// Runs `harness report kcidb`: everything checked first (origin, URL,
/// token), then the document of the results file, written and submitted.
/// Returns the document when it is for stdout (no `output`, no `submit`):
/// the front door writes it.
pub fn report(
    req: &ReportRequest,
    say: &mut dyn FnMut(&str),
) -> Result<Option<Vec<u8>>, KcidbError> {
    let opts = Options::new(&req.options.origin, req.options.log_base_url.as_deref())?;
    let target = match &req.submit {
        Some(url) => {
            submit::endpoints(url)?;
            Some((url, submit::Token::from_env(submit::TOKEN_ENV)?))
        }
        None => None,
    };
    let doc = convert(&req.results, &opts)?;
    if let Some(p) = &req.output {
        write_atomic(p, &doc)?;
    }
    if let Some((url, token)) = target {
        let poll = submit::Poll {
            timeout: req.wait,
            interval: std::time::Duration::from_secs(2).min(req.wait),
        };
        submit::submit(url, &token, &doc, poll, say)?;
        return Ok(None);
    }
    Ok(req.output.is_none().then_some(doc))
}

/// `value` as a reader of the JSON results file gets it: numbers parsed
/// from the same text (serde_json's float parsing is best-effort, so a
/// value that skipped the text could differ in its last bit from a later
/// `convert`).
fn as_in_file<T: serde::Serialize + serde::de::DeserializeOwned + Default>(value: &T) -> T {
    serde_json::to_string(value)
        .ok()
        .and_then(|text| serde_json::from_str(&text).ok())
        .unwrap_or_default()
}

/// Writes the document as cells finish (only finished cells are in it:
/// a placeholder would get other ids than the cell it stands for).
pub struct Kcidb {
    path: PathBuf,
    opts: Options,
    results: results::Results,
    slots: Vec<Option<results::Cell>>,
}

impl Kcidb {
    /// The document at `path`.
    pub fn new(path: &Path, opts: Options) -> Kcidb {
        Kcidb {
            path: path.to_path_buf(),
            opts,
            results: results::Results::default(),
            slots: Vec::new(),
        }
    }

    fn write(&mut self) -> Result<(), ReportError> {
        self.results.cells = self.slots.iter().flatten().cloned().collect();
        write_atomic(&self.path, &render(&self.results, &self.opts))
    }
}

impl Reporter for Kcidb {
    fn report(&mut self, event: &Event) -> Result<(), ReportError> {
        match event {
            Event::RunStarted { cells, host, at } => {
                self.results.schema_version = super::json::SCHEMA_VERSION;
                self.results.run = as_in_file(&super::json::run_meta(host, *at));
                self.slots = vec![None; cells.len()];
                self.write()
            }
            Event::CellFinished(o) => {
                let cell: results::Cell = as_in_file(&super::json::cell(o));
                let i = o.meta.index;
                if i >= self.slots.len() {
                    self.slots.resize(i + 1, None);
                }
                self.slots[i] = Some(cell);
                self.write()
            }
            Event::RunFinished { .. } => self.write(),
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origins_and_base_urls_are_checked() {
        assert!(check_origin("futex_harness_ci2").is_ok());
        for bad in ["", "Futex", "a-b", "a b", "a:b", "ü"] {
            assert!(check_origin(bad).is_err(), "{bad}");
        }
        assert!(check_base_url("https://logs.example/run-1").is_ok());
        assert!(check_base_url("http://127.0.0.1:8000/").is_ok());
        for bad in [
            "logs",
            "https://",
            "https://u:p@h/",
            "https://h/a b",
            "file:///x",
        ] {
            assert!(check_base_url(bad).is_err(), "{bad}");
        }
    }
}

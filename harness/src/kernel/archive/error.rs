//! The error of the Debian archive client and of the kernel selection built
//! on it: one enum, because every caller converts a single [`DebianError`].

use std::io;
use std::path::PathBuf;

use super::MIRROR_ENV;
use crate::kernel::cache::CacheError;
use crate::kernel::deb::DebError;
// Only for the two kernel-selection variants' messages.
use crate::kernel::debian::compact_versions;

/// Errors of Debian kernel discovery and download.
#[derive(Debug, thiserror::Error)]
pub enum DebianError {
    /// No mirror given and none found in the apt configuration.
    #[error(
        "no Debian mirror found: pass --debian-mirror URL or set {MIRROR_ENV}; \
         no active Debian main-archive entry in the apt files read: {}",
        list_paths(read)
    )]
    NoMirror {
        /// The apt files that were looked at (existing or not).
        read: Vec<PathBuf>,
    },
    /// The mirror URL is not usable.
    #[error("invalid Debian mirror URL {url:?}: {reason}")]
    InvalidMirror {
        /// The URL given.
        url: String,
        /// Why it was rejected.
        reason: &'static str,
    },
    /// An HTTP request failed before a response arrived.
    #[error("GET {url}: {source}")]
    Http {
        /// The URL requested.
        url: String,
        /// The transport error.
        #[source]
        source: Box<ureq::Error>,
    },
    /// The server answered with an error status.
    #[error("GET {url}: HTTP status {status}")]
    HttpStatus {
        /// The URL requested.
        url: String,
        /// The status code.
        status: u16,
    },
    /// Reading a response body (or decompressing it) failed.
    #[error("GET {url}: reading the body: {source}")]
    Transfer {
        /// The URL requested.
        url: String,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
    /// A cache operation failed.
    #[error(transparent)]
    Cache(#[from] CacheError),
    /// A local file operation failed.
    #[error("{path}: {source}")]
    Io {
        /// The file concerned.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
    /// `gpgv` rejected the suite's `InRelease`.
    #[error("bad signature on {url} (suite {suite}): {detail}")]
    BadSignature {
        /// The suite.
        suite: String,
        /// The `InRelease` URL.
        url: String,
        /// What `gpgv` said.
        detail: String,
    },
    /// `InRelease` does not list the package index.
    #[error("{url} (suite {suite}) lists no SHA256 for {wanted}")]
    MissingIndex {
        /// The suite.
        suite: String,
        /// The `InRelease` URL.
        url: String,
        /// The index file looked for.
        wanted: String,
    },
    /// A download did not match its expected SHA-256 or size.
    #[error(
        "checksum mismatch for {url}: expected sha256 {expected_sha256} ({expected_size} bytes), \
         got {actual_sha256} ({actual_size} bytes)"
    )]
    Checksum {
        /// What was downloaded.
        url: String,
        /// The SHA-256 the signed metadata promised.
        expected_sha256: String,
        /// The SHA-256 of what arrived.
        actual_sha256: String,
        /// The size the signed metadata promised.
        expected_size: u64,
        /// The size of what arrived.
        actual_size: u64,
    },
    /// A cached index file could not be parsed.
    #[error("corrupt cached index {path}: {detail}")]
    CorruptCache {
        /// The file.
        path: PathBuf,
        /// The parse error.
        detail: String,
    },
    /// No kernel matches the version asked for.
    #[error(
        "no Debian {flavour} kernel matches {asked:?}; available: {}",
        compact_versions(available)
    )]
    UnknownVersion {
        /// The flavour searched (`cloud-amd64`, `cloud-arm64`).
        flavour: &'static str,
        /// What was asked for.
        asked: String,
        /// The upstream versions that exist, ascending.
        available: Vec<String>,
    },
    /// No suite has the package.
    #[error("package {name} not found in suites {}", suites.join(", "))]
    UnknownPackage {
        /// The package name.
        name: String,
        /// The suites searched.
        suites: Vec<String>,
    },
    /// Every suite's index failed to load.
    #[error("no suite index could be loaded from {mirror}: {}", errors.join("; "))]
    NoSuites {
        /// The mirror.
        mirror: String,
        /// One message per suite.
        errors: Vec<String>,
    },
    /// Reading a `.deb` failed.
    #[error(transparent)]
    Deb(#[from] DebError),
}

impl DebianError {
    /// Whether retrying the same request may succeed (network trouble,
    /// 5xx/408/429, truncated body).
    pub fn is_transient(&self) -> bool {
        match self {
            DebianError::Http { source, .. } => matches!(
                **source,
                ureq::Error::Io(_)
                    | ureq::Error::Timeout(_)
                    | ureq::Error::ConnectionFailed
                    | ureq::Error::HostNotFound
                    | ureq::Error::BodyStalled
                    | ureq::Error::Protocol(_)
            ),
            DebianError::HttpStatus { status, .. } => {
                *status == 408 || *status == 429 || *status >= 500
            }
            DebianError::Transfer { .. } => true,
            _ => false,
        }
    }
}

fn list_paths(paths: &[PathBuf]) -> String {
    paths
        .iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

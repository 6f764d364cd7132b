//! Debian prebuilt kernels.
//!
//! [`DebianMirror`] finds Debian's archive (explicit URL, `$HARNESS_DEBIAN_MIRROR`,
//! or the machine's apt configuration), lists the `cloud-amd64` kernels of
//! the suites `sid`, `trixie-backports` and `bookworm-backports`, and
//! downloads one into the [`Cache`], returning the path of its `vmlinuz`.
//!
//! Trust chain: the suite's `InRelease` is checked with `gpgv` against the
//! Debian archive keyring (skipped with a warning when `gpgv` or the keyring
//! is missing; a bad signature is an error), `Packages.xz` against the
//! SHA-256 in `InRelease`, the `.deb` against the SHA-256 in `Packages`.
//!
//! Package names: up to 6.18 the vmlinuz is in `linux-image-<abi>` at
//! `boot/vmlinuz-<abi>`; from 6.19 on `linux-image-<abi>` is a metapackage
//! and the vmlinuz is in `linux-binary-<abi>` at
//! `usr/lib/modules/<abi>/vmlinuz`. Both are handled.

use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::fs;
use std::io::{self, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering as AtomicOrdering};
use std::time::{Duration, SystemTime};

use super::apt::{self, PackageEntry};
use super::cache::{sha256_hex, Cache, CacheError, HashingReader, WriteError};
pub use super::deb::{extract_file, DebError};

/// Environment variable naming the mirror (below an explicit option, above
/// the apt configuration).
pub const MIRROR_ENV: &str = "HARNESS_DEBIAN_MIRROR";

/// The suites searched for kernels, in order of preference.
pub const DEFAULT_SUITES: [&str; 3] = ["sid", "trixie-backports", "bookworm-backports"];

/// The keyring `InRelease` signatures are checked against.
pub const DEFAULT_KEYRING: &str = "/usr/share/keyrings/debian-archive-keyring.gpg";

/// The kernel flavour used (boots fastest, has what the suites need built in).
pub const FLAVOUR: &str = "cloud-amd64";

/// The architecture whose package index is read.
pub const ARCH: &str = "amd64";

/// How long a suite's `InRelease` (and so its index) is reused without
/// asking the mirror again.
pub const DEFAULT_INDEX_TTL: Duration = Duration::from_secs(6 * 3600);

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
        "no Debian {FLAVOUR} kernel matches {asked:?}; available: {}",
        compact_versions(available)
    )]
    UnknownVersion {
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

/// Renders versions compactly, grouping patch levels by `major.minor`:
/// `6.12.{43,95}, 6.18.15, 7.0.{9,10}`. Input order is kept within groups.
pub fn compact_versions(versions: &[String]) -> String {
    let mut groups: Vec<(String, Vec<String>)> = Vec::new();
    for v in versions {
        let (head, tail) = match v.match_indices('.').nth(1) {
            Some((i, _)) => (v[..i].to_string(), Some(v[i + 1..].to_string())),
            None => (v.clone(), None),
        };
        match (groups.last_mut(), tail) {
            (Some((h, tails)), Some(t)) if *h == head && !tails.is_empty() => tails.push(t),
            (_, Some(t)) => groups.push((head, vec![t])),
            (_, None) => groups.push((head, Vec::new())),
        }
    }
    if groups.is_empty() {
        return "none".to_string();
    }
    groups
        .into_iter()
        .map(|(h, tails)| match tails.len() {
            0 => h,
            1 => format!("{h}.{}", tails[0]),
            _ => format!("{h}.{{{}}}", tails.join(",")),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// Download progress, for drawing a progress bar.
#[derive(Debug, Clone, Copy)]
pub struct Progress<'a> {
    /// What is being downloaded (a file name).
    pub what: &'a str,
    /// Bytes received so far.
    pub done: u64,
    /// Expected total, when known.
    pub total: Option<u64>,
}

/// Where a [`DebianMirror`]'s URL came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MirrorOrigin {
    /// Given explicitly (`--debian-mirror`).
    Explicit,
    /// From `$HARNESS_DEBIAN_MIRROR`.
    Env,
    /// From this apt sources file.
    AptConfig(PathBuf),
}

/// A kernel package available from the mirror.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DebianKernel {
    /// Upstream version, `7.3.4`.
    pub version: String,
    /// Debian ABI name, `7.3.4+deb13-cloud-amd64` (what `uname -r` says).
    pub abi: String,
    /// The suite it was found in.
    pub suite: String,
    /// The package holding the vmlinuz (`linux-binary-...` or `linux-image-...`).
    pub package: String,
    /// The package's Debian version (`7.3.4-1~bpo13+1`).
    pub deb_version: String,
    /// Path of the `.deb` relative to the mirror root.
    pub filename: String,
    /// Size of the `.deb` in bytes.
    pub size: u64,
    /// SHA-256 of the `.deb`.
    pub sha256: String,
}

impl DebianKernel {
    /// Orders by upstream version, then ABI, then Debian version (dpkg rules).
    pub fn cmp_version(&self, other: &DebianKernel) -> Ordering {
        apt::dpkg_version_cmp(&self.version, &other.version)
            .then_with(|| apt::dpkg_version_cmp(&self.abi, &other.abi))
            .then_with(|| apt::dpkg_version_cmp(&self.deb_version, &other.deb_version))
    }

    fn entry(&self) -> PackageEntry {
        PackageEntry {
            package: self.package.clone(),
            version: self.deb_version.clone(),
            filename: self.filename.clone(),
            size: self.size,
            sha256: self.sha256.clone(),
        }
    }
}

/// A kernel image in the cache.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelImage {
    /// The cached vmlinuz (a bzImage).
    pub path: PathBuf,
    /// Upstream version, `7.3.4`.
    pub version: String,
    /// Debian ABI name, `7.3.4+deb13-cloud-amd64`.
    pub abi: String,
    /// The package it came from.
    pub package: String,
    /// The suite the package came from.
    pub suite: String,
}

/// Splits a kernel package name into (abi, preference rank); lower rank is
/// preferred. `None` for packages that do not carry a `FLAVOUR` vmlinuz.
fn parse_kernel_package(name: &str) -> Option<(&str, u8)> {
    let (rest, rank) = if let Some(r) = name.strip_prefix("linux-binary-") {
        (r, 0)
    } else if let Some(r) = name.strip_prefix("linux-image-") {
        match r.strip_suffix("-unsigned") {
            Some(r) => (r, 2),
            None => (r, 1),
        }
    } else {
        return None;
    };
    let base = rest.strip_suffix(FLAVOUR)?.strip_suffix('-')?;
    base.starts_with(|c: char| c.is_ascii_digit())
        .then_some((rest, rank))
}

/// Upstream version of an ABI name: `7.3.4+deb13-cloud-amd64` -> `7.3.4`.
pub fn upstream_of_abi(abi: &str) -> &str {
    abi.split(['+', '-']).next().unwrap_or(abi)
}

/// The kernels among a suite's package entries: one per ABI, from the
/// package that holds the vmlinuz (`linux-binary` over `linux-image` over
/// `linux-image-...-unsigned`; within a package the highest version).
pub fn kernels_from_index(suite: &str, entries: &[PackageEntry]) -> Vec<DebianKernel> {
    let mut best: BTreeMap<&str, (u8, &PackageEntry)> = BTreeMap::new();
    for e in entries {
        let Some((abi, rank)) = parse_kernel_package(&e.package) else {
            continue;
        };
        let better = match best.get(abi) {
            None => true,
            Some((r, old)) => {
                rank < *r
                    || (rank == *r
                        && apt::dpkg_version_cmp(&e.version, &old.version) == Ordering::Greater)
            }
        };
        if better {
            best.insert(abi, (rank, e));
        }
    }
    let mut out: Vec<DebianKernel> = best
        .into_iter()
        .map(|(abi, (_, e))| DebianKernel {
            version: upstream_of_abi(abi).to_string(),
            abi: abi.to_string(),
            suite: suite.to_string(),
            package: e.package.clone(),
            deb_version: e.version.clone(),
            filename: e.filename.clone(),
            size: e.size,
            sha256: e.sha256.clone(),
        })
        .collect();
    out.sort_by(DebianKernel::cmp_version);
    out
}

/// Chooses the kernel for `asked`: an exact upstream version (`7.3.4`), a
/// prefix (`7.3` = newest 7.3.x, `7` = newest 7.x), or an ABI
/// (`7.3.4+deb13-cloud-amd64`, or without the flavour: `7.3.4+deb13`). An
/// optional `debian:` prefix is ignored. Ties go to the newest ABI/Debian
/// version.
pub fn select_kernel<'a>(
    kernels: &'a [DebianKernel],
    asked: &str,
) -> Result<&'a DebianKernel, DebianError> {
    let q = asked.trim();
    let q = q.strip_prefix("debian:").unwrap_or(q);
    let found = if q.contains(['+', '-']) {
        kernels
            .iter()
            .filter(|k| {
                k.abi == q
                    || k.abi
                        .strip_prefix(q)
                        .and_then(|rest| rest.strip_prefix('-'))
                        .is_some_and(|rest| rest == FLAVOUR)
            })
            .max_by(|a, b| a.cmp_version(b))
    } else {
        let want: Vec<&str> = q.split('.').collect();
        kernels
            .iter()
            .filter(|k| {
                let have: Vec<&str> = k.version.split('.').collect();
                !q.is_empty() && have.len() >= want.len() && have[..want.len()] == want[..]
            })
            .max_by(|a, b| a.cmp_version(b))
    };
    found.ok_or_else(|| {
        let mut available: Vec<String> = kernels.iter().map(|k| k.version.clone()).collect();
        available.sort_by(|a, b| apt::dpkg_version_cmp(a, b));
        available.dedup();
        DebianError::UnknownVersion {
            asked: asked.to_string(),
            available,
        }
    })
}

/// A Debian archive mirror plus the policy for using it.
#[derive(Debug, Clone)]
pub struct DebianMirror {
    url: String,
    origin: MirrorOrigin,
    suites: Vec<String>,
    keyring: PathBuf,
    index_ttl: Duration,
    retries: u32,
    retry_delay: Duration,
    agent: ureq::Agent,
}

static WARNED_UNVERIFIED: AtomicBool = AtomicBool::new(false);

impl DebianMirror {
    /// A mirror at `url` (the directory holding `dists/` and `pool/`).
    pub fn new(url: &str, origin: MirrorOrigin) -> Result<DebianMirror, DebianError> {
        let url = url.trim().trim_end_matches('/');
        if !(url.starts_with("http://") || url.starts_with("https://")) {
            return Err(DebianError::InvalidMirror {
                url: url.to_string(),
                reason: "only http:// and https:// are supported",
            });
        }
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .timeout_connect(Some(Duration::from_secs(20)))
            .timeout_recv_response(Some(Duration::from_secs(60)))
            .timeout_per_read(Some(Duration::from_secs(60)))
            .user_agent(concat!("futex-harness/", env!("CARGO_PKG_VERSION")))
            .build()
            .into();
        Ok(DebianMirror {
            url: url.to_string(),
            origin,
            suites: DEFAULT_SUITES.iter().map(|s| s.to_string()).collect(),
            keyring: PathBuf::from(DEFAULT_KEYRING),
            index_ttl: DEFAULT_INDEX_TTL,
            retries: 2,
            retry_delay: Duration::from_secs(1),
            agent,
        })
    }

    /// Finds the mirror: `explicit` (from `--debian-mirror`), else
    /// `$HARNESS_DEBIAN_MIRROR`, else the machine's apt configuration.
    pub fn discover(explicit: Option<&str>) -> Result<DebianMirror, DebianError> {
        let env = std::env::var(MIRROR_ENV).ok();
        Self::discover_in(explicit, env.as_deref(), Path::new("/"))
    }

    /// [`DebianMirror::discover`] with the environment value and the root of
    /// the apt configuration (`/` normally) given.
    pub fn discover_in(
        explicit: Option<&str>,
        env: Option<&str>,
        apt_root: &Path,
    ) -> Result<DebianMirror, DebianError> {
        if let Some(url) = explicit.filter(|u| !u.trim().is_empty()) {
            return Self::new(url, MirrorOrigin::Explicit);
        }
        if let Some(url) = env.filter(|u| !u.trim().is_empty()) {
            return Self::new(url, MirrorOrigin::Env);
        }
        let files = apt::apt_source_files(apt_root);
        let sources: Vec<_> = files
            .iter()
            .flat_map(|f| apt::read_sources_file(f))
            .collect();
        match apt::pick_debian_mirror(&sources) {
            Some(s) => Self::new(&s.uri, MirrorOrigin::AptConfig(s.file.clone())),
            None => Err(DebianError::NoMirror { read: files }),
        }
    }

    /// The mirror URL (no trailing slash).
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Where the URL came from.
    pub fn origin(&self) -> &MirrorOrigin {
        &self.origin
    }

    /// The suites searched, in order of preference.
    pub fn suites(&self) -> &[String] {
        &self.suites
    }

    /// Searches these suites instead of [`DEFAULT_SUITES`].
    pub fn with_suites<S: Into<String>>(mut self, suites: impl IntoIterator<Item = S>) -> Self {
        self.suites = suites.into_iter().map(Into::into).collect();
        self
    }

    /// Checks `InRelease` against this keyring instead of [`DEFAULT_KEYRING`].
    pub fn with_keyring(mut self, keyring: impl Into<PathBuf>) -> Self {
        self.keyring = keyring.into();
        self
    }

    /// Reuses a cached `InRelease` for this long instead of
    /// [`DEFAULT_INDEX_TTL`]. Zero means ask the mirror every time (the index
    /// itself is still reused when `InRelease` did not change).
    pub fn with_index_ttl(mut self, ttl: Duration) -> Self {
        self.index_ttl = ttl;
        self
    }

    /// Retries transient failures `retries` times, waiting `delay`, then
    /// twice `delay`, and so on (default: 2 retries, 1 s).
    pub fn with_retries(mut self, retries: u32, delay: Duration) -> Self {
        self.retries = retries;
        self.retry_delay = delay;
        self
    }

    /// Every `cloud-amd64` kernel in the configured suites, ascending by
    /// version. A suite that fails to load is skipped with a warning; if all
    /// fail, the error says why for each.
    pub fn available_kernels(&self, cache: &Cache) -> Result<Vec<DebianKernel>, DebianError> {
        self.available_kernels_with_progress(cache, &mut |_| {})
    }

    /// [`DebianMirror::available_kernels`] reporting download progress.
    pub fn available_kernels_with_progress(
        &self,
        cache: &Cache,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<Vec<DebianKernel>, DebianError> {
        let mut out: Vec<DebianKernel> = Vec::new();
        for (suite, entries) in self.load_indexes(cache, progress)? {
            for k in kernels_from_index(&suite, &entries) {
                // Same ABI in several suites: the earlier suite wins.
                if !out.iter().any(|o| o.abi == k.abi) {
                    out.push(k);
                }
            }
        }
        out.sort_by(DebianKernel::cmp_version);
        Ok(out)
    }

    /// Downloads (or finds in the cache) the kernel `version` (see
    /// [`select_kernel`]) and returns its vmlinuz. The `.deb` is removed once
    /// the vmlinuz is extracted.
    pub fn fetch(&self, version: &str, cache: &Cache) -> Result<KernelImage, DebianError> {
        self.fetch_with_progress(version, cache, &mut |_| {})
    }

    /// [`DebianMirror::fetch`] reporting download progress.
    pub fn fetch_with_progress(
        &self,
        version: &str,
        cache: &Cache,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<KernelImage, DebianError> {
        let kernels = self.available_kernels_with_progress(cache, progress)?;
        let k = select_kernel(&kernels, version)?.clone();
        let rel = format!("debian/kernels/{}/vmlinuz", k.abi);
        let image = KernelImage {
            path: cache.path(&rel),
            version: k.version.clone(),
            abi: k.abi.clone(),
            package: k.package.clone(),
            suite: k.suite.clone(),
        };
        let _lock = cache.lock(&format!("debian-kernel-{}", k.abi))?;
        if image.path.is_file() {
            tracing::debug!(path = %image.path.display(), "Debian kernel cached");
            return Ok(image);
        }
        let deb = self.download_deb(&k.entry(), cache, progress)?;
        let new_layout = format!("usr/lib/modules/{}/vmlinuz", k.abi);
        let old_layout = format!("boot/vmlinuz-{}", k.abi);
        let pred = |p: &str| {
            super::deb::member_matches(p, &new_layout) || super::deb::member_matches(p, &old_layout)
        };
        let wanted = format!("{new_layout} or {old_layout}");
        cache
            .write_atomic_with(&rel, |f| {
                super::deb::extract_matching(&deb, &pred, &wanted, f).map(|_| ())
            })
            .map_err(|e| match e {
                WriteError::Cache(e) => DebianError::Cache(e),
                WriteError::Producer(e) => DebianError::Deb(e),
            })?;
        if let Err(e) = fs::remove_file(&deb) {
            tracing::debug!("removing {}: {e}", deb.display());
        }
        tracing::info!(abi = %k.abi, path = %image.path.display(), "Debian kernel extracted");
        Ok(image)
    }

    /// Downloads (or finds in the cache) the newest version of package
    /// `package_name` (e.g. `linux-modules-7.3.4+deb13-cloud-amd64`) in the
    /// configured suites; returns the verified `.deb` in the cache.
    pub fn fetch_package(&self, package_name: &str, cache: &Cache) -> Result<PathBuf, DebianError> {
        self.fetch_package_with_progress(package_name, cache, &mut |_| {})
    }

    /// [`DebianMirror::fetch_package`] reporting download progress.
    pub fn fetch_package_with_progress(
        &self,
        package_name: &str,
        cache: &Cache,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<PathBuf, DebianError> {
        let mut best: Option<PackageEntry> = None;
        for (_, entries) in self.load_indexes(cache, progress)? {
            for e in entries.into_iter().filter(|e| e.package == package_name) {
                if best.as_ref().is_none_or(|b| {
                    apt::dpkg_version_cmp(&e.version, &b.version) == Ordering::Greater
                }) {
                    best = Some(e);
                }
            }
        }
        let entry = best.ok_or_else(|| DebianError::UnknownPackage {
            name: package_name.to_string(),
            suites: self.suites.clone(),
        })?;
        self.download_deb(&entry, cache, progress)
    }

    /// The `linux-*` entries of each configured suite's `Packages` index
    /// (suites that fail are skipped with a warning).
    fn load_indexes(
        &self,
        cache: &Cache,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<Vec<(String, Vec<PackageEntry>)>, DebianError> {
        let mut out = Vec::new();
        let mut errors = Vec::new();
        for suite in &self.suites {
            match self.suite_index(suite, cache, progress) {
                Ok(entries) => out.push((suite.clone(), entries)),
                Err(e @ DebianError::BadSignature { .. }) => return Err(e),
                Err(e) => {
                    tracing::warn!("Debian suite {suite} skipped: {e}");
                    errors.push(format!("{suite}: {e}"));
                }
            }
        }
        if out.is_empty() {
            return Err(DebianError::NoSuites {
                mirror: self.url.clone(),
                errors,
            });
        }
        Ok(out)
    }

    /// The `linux-*` entries of `suite`'s `main/binary-amd64/Packages.xz`,
    /// from the cache when its `InRelease` is fresh or unchanged.
    pub fn suite_index(
        &self,
        suite: &str,
        cache: &Cache,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<Vec<PackageEntry>, DebianError> {
        let _lock = cache.lock(&format!("debian-index-{suite}"))?;
        let dir = format!("debian/dists/{suite}");
        let inrelease_rel = format!("{dir}/InRelease");
        let inrelease_path = cache.path(&inrelease_rel);
        let url = format!("{}/dists/{suite}/InRelease", self.url);
        let age = fs::metadata(&inrelease_path)
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| SystemTime::now().duration_since(t).ok());
        let inrelease = match age {
            Some(age) if age < self.index_ttl => read_file(&inrelease_path)?,
            _ => match self.get_bytes(&url, 16 << 20) {
                Ok(bytes) => {
                    self.verify_inrelease(suite, &url, &bytes)?;
                    cache.write_atomic(&inrelease_rel, &mut &bytes[..])?;
                    bytes
                }
                Err(e) if e.is_transient() && age.is_some() => {
                    tracing::warn!("{e}; using the stale cached InRelease of {suite}");
                    read_file(&inrelease_path)?
                }
                Err(e) => return Err(e),
            },
        };
        let key = &sha256_hex(&inrelease)[..16];
        let index_name = format!("linux-{key}.json");
        let index_rel = format!("{dir}/{index_name}");
        let index_path = cache.path(&index_rel);
        if index_path.is_file() {
            let text = read_file(&index_path)?;
            return serde_json::from_slice(&text).map_err(|e| DebianError::CorruptCache {
                path: index_path,
                detail: e.to_string(),
            });
        }
        let wanted = format!("main/binary-{ARCH}/Packages.xz");
        let text = String::from_utf8_lossy(&inrelease);
        let file = apt::parse_release_sha256(&text)
            .into_iter()
            .find(|f| f.path == wanted)
            .ok_or_else(|| DebianError::MissingIndex {
                suite: suite.to_string(),
                url: url.clone(),
                wanted: wanted.clone(),
            })?;
        let packages_url = format!("{}/dists/{suite}/{wanted}", self.url);
        let entries = self.download_index(&packages_url, &file, progress)?;
        let json = serde_json::to_vec(&entries).expect("serialising plain structs");
        cache.write_atomic(&index_rel, &mut &json[..])?;
        // Indexes of older InRelease files are no longer needed.
        for e in fs::read_dir(cache.path(&dir))
            .into_iter()
            .flatten()
            .flatten()
        {
            let name = e.file_name();
            let name = name.to_string_lossy();
            if name.starts_with("linux-") && name.ends_with(".json") && name != index_name {
                let _ = fs::remove_file(e.path());
            }
        }
        Ok(entries)
    }

    fn verify_inrelease(&self, suite: &str, url: &str, bytes: &[u8]) -> Result<(), DebianError> {
        let warn_once = |why: String| {
            if !WARNED_UNVERIFIED.swap(true, AtomicOrdering::Relaxed) {
                tracing::warn!("{why}: InRelease signatures NOT checked, relying on SHA256 only");
            }
        };
        if !self.keyring.is_file() {
            warn_once(format!("keyring {} not found", self.keyring.display()));
            return Ok(());
        }
        let tmp_err = |source| DebianError::Io {
            path: std::env::temp_dir(),
            source,
        };
        let home = tempfile::tempdir().map_err(tmp_err)?;
        let file = home.path().join("InRelease");
        fs::write(&file, bytes).map_err(tmp_err)?;
        let out = Command::new("gpgv")
            .arg("--homedir")
            .arg(home.path())
            .arg("--keyring")
            .arg(&self.keyring)
            .arg(&file)
            .output();
        match out {
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                warn_once("gpgv not found".to_string());
                Ok(())
            }
            Err(e) => Err(DebianError::Io {
                path: PathBuf::from("gpgv"),
                source: e,
            }),
            Ok(o) if o.status.success() => {
                tracing::debug!("{url}: good signature");
                Ok(())
            }
            Ok(o) => {
                let stderr = String::from_utf8_lossy(&o.stderr);
                let detail = stderr
                    .lines()
                    .filter(|l| !l.trim().is_empty())
                    .collect::<Vec<_>>()
                    .join(" / ");
                Err(DebianError::BadSignature {
                    suite: suite.to_string(),
                    url: url.to_string(),
                    detail: format!("gpgv exited with {}: {detail}", o.status),
                })
            }
        }
    }

    /// Streams `Packages.xz`, keeping `linux-*` stanzas, while checking its
    /// SHA-256 and size against `InRelease`.
    fn download_index(
        &self,
        url: &str,
        expect: &apt::IndexFile,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<Vec<PackageEntry>, DebianError> {
        let what = url.rsplit('/').nth(3).unwrap_or("Packages.xz").to_string() + "/Packages.xz";
        self.retrying(url, || {
            let resp = self.get(url)?;
            let total = Some(expect.size);
            let body = resp.into_body().into_reader();
            let mut hashing =
                HashingReader::new(ProgressReader::new(body, &what, total, &mut *progress));
            let transfer = |source| DebianError::Transfer {
                url: url.to_string(),
                source,
            };
            let entries = {
                let mut xz = liblzma::read::XzDecoder::new(&mut hashing);
                let entries =
                    apt::scan_packages(BufReader::with_capacity(256 << 10, &mut xz), |p| {
                        p.starts_with("linux-")
                    })
                    .map_err(transfer)?;
                // Drain what the decoder did not need (padding, a 2nd stream).
                io::copy(&mut xz, &mut io::sink()).map_err(transfer)?;
                entries
            };
            io::copy(&mut hashing, &mut io::sink()).map_err(transfer)?;
            let (sha, size) = hashing.finish();
            check_sum(url, &expect.sha256, expect.size, &sha, size)?;
            Ok(entries)
        })
    }

    /// The verified `.deb` of `entry` in the cache, downloading it if needed.
    fn download_deb(
        &self,
        entry: &PackageEntry,
        cache: &Cache,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<PathBuf, DebianError> {
        let base = entry.filename.rsplit('/').next().unwrap_or(&entry.filename);
        let rel = format!("debian/debs/{base}");
        let _lock = cache.lock(&format!("debian-deb-{base}"))?;
        let path = cache.checked_path(&rel)?;
        // Only verified files are ever renamed into place.
        if fs::metadata(&path).is_ok_and(|m| m.len() == entry.size) {
            return Ok(path);
        }
        let url = format!("{}/{}", self.url, entry.filename);
        self.retrying(&url, || {
            let resp = self.get(&url)?;
            let body = resp.into_body().into_reader();
            let mut hashing = HashingReader::new(ProgressReader::new(
                body,
                base,
                Some(entry.size),
                &mut *progress,
            ));
            cache
                .write_atomic_with(&rel, |f| {
                    copy_limited(&mut hashing, f, entry.size, &url)?;
                    let (sha, size) = hashing.current();
                    check_sum(&url, &entry.sha256, entry.size, &sha, size)
                })
                .map_err(|e| match e {
                    WriteError::Cache(e) => DebianError::Cache(e),
                    WriteError::Producer(e) => e,
                })
        })
    }

    fn get(&self, url: &str) -> Result<ureq::http::Response<ureq::Body>, DebianError> {
        tracing::debug!("GET {url}");
        self.agent.get(url).call().map_err(|e| match e {
            ureq::Error::StatusCode(status) => DebianError::HttpStatus {
                url: url.to_string(),
                status,
            },
            e => DebianError::Http {
                url: url.to_string(),
                source: Box::new(e),
            },
        })
    }

    fn get_bytes(&self, url: &str, limit: u64) -> Result<Vec<u8>, DebianError> {
        self.retrying(url, || {
            let resp = self.get(url)?;
            let mut buf = Vec::new();
            resp.into_body()
                .into_reader()
                .take(limit)
                .read_to_end(&mut buf)
                .map_err(|source| DebianError::Transfer {
                    url: url.to_string(),
                    source,
                })?;
            Ok(buf)
        })
    }

    fn retrying<T>(
        &self,
        url: &str,
        mut attempt: impl FnMut() -> Result<T, DebianError>,
    ) -> Result<T, DebianError> {
        let mut delay = self.retry_delay;
        let mut tries = 0;
        loop {
            match attempt() {
                Err(e) if e.is_transient() && tries < self.retries => {
                    tries += 1;
                    tracing::warn!("{e}; retry {tries}/{} of {url} in {delay:?}", self.retries);
                    std::thread::sleep(delay);
                    delay *= 2;
                }
                r => return r,
            }
        }
    }
}

fn read_file(path: &Path) -> Result<Vec<u8>, DebianError> {
    fs::read(path).map_err(|source| DebianError::Io {
        path: path.to_path_buf(),
        source,
    })
}

fn check_sum(
    url: &str,
    expected_sha256: &str,
    expected_size: u64,
    actual_sha256: &str,
    actual_size: u64,
) -> Result<(), DebianError> {
    if actual_size == expected_size && actual_sha256.eq_ignore_ascii_case(expected_sha256) {
        Ok(())
    } else {
        Err(DebianError::Checksum {
            url: url.to_string(),
            expected_sha256: expected_sha256.to_string(),
            actual_sha256: actual_sha256.to_string(),
            expected_size,
            actual_size,
        })
    }
}

/// Copies at most `limit` bytes; more than that is a checksum failure (a
/// server sending more than the signed size is not trusted with the disk).
fn copy_limited(
    r: &mut dyn Read,
    w: &mut dyn Write,
    limit: u64,
    url: &str,
) -> Result<(), DebianError> {
    let mut buf = vec![0u8; 256 << 10];
    let mut done = 0u64;
    loop {
        let n = match r.read(&mut buf) {
            Ok(0) => return Ok(()),
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(source) => {
                return Err(DebianError::Transfer {
                    url: url.to_string(),
                    source,
                })
            }
        };
        done += n as u64;
        if done > limit {
            return Err(DebianError::Checksum {
                url: url.to_string(),
                expected_sha256: "(any)".to_string(),
                actual_sha256: "(not computed: too large)".to_string(),
                expected_size: limit,
                actual_size: done,
            });
        }
        w.write_all(&buf[..n]).map_err(|source| DebianError::Io {
            path: PathBuf::from("<cache temporary file>"),
            source,
        })?;
    }
}

/// Reports progress at most every 256 KiB and at the end.
struct ProgressReader<'p, R> {
    inner: R,
    what: &'p str,
    total: Option<u64>,
    done: u64,
    reported: u64,
    cb: &'p mut dyn FnMut(Progress),
}

impl<'p, R> ProgressReader<'p, R> {
    fn new(inner: R, what: &'p str, total: Option<u64>, cb: &'p mut dyn FnMut(Progress)) -> Self {
        cb(Progress {
            what,
            done: 0,
            total,
        });
        ProgressReader {
            inner,
            what,
            total,
            done: 0,
            reported: 0,
            cb,
        }
    }
}

impl<R: Read> Read for ProgressReader<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.done += n as u64;
        if n == 0 || self.done - self.reported >= 256 << 10 {
            if self.reported != self.done || n == 0 {
                (self.cb)(Progress {
                    what: self.what,
                    done: self.done,
                    total: self.total,
                });
            }
            self.reported = self.done;
        }
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::super::deb::testdeb::{self, Comp};
    use super::*;
    use std::collections::HashMap;
    use std::io::{BufRead, Write};
    use std::net::TcpListener;
    use std::sync::atomic::AtomicUsize;
    use std::sync::{Arc, Mutex};

    fn fixture(name: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/debian")
            .join(name)
    }

    fn fixture_kernels() -> Vec<DebianKernel> {
        let text = fs::read_to_string(fixture("Packages")).unwrap();
        let entries = apt::scan_packages(text.as_bytes(), |p| p.starts_with("linux-")).unwrap();
        kernels_from_index("trixie-backports", &entries)
    }

    #[test]
    fn discover_precedence() {
        let root = fixture("aptroot");
        let m = DebianMirror::discover_in(
            Some("http://explicit.example/debian/"),
            Some("http://env.example/debian"),
            &root,
        )
        .unwrap();
        assert_eq!(
            (m.url(), m.origin()),
            ("http://explicit.example/debian", &MirrorOrigin::Explicit)
        );
        let m = DebianMirror::discover_in(None, Some("http://env.example/debian"), &root).unwrap();
        assert_eq!(
            (m.url(), m.origin()),
            ("http://env.example/debian", &MirrorOrigin::Env)
        );
        let m = DebianMirror::discover_in(Some(""), None, &root).unwrap();
        assert_eq!(m.url(), "http://mirror.example/debian");
        assert!(matches!(m.origin(), MirrorOrigin::AptConfig(p) if p.ends_with("debian.sources")));
        assert!(DebianMirror::discover_in(Some("ftp://x/debian"), None, &root).is_err());
    }

    #[test]
    fn no_mirror_lists_files_read() {
        let dir = tempfile::tempdir().unwrap();
        fs::create_dir_all(dir.path().join("etc/apt/sources.list.d")).unwrap();
        fs::write(
            dir.path().join("etc/apt/sources.list.d/vendor.list"),
            "deb https://vendor.example/apt stable main\n",
        )
        .unwrap();
        let e = DebianMirror::discover_in(None, None, dir.path()).unwrap_err();
        let msg = e.to_string();
        assert!(msg.contains("etc/apt/sources.list,"), "{msg}");
        assert!(msg.contains("vendor.list"), "{msg}");
        assert!(msg.contains(MIRROR_ENV), "{msg}");
    }

    #[test]
    fn kernels_prefer_the_package_with_the_vmlinuz() {
        let ks = fixture_kernels();
        let names: Vec<_> = ks.iter().map(|k| k.package.as_str()).collect();
        assert_eq!(
            names,
            [
                "linux-image-6.18.9+deb13-cloud-amd64",
                "linux-image-6.18.15+deb13-cloud-amd64",
                "linux-binary-6.19.14+deb13-cloud-amd64",
                "linux-binary-7.0.9+deb13-cloud-amd64",
                "linux-binary-7.0.10+deb13-cloud-amd64",
                "linux-binary-7.3.4+deb13-cloud-amd64",
            ]
        );
        let k = &ks[5];
        assert_eq!(
            (k.version.as_str(), k.abi.as_str()),
            ("7.3.4", "7.3.4+deb13-cloud-amd64")
        );
        assert_eq!(k.size, 13604064);
    }

    #[test]
    fn unsigned_and_dbg_packages() {
        let e = |p: &str, v: &str| PackageEntry {
            package: p.into(),
            version: v.into(),
            filename: format!("pool/{p}.deb"),
            size: 1,
            sha256: "0".repeat(64),
        };
        let ks = kernels_from_index(
            "bookworm-backports",
            &[
                e(
                    "linux-image-6.12.95+deb12-cloud-amd64-unsigned",
                    "6.12.95-1",
                ),
                e("linux-image-6.12.95+deb12-cloud-amd64", "6.12.95-1"),
                e(
                    "linux-image-6.12.90+deb12.1-cloud-amd64-unsigned",
                    "6.12.90-2",
                ),
                e("linux-image-6.12.90+deb12-cloud-amd64", "6.12.90-1"),
                e("linux-image-6.12.95+deb12-cloud-amd64-dbg", "6.12.95-1"),
                e("linux-image-6.12.95+deb12-amd64", "6.12.95-1"),
                e("linux-image-cloud-amd64", "6.12.95-1"),
            ],
        );
        let names: Vec<_> = ks.iter().map(|k| k.package.as_str()).collect();
        assert_eq!(
            names,
            [
                "linux-image-6.12.90+deb12-cloud-amd64",
                "linux-image-6.12.90+deb12.1-cloud-amd64-unsigned",
                "linux-image-6.12.95+deb12-cloud-amd64",
            ]
        );
        assert_eq!(ks[1].abi, "6.12.90+deb12.1-cloud-amd64");
        // 6.12.90 -> the newest ABI of that upstream version.
        assert_eq!(
            select_kernel(&ks, "6.12.90").unwrap().abi,
            "6.12.90+deb12.1-cloud-amd64"
        );
        assert_eq!(
            select_kernel(&ks, "6.12.90+deb12").unwrap().abi,
            "6.12.90+deb12-cloud-amd64"
        );
    }

    #[test]
    fn version_selection() {
        let ks = fixture_kernels();
        let pick = |q: &str| select_kernel(&ks, q).map(|k| k.package.clone());
        assert_eq!(
            pick("7.3.4").unwrap(),
            "linux-binary-7.3.4+deb13-cloud-amd64"
        );
        assert_eq!(
            pick("debian:7.3").unwrap(),
            "linux-binary-7.3.4+deb13-cloud-amd64"
        );
        // Numeric, not lexical: 7.0.10 > 7.0.9.
        assert_eq!(
            pick("7.0").unwrap(),
            "linux-binary-7.0.10+deb13-cloud-amd64"
        );
        assert_eq!(pick("7").unwrap(), "linux-binary-7.3.4+deb13-cloud-amd64");
        assert_eq!(
            pick("7.0.9").unwrap(),
            "linux-binary-7.0.9+deb13-cloud-amd64"
        );
        assert_eq!(
            pick("6.18").unwrap(),
            "linux-image-6.18.15+deb13-cloud-amd64"
        );
        assert_eq!(
            pick("7.3.4+deb13-cloud-amd64").unwrap(),
            "linux-binary-7.3.4+deb13-cloud-amd64"
        );
        assert_eq!(
            pick("7.3.4+deb13").unwrap(),
            "linux-binary-7.3.4+deb13-cloud-amd64"
        );
        // "7.3.4+deb1" is not an ABI prefix on a boundary; "7.0.1" is not 7.0.10.
        for bad in ["7.3.4+deb1", "7.0.1", "7.3.5", "5", "", "7.3.4+deb13-cloud"] {
            let e = pick(bad).unwrap_err();
            assert!(
                matches!(e, DebianError::UnknownVersion { .. }),
                "{bad}: {e}"
            );
        }
        let e = pick("5.10").unwrap_err();
        assert_eq!(
            e.to_string(),
            "no Debian cloud-amd64 kernel matches \"5.10\"; available: \
             6.18.{9,15}, 6.19.14, 7.0.{9,10}, 7.3.4"
        );
    }

    #[test]
    fn compact() {
        let v = |s: &[&str]| s.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(compact_versions(&v(&[])), "none");
        assert_eq!(
            compact_versions(&v(&["7", "7.1", "7.1.2", "7.1.3"])),
            "7, 7.1, 7.1.{2,3}"
        );
    }

    /// A tiny HTTP/1.1 file server on 127.0.0.1 (no network).
    struct FakeMirror {
        url: String,
        files: Arc<Mutex<HashMap<String, Vec<u8>>>>,
        requests: Arc<AtomicUsize>,
    }

    impl FakeMirror {
        fn start() -> FakeMirror {
            let listener = TcpListener::bind("127.0.0.1:0").unwrap();
            let url = format!("http://{}/debian", listener.local_addr().unwrap());
            let files: Arc<Mutex<HashMap<String, Vec<u8>>>> = Arc::default();
            let requests = Arc::new(AtomicUsize::new(0));
            let (f, r) = (files.clone(), requests.clone());
            std::thread::spawn(move || {
                for conn in listener.incoming() {
                    let Ok(mut conn) = conn else { continue };
                    r.fetch_add(1, AtomicOrdering::SeqCst);
                    let mut reader = BufReader::new(conn.try_clone().unwrap());
                    let mut line = String::new();
                    let _ = reader.read_line(&mut line);
                    let path = line.split_whitespace().nth(1).unwrap_or("").to_string();
                    loop {
                        let mut h = String::new();
                        if reader.read_line(&mut h).unwrap_or(0) == 0 || h == "\r\n" {
                            break;
                        }
                    }
                    let body = f.lock().unwrap().get(&path).cloned();
                    let _ = match body {
                        Some(b) => conn
                            .write_all(
                                format!(
                                    "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                                    b.len()
                                )
                                .as_bytes(),
                            )
                            .and_then(|_| conn.write_all(&b)),
                        None => conn.write_all(
                            b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                        ),
                    };
                }
            });
            FakeMirror {
                url,
                files,
                requests,
            }
        }

        fn put(&self, path: &str, data: Vec<u8>) {
            self.files
                .lock()
                .unwrap()
                .insert(format!("/debian/{path}"), data);
        }

        fn requests(&self) -> usize {
            self.requests.load(AtomicOrdering::SeqCst)
        }
    }

    fn xz(data: &[u8]) -> Vec<u8> {
        let mut e = liblzma::write::XzEncoder::new(Vec::new(), 1);
        e.write_all(data).unwrap();
        e.finish().unwrap()
    }

    fn stanza(package: &str, filename: &str, data: &[u8]) -> String {
        format!(
            "Package: {package}\nVersion: 1.0-1\nArchitecture: amd64\nFilename: {filename}\nSize: {}\nSHA256: {}\nDescription: test\n continuation line\n\n",
            data.len(),
            sha256_hex(data)
        )
    }

    /// Publishes a suite "test" with a 7.3.4 linux-binary (new layout) and a
    /// 6.18.15 linux-image (old layout) plus a linux-modules package. Returns
    /// the two .deb files.
    fn publish(m: &FakeMirror, tamper_packages_sha: bool) -> (Vec<u8>, Vec<u8>) {
        let new = testdeb::build(
            &[(
                "./usr/lib/modules/7.3.4+deb13-cloud-amd64/vmlinuz",
                b"BZIMAGE-7.3.4",
            )],
            Comp::Xz,
        );
        let old = testdeb::build(
            &[
                ("./boot/config-6.18.15+deb13-cloud-amd64", b"CONFIG"),
                (
                    "./boot/vmlinuz-6.18.15+deb13-cloud-amd64",
                    b"BZIMAGE-6.18.15",
                ),
            ],
            Comp::Zst,
        );
        let modules = testdeb::build(&[("./usr/lib/modules/x/kernel/a.ko", b"KO")], Comp::Xz);
        let f_new = "pool/main/l/linux-signed-amd64/linux-binary-7.3.4+deb13-cloud-amd64_7.3.4-1~bpo13+1_amd64.deb";
        let f_meta = "pool/main/l/linux-signed-amd64/linux-image-7.3.4+deb13-cloud-amd64_7.3.4-1~bpo13+1_amd64.deb";
        let f_old = "pool/main/l/linux-signed-amd64/linux-image-6.18.15+deb13-cloud-amd64_6.18.15-1~bpo13+1_amd64.deb";
        let f_mod =
            "pool/main/l/linux/linux-modules-7.3.4+deb13-cloud-amd64_7.3.4-1~bpo13+1_amd64.deb";
        let packages = [
            stanza("bash", "pool/main/b/bash/bash_5.2_amd64.deb", b"x"),
            stanza("linux-image-7.3.4+deb13-cloud-amd64", f_meta, b"meta"),
            stanza("linux-binary-7.3.4+deb13-cloud-amd64", f_new, &new),
            stanza("linux-image-6.18.15+deb13-cloud-amd64", f_old, &old),
            stanza("linux-modules-7.3.4+deb13-cloud-amd64", f_mod, &modules),
        ]
        .concat();
        let pxz = xz(packages.as_bytes());
        let sha = if tamper_packages_sha {
            "0".repeat(64)
        } else {
            sha256_hex(&pxz)
        };
        let inrelease = format!(
            "-----BEGIN PGP SIGNED MESSAGE-----\nHash: SHA512\n\nSuite: test\nSHA256:\n {} {} main/binary-amd64/Packages\n {sha} {} main/binary-amd64/Packages.xz\n-----BEGIN PGP SIGNATURE-----\n\nfake\n-----END PGP SIGNATURE-----\n",
            sha256_hex(packages.as_bytes()),
            packages.len(),
            pxz.len()
        );
        m.put("dists/test/InRelease", inrelease.into_bytes());
        m.put("dists/test/main/binary-amd64/Packages.xz", pxz);
        m.put(f_new, new.clone());
        m.put(f_old, old.clone());
        m.put(f_mod, modules);
        (new, old)
    }

    fn mirror(m: &FakeMirror) -> DebianMirror {
        DebianMirror::new(&m.url, MirrorOrigin::Explicit)
            .unwrap()
            .with_suites(["missing-suite", "test"])
            .with_keyring("/nonexistent/keyring.gpg")
            .with_retries(0, Duration::ZERO)
    }

    #[test]
    fn fetch_end_to_end_against_a_local_fake_mirror() {
        let fake = FakeMirror::start();
        publish(&fake, false);
        let dir = tempfile::tempdir().unwrap();
        let cache = Cache::at(dir.path());
        let m = mirror(&fake);

        let ks = m.available_kernels(&cache).unwrap();
        assert_eq!(
            ks.iter().map(|k| k.version.as_str()).collect::<Vec<_>>(),
            ["6.18.15", "7.3.4"]
        );

        let mut events = Vec::new();
        let img = m
            .fetch_with_progress("7.3", &cache, &mut |p| {
                events.push((p.what.to_string(), p.done, p.total))
            })
            .unwrap();
        assert_eq!(fs::read(&img.path).unwrap(), b"BZIMAGE-7.3.4");
        assert_eq!(img.abi, "7.3.4+deb13-cloud-amd64");
        assert_eq!(img.package, "linux-binary-7.3.4+deb13-cloud-amd64");
        assert_eq!(img.suite, "test");
        assert!(img.path.starts_with(dir.path()));
        let last = events
            .iter()
            .rev()
            .find(|e| e.0.starts_with("linux-binary"))
            .unwrap();
        assert_eq!(
            Some(last.1),
            last.2,
            "final progress event reports completion"
        );
        // The .deb was only a means to the vmlinuz.
        assert_eq!(fs::read_dir(cache.path("debian/debs")).unwrap().count(), 0);

        let img = m.fetch("6.18", &cache).unwrap();
        assert_eq!(fs::read(&img.path).unwrap(), b"BZIMAGE-6.18.15");

        // Cache hit: the fresh InRelease means no request at all.
        let before = fake.requests();
        let again = m.fetch("7.3.4", &cache).unwrap();
        assert_eq!(
            again.path,
            m.fetch("7.3.4+deb13-cloud-amd64", &cache).unwrap().path
        );
        assert_eq!(
            fake.requests(),
            before + 2,
            "only the missing suite is asked again"
        );

        // A stale InRelease that did not change reuses the index.
        let m0 = mirror(&fake).with_index_ttl(Duration::ZERO);
        let before = fake.requests();
        m0.fetch("7.3.4", &cache).unwrap();
        assert_eq!(
            fake.requests(),
            before + 2,
            "missing suite + InRelease only"
        );

        // Generic package fetch keeps the .deb.
        let deb = m
            .fetch_package("linux-modules-7.3.4+deb13-cloud-amd64", &cache)
            .unwrap();
        let mut ko = Vec::new();
        extract_file(&deb, "kernel/a.ko", &mut ko).unwrap();
        assert_eq!(ko, b"KO");
        let e = m.fetch_package("linux-modules-9.9", &cache).unwrap_err();
        assert!(matches!(e, DebianError::UnknownPackage { .. }), "{e}");

        let e = m.fetch("7.2", &cache).unwrap_err();
        assert!(e.to_string().contains("available: 6.18.15, 7.3.4"), "{e}");
    }

    #[test]
    fn deb_checksum_mismatch_is_an_error_and_caches_nothing() {
        let fake = FakeMirror::start();
        let (mut new, _) = publish(&fake, false);
        let last = new.len() - 1;
        new[last] ^= 1;
        fake.put(
            "pool/main/l/linux-signed-amd64/linux-binary-7.3.4+deb13-cloud-amd64_7.3.4-1~bpo13+1_amd64.deb",
            new,
        );
        let dir = tempfile::tempdir().unwrap();
        let cache = Cache::at(dir.path());
        let e = mirror(&fake).fetch("7.3.4", &cache).unwrap_err();
        assert!(matches!(e, DebianError::Checksum { .. }), "{e}");
        assert!(e.to_string().contains("linux-binary-7.3.4"), "{e}");
        assert!(!cache
            .path("debian/kernels/7.3.4+deb13-cloud-amd64/vmlinuz")
            .exists());
        let debs = fs::read_dir(cache.path("debian/debs")).unwrap().count();
        assert_eq!(debs, 0, "no partial .deb left behind");
    }

    #[test]
    fn packages_checksum_mismatch_is_an_error() {
        let fake = FakeMirror::start();
        publish(&fake, true);
        let dir = tempfile::tempdir().unwrap();
        let cache = Cache::at(dir.path());
        let m = mirror(&fake).with_suites(["test"]);
        let e = m.available_kernels(&cache).unwrap_err();
        let msg = e.to_string();
        assert!(
            msg.contains("checksum mismatch") && msg.contains("Packages.xz"),
            "{msg}"
        );
    }

    #[test]
    fn bad_signature_is_an_error() {
        let keyring = Path::new(DEFAULT_KEYRING);
        let have_gpgv = Command::new("gpgv").arg("--version").output().is_ok();
        if !keyring.is_file() || !have_gpgv {
            eprintln!("skipped: needs gpgv and {DEFAULT_KEYRING}");
            return;
        }
        let fake = FakeMirror::start();
        publish(&fake, false);
        let dir = tempfile::tempdir().unwrap();
        let cache = Cache::at(dir.path());
        let m = mirror(&fake).with_keyring(keyring);
        let e = m.available_kernels(&cache).unwrap_err();
        assert!(matches!(e, DebianError::BadSignature { .. }), "{e}");
        assert!(!cache.path("debian/dists/test/InRelease").exists());
    }

    /// By hand: `HARNESS_NET_TESTS=1 cargo test -p harness --lib net_fetch -- --nocapture`.
    /// Uses the real mirror (explicit env var or apt configuration) and the
    /// real cache.
    #[test]
    fn net_fetch_real_kernels() {
        if std::env::var_os("HARNESS_NET_TESTS").is_none() {
            eprintln!("skipped: set HARNESS_NET_TESTS=1");
            return;
        }
        let _ = tracing_subscriber::fmt()
            .with_env_filter("harness=debug")
            .with_test_writer()
            .try_init();
        let cache = Cache::from_env().unwrap();
        let m = DebianMirror::discover(None).unwrap();
        eprintln!(
            "mirror from {:?}; cache {}",
            m.origin(),
            cache.root().display()
        );
        let t = std::time::Instant::now();
        let ks = m.available_kernels(&cache).unwrap();
        eprintln!(
            "{} kernels in {:?}: {}",
            ks.len(),
            t.elapsed(),
            compact_versions(&ks.iter().map(|k| k.version.clone()).collect::<Vec<_>>())
        );
        for v in ["7.3.4", "6.18", "6.12"] {
            let t = std::time::Instant::now();
            let img = m.fetch(v, &cache).unwrap();
            let size = fs::metadata(&img.path).unwrap().len();
            eprintln!(
                "debian:{v} -> {} ({} from {} in {}, {size} bytes) in {:?}",
                img.path.display(),
                img.abi,
                img.package,
                img.suite,
                t.elapsed()
            );
            let mut head = [0u8; 0x206];
            fs::File::open(&img.path)
                .unwrap()
                .read_exact(&mut head)
                .unwrap();
            assert_eq!(&head[0x202..0x206], b"HdrS", "bzImage header");
        }
    }
}

//! Client of a Debian archive mirror.
//!
//! [`DebianMirror`] finds Debian's archive (explicit URL, `$HARNESS_DEBIAN_MIRROR`,
//! or the machine's apt configuration), reads the package indexes of its
//! suites and downloads `.deb` files into the [`Cache`](crate::kernel::cache::Cache).
//! Which package is a kernel is not known here (see [`crate::kernel::debian`]),
//! except in two error messages of `error.rs`, which borrow its wording.
//!
//! Trust chain: the suite's `InRelease` is checked with `gpgv` against the
//! Debian archive keyring (skipped with a warning when `gpgv` or the keyring
//! is missing; a bad signature is an error), `Packages.xz` against the
//! SHA-256 in `InRelease`, the `.deb` against the SHA-256 in `Packages`.

pub mod apt;
mod error;
mod http;
mod index;
mod pool;
mod release;
#[cfg(test)]
pub(crate) mod testmirror;

use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

pub use error::DebianError;
pub use http::Progress;

/// Environment variable naming the mirror (below an explicit option, above
/// the apt configuration).
pub const MIRROR_ENV: &str = "HARNESS_DEBIAN_MIRROR";

/// The suites searched for kernels, in order of preference.
pub const DEFAULT_SUITES: [&str; 3] = ["sid", "trixie-backports", "bookworm-backports"];

/// The keyring `InRelease` signatures are checked against.
pub const DEFAULT_KEYRING: &str = "/usr/share/keyrings/debian-archive-keyring.gpg";

/// The architecture whose package index is read by default (the
/// kselftest helpers' packages; a kernel's comes from
/// [`DebianMirror::with_arch`]).
pub const ARCH: &str = "amd64";

/// How long a suite's `InRelease` (and so its index) is reused without
/// asking the mirror again.
pub const DEFAULT_INDEX_TTL: Duration = Duration::from_secs(6 * 3600);

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

/// A Debian archive mirror plus the policy for using it.
#[derive(Debug, Clone)]
pub struct DebianMirror {
    url: String,
    origin: MirrorOrigin,
    suites: Vec<String>,
    keyring: PathBuf,
    index_ttl: Duration,
    http: http::Http,
    arch: crate::arch::Arch,
}

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
        Ok(DebianMirror {
            url: url.to_string(),
            origin,
            suites: DEFAULT_SUITES.iter().map(|s| s.to_string()).collect(),
            keyring: PathBuf::from(DEFAULT_KEYRING),
            index_ttl: DEFAULT_INDEX_TTL,
            http: http::Http::new(),
            arch: crate::arch::Arch::X86_64,
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

    /// Reads the kernels of `arch` (its package index and flavour)
    /// instead of x86-64's.
    pub fn with_arch(mut self, arch: crate::arch::Arch) -> Self {
        self.arch = arch;
        self
    }

    /// The architecture whose kernels this mirror lists.
    pub fn arch(&self) -> crate::arch::Arch {
        self.arch
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
        self.http.retries = retries;
        self.http.retry_delay = delay;
        self
    }
}

/// Where a suite's files live in the cache.
fn suite_dir(suite: &str) -> String {
    format!("debian/dists/{suite}")
}

fn read_file(path: &Path) -> Result<Vec<u8>, DebianError> {
    fs::read(path).map_err(|source| DebianError::Io {
        path: path.to_path_buf(),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::testmirror::fixture;
    use super::*;

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
}

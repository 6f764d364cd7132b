//! A suite's `InRelease`: fetched (or reused from the cache while fresh, or
//! when the mirror is unreachable), its signature checked with `gpgv`, and
//! the index files it lists. Knows nothing of what is in those indexes.

use std::fs;
use std::io;
use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::SystemTime;

use super::apt::{self, IndexFile};
use super::{read_file, suite_dir, DebianError, DebianMirror};
use crate::kernel::cache::Cache;

static WARNED_UNVERIFIED: AtomicBool = AtomicBool::new(false);

impl DebianMirror {
    /// The URL of `suite`'s `InRelease`.
    pub(super) fn inrelease_url(&self, suite: &str) -> String {
        format!("{}/dists/{suite}/InRelease", self.url)
    }

    /// `suite`'s verified `InRelease`, from the cache when younger than the
    /// index TTL (or older, when the mirror fails transiently). The caller
    /// holds the suite's cache lock.
    pub(super) fn inrelease(&self, suite: &str, cache: &Cache) -> Result<Vec<u8>, DebianError> {
        let inrelease_rel = format!("{}/InRelease", suite_dir(suite));
        let inrelease_path = cache.path(&inrelease_rel);
        let url = self.inrelease_url(suite);
        let age = fs::metadata(&inrelease_path)
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| SystemTime::now().duration_since(t).ok());
        match age {
            Some(age) if age < self.index_ttl => read_file(&inrelease_path),
            _ => match self.http.get_bytes(&url, 16 << 20) {
                Ok(bytes) => {
                    self.verify_inrelease(suite, &url, &bytes)?;
                    cache.write_atomic(&inrelease_rel, &mut &bytes[..])?;
                    Ok(bytes)
                }
                Err(e) if e.is_transient() && age.is_some() => {
                    tracing::warn!("{e}; using the stale cached InRelease of {suite}");
                    read_file(&inrelease_path)
                }
                Err(e) => Err(e),
            },
        }
    }

    fn verify_inrelease(&self, suite: &str, url: &str, bytes: &[u8]) -> Result<(), DebianError> {
        let warn_once = |why: String| {
            if !WARNED_UNVERIFIED.swap(true, Ordering::Relaxed) {
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

    /// The entry `InRelease` lists for `wanted` (a path below
    /// `dists/<suite>/`).
    pub(super) fn listed_index(
        &self,
        suite: &str,
        inrelease: &[u8],
        wanted: &str,
    ) -> Result<IndexFile, DebianError> {
        let text = String::from_utf8_lossy(inrelease);
        apt::parse_release_sha256(&text)
            .into_iter()
            .find(|f| f.path == wanted)
            .ok_or_else(|| DebianError::MissingIndex {
                suite: suite.to_string(),
                url: self.inrelease_url(suite),
                wanted: wanted.to_string(),
            })
    }
}

#[cfg(test)]
mod tests {
    use super::super::testmirror::{mirror, publish, FakeMirror};
    use super::super::DEFAULT_KEYRING;
    use super::*;
    use std::path::Path;

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
        // Not skipped like an unreachable suite: the whole load fails.
        let e = m.load_indexes(&cache, &mut |_| {}).unwrap_err();
        assert!(matches!(e, DebianError::BadSignature { .. }), "{e}");
        assert!(!cache.path("debian/dists/test/InRelease").exists());
    }
}

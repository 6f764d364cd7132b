//! `.deb` files from the archive's `pool/`: the newest version of a package
//! across the configured suites, downloaded into the cache and verified
//! against its `Packages` entry.

use std::cmp::Ordering;
use std::fs;
use std::path::PathBuf;

use super::apt::{self, PackageEntry};
use super::http::{check_sum, copy_limited, ProgressReader};
use super::{DebianError, DebianMirror, Progress};
use crate::kernel::cache::{Cache, HashingReader, WriteError};

impl DebianMirror {
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

    /// The verified `.deb` of `entry` in the cache, downloading it if needed.
    pub(crate) fn download_deb(
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
        self.http.retrying(&url, || {
            let resp = self.http.get(&url)?;
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
}

#[cfg(test)]
mod tests {
    use super::super::testmirror::{mirror, publish, FakeMirror};
    use super::*;
    use crate::kernel::deb::extract_file;

    #[test]
    fn fetch_package_keeps_the_verified_deb() {
        let fake = FakeMirror::start();
        publish(&fake, false);
        let dir = tempfile::tempdir().unwrap();
        let cache = Cache::at(dir.path());
        let m = mirror(&fake);
        let deb = m
            .fetch_package("linux-modules-7.3.4+deb13-cloud-amd64", &cache)
            .unwrap();
        assert!(deb.starts_with(cache.path("debian/debs")));
        let mut ko = Vec::new();
        extract_file(&deb, "kernel/a.ko", &mut ko).unwrap();
        assert_eq!(ko, b"KO");
        let e = m.fetch_package("linux-modules-9.9", &cache).unwrap_err();
        assert!(matches!(e, DebianError::UnknownPackage { .. }), "{e}");
    }
}

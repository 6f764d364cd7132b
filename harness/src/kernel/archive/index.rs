//! A suite's `Packages` index: `main/binary-amd64/Packages.xz` streamed and
//! checked against `InRelease`, its `linux-*` stanzas kept and cached as
//! JSON per `InRelease` (so an unchanged `InRelease` means no download).

use std::fs;
use std::io::{self, BufReader};

use super::apt::{self, IndexFile, PackageEntry};
use super::http::{check_sum, ProgressReader};
use super::{read_file, suite_dir, DebianError, DebianMirror, Progress};
use crate::arch::Arch;
use crate::kernel::cache::{sha256_hex, Cache, HashingReader};

/// The stanzas an index keeps: `linux-*` (kernels, their modules, their
/// sources), so memory and the cached JSON stay small.
const KEPT_PREFIX: &str = "linux-";

/// The start of a kept index's file name: x86-64's keeps the name it had
/// before there were two architectures (its cached indexes stay valid),
/// any other's names its Debian architecture.
fn index_stem(arch: Arch) -> String {
    match arch {
        Arch::X86_64 => KEPT_PREFIX.to_string(),
        a => format!("{KEPT_PREFIX}{}-", a.debian()),
    }
}

/// Whose kept index a file of the suite's directory is (so refreshing one
/// architecture's index never removes another's).
fn index_arch(name: &str) -> Option<Arch> {
    let rest = name.strip_prefix(KEPT_PREFIX)?;
    Some(
        crate::arch::ALL
            .into_iter()
            .filter(|a| *a != Arch::X86_64)
            .find(|a| rest.starts_with(&format!("{}-", a.debian())))
            .unwrap_or(Arch::X86_64),
    )
}

impl DebianMirror {
    /// The `linux-*` entries of each configured suite's `Packages` index
    /// (suites that fail are skipped with a warning).
    pub(crate) fn load_indexes(
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
        let dir = suite_dir(suite);
        let inrelease = self.inrelease(suite, cache)?;
        let key = &sha256_hex(&inrelease)[..16];
        let index_name = format!("{}{key}.json", index_stem(self.arch));
        let index_rel = format!("{dir}/{index_name}");
        let index_path = cache.path(&index_rel);
        if index_path.is_file() {
            let text = read_file(&index_path)?;
            return serde_json::from_slice(&text).map_err(|e| DebianError::CorruptCache {
                path: index_path,
                detail: e.to_string(),
            });
        }
        let wanted = format!("main/binary-{}/Packages.xz", self.arch.debian());
        let file = self.listed_index(suite, &inrelease, &wanted)?;
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
            if index_arch(&name) == Some(self.arch) && name.ends_with(".json") && name != index_name
            {
                let _ = fs::remove_file(e.path());
            }
        }
        Ok(entries)
    }

    /// Streams `Packages.xz`, keeping `linux-*` stanzas, while checking its
    /// SHA-256 and size against `InRelease`.
    fn download_index(
        &self,
        url: &str,
        expect: &IndexFile,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<Vec<PackageEntry>, DebianError> {
        let what = url.rsplit('/').nth(3).unwrap_or("Packages.xz").to_string() + "/Packages.xz";
        self.http.retrying(url, || {
            let resp = self.http.get(url)?;
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
                        p.starts_with(KEPT_PREFIX)
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
}

#[cfg(test)]
mod tests {
    use super::super::testmirror::{mirror, publish, FakeMirror};
    use super::{index_arch, index_stem};
    use crate::arch::Arch;

    #[test]
    fn each_architecture_keeps_its_own_index() {
        assert_eq!(index_stem(Arch::X86_64), "linux-");
        assert_eq!(index_stem(Arch::Arm64), "linux-arm64-");
        assert_eq!(index_arch("linux-0123abcd.json"), Some(Arch::X86_64));
        assert_eq!(index_arch("linux-arm64-0123abcd.json"), Some(Arch::Arm64));
        assert_eq!(index_arch("InRelease"), None);
    }

    #[test]
    fn packages_checksum_mismatch_is_an_error() {
        let fake = FakeMirror::start();
        publish(&fake, true);
        let dir = tempfile::tempdir().unwrap();
        let cache = crate::kernel::cache::Cache::at(dir.path());
        let m = mirror(&fake).with_suites(["test"]);
        let e = m.load_indexes(&cache, &mut |_| {}).unwrap_err();
        let msg = e.to_string();
        assert!(
            msg.contains("checksum mismatch") && msg.contains("Packages.xz"),
            "{msg}"
        );
    }
}

//! Debian prebuilt kernels, on top of the archive client ([`DebianMirror`]):
//! lists the `cloud-amd64` kernels of the configured suites, picks one by
//! version, and downloads it into the [`Cache`], returning the path of its
//! `vmlinuz`.
//!
//! Package names: up to 6.18 the vmlinuz is in `linux-image-<abi>` at
//! `boot/vmlinuz-<abi>`; from 6.19 on `linux-image-<abi>` is a metapackage
//! and the vmlinuz is in `linux-binary-<abi>` at
//! `usr/lib/modules/<abi>/vmlinuz`. Both are handled.
//!
//! The archive client's items are re-exported here, so
//! `kernel::debian::{DebianMirror, DebianError, Progress, ...}` keep working.

use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::fs;
use std::path::PathBuf;

use super::archive::apt::{self, PackageEntry};
pub use super::archive::{
    DebianError, DebianMirror, MirrorOrigin, Progress, ARCH, DEFAULT_INDEX_TTL, DEFAULT_KEYRING,
    DEFAULT_SUITES, MIRROR_ENV,
};
use super::cache::{Cache, WriteError};
pub use super::deb::{extract_file, DebError};

/// The x86-64 kernel flavour used (boots fastest, has what the suites need
/// built in); each architecture's is [`crate::arch::Arch::debian_flavour`].
pub const FLAVOUR: &str = "cloud-amd64";

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
    /// The cached vmlinuz (an x86 bzImage, an arm64 `Image`).
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
/// preferred. `None` for packages that do not carry a `flavour` vmlinuz.
fn parse_kernel_package<'a>(name: &'a str, flavour: &str) -> Option<(&'a str, u8)> {
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
    let base = rest.strip_suffix(flavour)?.strip_suffix('-')?;
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
    kernels_of_flavour(suite, entries, FLAVOUR)
}

/// [`kernels_from_index`] for another flavour (`cloud-arm64`).
pub fn kernels_of_flavour(
    suite: &str,
    entries: &[PackageEntry],
    flavour: &str,
) -> Vec<DebianKernel> {
    let mut best: BTreeMap<&str, (u8, &PackageEntry)> = BTreeMap::new();
    for e in entries {
        let Some((abi, rank)) = parse_kernel_package(&e.package, flavour) else {
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
    select_of_flavour(kernels, asked, FLAVOUR)
}

/// [`select_kernel`] among kernels of another flavour (`cloud-arm64`).
pub fn select_of_flavour<'a>(
    kernels: &'a [DebianKernel],
    asked: &str,
    flavour: &'static str,
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
                        .is_some_and(|rest| rest == flavour)
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
            flavour,
            asked: asked.to_string(),
            available,
        }
    })
}

impl DebianMirror {
    /// Every `cloud-<arch>` kernel of the mirror's architecture in the
    /// configured suites, ascending by
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
            for k in kernels_of_flavour(&suite, &entries, self.arch().debian_flavour()) {
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
        let k = select_of_flavour(&kernels, version, self.arch().debian_flavour())?.clone();
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
}

#[cfg(test)]
mod tests {
    use super::super::archive::testmirror::{fixture, mirror, publish, FakeMirror};
    use super::*;
    use std::io::Read;
    use std::time::Duration;

    fn fixture_kernels() -> Vec<DebianKernel> {
        let text = fs::read_to_string(fixture("Packages")).unwrap();
        let entries = apt::scan_packages(text.as_bytes(), |p| p.starts_with("linux-")).unwrap();
        kernels_from_index("trixie-backports", &entries)
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

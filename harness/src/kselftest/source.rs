//! Where the kernel tree comes from: a [`SourceSpec`] (Debian's
//! `linux-source-X.Y`, unpacked by the kernel builds' own
//! [`unpack_source_tarball`](crate::kernel::source::unpack_source_tarball)
//! with the big directories the build never reads left out, or a local
//! pristine tree), and what identifies it for the cache.

use super::{io_err, KselftestError, FUTEX_DIR};
use crate::kernel::cache::{sha256_hex, Cache};
use crate::kernel::debian::{DebianError, DebianMirror};
use std::fs;
use std::path::{Path, PathBuf};

/// Where the kernel source comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SourceSpec {
    /// Debian's `linux-source-<series>` package (`series` like `7.3`).
    Debian {
        /// `major.minor`.
        series: String,
    },
    /// A local, pristine kernel tree.
    Tree(PathBuf),
}

impl SourceSpec {
    /// `debian:7.3` (or `debian:7.3.4`: the package is per series), or a
    /// directory holding a kernel tree.
    pub fn parse(s: &str) -> Result<SourceSpec, KselftestError> {
        let bad = |why: &str| KselftestError::BadSource {
            given: s.to_string(),
            why: why.to_string(),
        };
        if let Some(v) = s.strip_prefix("debian:") {
            return Self::for_version(v).ok_or_else(|| bad("expected debian:MAJOR.MINOR"));
        }
        let p = PathBuf::from(s.strip_prefix("path:").unwrap_or(s));
        if !p.join(FUTEX_DIR).join("Makefile").is_file() || !p.join("Makefile").is_file() {
            return Err(bad(&format!(
                "not a kernel source tree (no Makefile or {FUTEX_DIR}/Makefile)"
            )));
        }
        Ok(SourceSpec::Tree(p))
    }

    /// Debian's source package for a kernel version (`7.3.4` -> `7.3`).
    pub fn for_version(v: &str) -> Option<SourceSpec> {
        let mut it = v.split('.');
        let (maj, min) = (it.next()?, it.next()?);
        let num = |x: &str| !x.is_empty() && x.bytes().all(|b| b.is_ascii_digit());
        (num(maj) && num(min)).then(|| SourceSpec::Debian {
            series: format!("{maj}.{min}"),
        })
    }
}

/// The source of a kselftest suite: `source` (`--kselftest-tree`) if
/// given, else Debian's `linux-source` of the kernel's series.
pub fn source_spec(
    suite: &str,
    source: Option<&str>,
    kernel_version: Option<&str>,
) -> Result<SourceSpec, KselftestError> {
    match (source, kernel_version) {
        (Some(s), _) => SourceSpec::parse(s),
        (None, v) => v
            .and_then(SourceSpec::for_version)
            .ok_or_else(|| KselftestError::NoSource {
                suite: suite.into(),
                kernel: v.unwrap_or_default().into(),
            }),
    }
}

/// What identifies `spec` in the cache key, and for Debian the fetched
/// package: cheap for Debian (the .deb is cached), a content hash of what
/// the build reads for a tree.
pub(super) fn identity(
    spec: &SourceSpec,
    cache: &Cache,
    mirror: &dyn Fn() -> Result<DebianMirror, DebianError>,
) -> Result<(String, Option<PathBuf>), KselftestError> {
    Ok(match spec {
        SourceSpec::Debian { series } => {
            let deb = mirror()?.fetch_package(&format!("linux-source-{series}"), cache)?;
            let name = deb
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            (format!("debian {name}"), Some(deb))
        }
        SourceSpec::Tree(dir) => (format!("tree {} {}", dir.display(), tree_hash(dir)?), None),
    })
}

/// The tree to build: Debian's package `deb` unpacked below `work`, or the
/// local tree, which must be pristine.
pub(super) fn tree(
    spec: &SourceSpec,
    deb: Option<&Path>,
    work: &Path,
    say: &(dyn Fn(&str) + Sync),
) -> Result<PathBuf, KselftestError> {
    match (spec, deb) {
        (SourceSpec::Debian { series }, Some(deb)) => {
            say(&format!("unpacking linux-source-{series}"));
            unpack_debian_source(deb, series, work)
        }
        (SourceSpec::Tree(dir), _) => {
            if dir.join(".config").exists() || dir.join("include/config").exists() {
                return Err(KselftestError::BadSource {
                    given: dir.display().to_string(),
                    why: "the tree is configured in place; `make O=` needs a pristine tree (make mrproper)".into(),
                });
            }
            Ok(dir.clone())
        }
        _ => unreachable!("Debian sources always have a .deb"),
    }
}

/// Top-level directories of the kernel tarball the selftest build never
/// reads (headers need `include/`, `arch/x86/`, `scripts/`, `tools/`,
/// the top `Makefile`).
const UNNEEDED: &[&str] = &[
    "Documentation",
    "drivers",
    "sound",
    "net",
    "fs",
    "samples",
    "LICENSES",
];

/// `tar --exclude` patterns of what the build never reads below
/// `linux-source-<series>/`: [`UNNEEDED`] and every arch but x86 and
/// arm64, the two the selftests are built for (files right in `arch/`
/// stay: `*` does not match a `/`; no other arch starts with `x8`, and of
/// `alpha`, `arc`, `arm` and `arm64` only `arm/` is a directory named
/// exactly `arm`).
fn unneeded_members(series: &str) -> Vec<String> {
    let top = format!("linux-source-{series}");
    UNNEEDED
        .iter()
        .map(|d| format!("{top}/{d}"))
        .chain(
            ["[!xa]*", "x[!8]*", "a[!r]*", "ar[!m]*", "arm"]
                .map(|arch| format!("{top}/arch/{arch}/*")),
        )
        .collect()
}

/// Unpacks the source tarball of the `linux-source-<series>` package `deb`
/// below `work` (through [`crate::kernel::source::unpack_source_tarball`]),
/// leaving out what the build never reads; returns the tree's root.
pub fn unpack_debian_source(
    deb: &Path,
    series: &str,
    work: &Path,
) -> Result<PathBuf, KselftestError> {
    let src = work.join("src");
    fs::create_dir_all(&src).map_err(io_err("create", &src))?;
    let root = crate::kernel::source::unpack_source_tarball(deb, &src, &unneeded_members(series))
        .map_err(|source| KselftestError::Unpack {
        deb: deb.to_path_buf(),
        source,
    })?;
    if !root.join(FUTEX_DIR).is_dir() {
        return Err(KselftestError::BadSource {
            given: deb.display().to_string(),
            why: format!("no {FUTEX_DIR} in the tarball"),
        });
    }
    Ok(root)
}

/// A content hash of what the selftest build reads from a tree (the top
/// Makefile, the uapi headers, the selftest sources).
pub fn tree_hash(root: &Path) -> Result<String, KselftestError> {
    let mut files = Vec::new();
    for d in [
        "include/uapi",
        "arch/x86/include/uapi",
        "arch/x86/entry/syscalls",
        "tools/testing/selftests/futex",
        "tools/include",
    ] {
        walk(&root.join(d), &mut files);
    }
    for f in [
        "Makefile",
        "tools/testing/selftests/lib.mk",
        "tools/testing/selftests/kselftest.h",
        "tools/testing/selftests/kselftest_harness.h",
    ] {
        files.push(root.join(f));
    }
    files.sort();
    let mut h = Vec::new();
    for f in files {
        if let Ok(bytes) = fs::read(&f) {
            let rel = f.strip_prefix(root).unwrap_or(&f);
            h.extend_from_slice(rel.to_string_lossy().as_bytes());
            h.push(0);
            h.extend_from_slice(sha256_hex(&bytes).as_bytes());
        }
    }
    Ok(sha256_hex(&h)[..16].to_string())
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        match e.file_type() {
            Ok(t) if t.is_dir() => walk(&p, out),
            Ok(t) if t.is_file() => out.push(p),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::SUITE_FUTEX;
    use super::*;

    #[test]
    fn source_specs() {
        assert_eq!(
            SourceSpec::parse("debian:7.3.4").unwrap(),
            SourceSpec::Debian {
                series: "7.3".into()
            }
        );
        assert!(SourceSpec::parse("debian:seven").is_err());
        let e = SourceSpec::parse("/nonexistent").unwrap_err().to_string();
        assert!(e.contains("not a kernel source tree"), "{e}");
        assert!(matches!(
            source_spec(SUITE_FUTEX, None, None),
            Err(KselftestError::NoSource { .. })
        ));
        assert_eq!(
            source_spec(SUITE_FUTEX, None, Some("7.2.13")).unwrap(),
            SourceSpec::Debian {
                series: "7.2".into()
            }
        );
    }

    #[test]
    fn tarball_filter_keeps_what_headers_and_selftests_need() {
        if !crate::kernel::source::on_path("tar") {
            return;
        }
        let keep = [
            "Makefile",
            "include/uapi/linux/futex.h",
            "arch/x86/include/uapi/asm/unistd.h",
            "arch/arm64/Makefile",
            "arch/arm64/include/uapi/asm/unistd.h",
            "arch/Kconfig",
            "scripts/Makefile.build",
            "tools/testing/selftests/futex/functional/run.sh",
            // Only the top-level directories go.
            "include/net/sock.h",
            "tools/testing/selftests/drivers/Makefile",
        ];
        let drop = [
            "drivers/gpu/x.c",
            "arch/arm/Makefile",
            "arch/arc/Makefile",
            "arch/alpha/Makefile",
            "arch/xtensa/Makefile",
            "Documentation/index.rst",
        ];
        let mut tarball = tar::Builder::new(Vec::new());
        for path in keep.iter().chain(&drop) {
            let mut h = tar::Header::new_gnu();
            h.set_size(1);
            h.set_mode(0o644);
            h.set_cksum();
            tarball
                .append_data(&mut h, format!("linux-source-7.3/{path}"), &b"x"[..])
                .unwrap();
        }
        let mut xz = liblzma::write::XzEncoder::new(Vec::new(), 1);
        std::io::Write::write_all(&mut xz, &tarball.into_inner().unwrap()).unwrap();
        let d = tempfile::tempdir().unwrap();
        let deb = d.path().join("linux-source-7.3_7.3.4-1_all.deb");
        fs::write(
            &deb,
            crate::kernel::deb::testdeb::build(
                &[("./usr/src/linux-source-7.3.tar.xz", &xz.finish().unwrap())],
                crate::kernel::deb::testdeb::Comp::Xz,
            ),
        )
        .unwrap();
        let root = unpack_debian_source(&deb, "7.3", d.path()).unwrap();
        for keep in keep {
            assert!(root.join(keep).is_file(), "{keep}");
        }
        for drop in drop {
            assert!(!root.join(drop).exists(), "{drop}");
        }
    }
}

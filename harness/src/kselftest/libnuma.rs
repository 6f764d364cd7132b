//! libnuma for `futex_numa_mpol`: the newest `libnuma-dev` >= [`LIBNUMA_MIN`]
//! of a newer Debian suite, its index and package verified against the
//! suite's signed `InRelease`, unpacked into the cache for its static
//! `libnuma.a` and headers (never installed), with a shim for an older glibc.

use super::build::step;
use super::{io_err, KselftestError};
use crate::kernel::apt::{self, PackageEntry};
use crate::kernel::cache::{sha256_hex, Cache, HashingReader};
use crate::kernel::debian::DebianMirror;
use std::cmp::Ordering;
use std::fs;
use std::io::{self, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// libnuma version from which `futex_numa_mpol` tests FUTEX2_MPOL.
pub const LIBNUMA_MIN: &str = "2.0.18";

/// Debian suites searched for `libnuma-dev`, in order.
pub const LIBNUMA_SUITES: &[&str] = &["trixie", "sid"];

/// An unpacked `libnuma-dev`: `include/` and `lib/libnuma.a` below `dir`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LibNuma {
    /// Root of the unpacked files.
    pub dir: PathBuf,
    /// `libnuma-dev_<version>_amd64.deb`.
    pub package: String,
    /// Its Debian version.
    pub version: String,
}

/// The newest `libnuma-dev` >= [`LIBNUMA_MIN`] of [`LIBNUMA_SUITES`],
/// unpacked in the cache (`<cache>/kselftest/libnuma/<version>/`).
pub fn fetch_libnuma(mirror: &DebianMirror, cache: &Cache) -> Result<LibNuma, KselftestError> {
    let mut errors = Vec::new();
    for suite in LIBNUMA_SUITES {
        match suite_packages(mirror, cache, suite, "libnuma-dev") {
            Ok(entries) => {
                let best = entries
                    .into_iter()
                    .filter(|e| apt::dpkg_version_cmp(&e.version, LIBNUMA_MIN) != Ordering::Less)
                    .max_by(|a, b| apt::dpkg_version_cmp(&a.version, &b.version));
                match best {
                    Some(e) => return unpack_libnuma(mirror, cache, &e),
                    None => errors.push(format!("{suite}: no libnuma-dev >= {LIBNUMA_MIN}")),
                }
            }
            Err(e) => errors.push(format!("{suite}: {e}")),
        }
    }
    Err(KselftestError::Download {
        url: format!("{}/dists/{{{}}}", mirror.url(), LIBNUMA_SUITES.join(",")),
        why: errors.join("; "),
    })
}

fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .timeout_connect(Some(Duration::from_secs(20)))
        .timeout_recv_response(Some(Duration::from_secs(60)))
        .timeout_per_read(Some(Duration::from_secs(60)))
        .build()
        .into()
}

/// `package`'s entries in `suite`'s `main/binary-amd64/Packages.xz`. The
/// suite's `InRelease` is fetched and signature-checked by
/// [`DebianMirror::suite_index`] (which keeps only `linux-*` stanzas); this
/// reads the verified copy from the cache, downloads `Packages.xz`, checks
/// it against `InRelease`'s SHA-256 and keeps the wanted stanzas, cached
/// per `InRelease`.
pub fn suite_packages(
    mirror: &DebianMirror,
    cache: &Cache,
    suite: &str,
    package: &str,
) -> Result<Vec<PackageEntry>, KselftestError> {
    mirror.suite_index(suite, cache, &mut |_| {})?;
    let inrelease_path = cache.path(format!("debian/dists/{suite}/InRelease"));
    let inrelease = fs::read(&inrelease_path).map_err(io_err("read", &inrelease_path))?;
    let key = &sha256_hex(&inrelease)[..16];
    let rel = format!("kselftest/dists/{suite}/{package}-{key}.json");
    let _lock = cache.lock(&format!("kselftest-index-{suite}"))?;
    if let Ok(bytes) = fs::read(cache.path(&rel)) {
        if let Ok(v) = serde_json::from_slice(&bytes) {
            return Ok(v);
        }
    }
    let wanted = format!("main/binary-{}/Packages.xz", crate::kernel::debian::ARCH);
    let file = apt::parse_release_sha256(&String::from_utf8_lossy(&inrelease))
        .into_iter()
        .find(|f| f.path == wanted)
        .ok_or_else(|| KselftestError::Download {
            url: format!("{}/dists/{suite}/InRelease", mirror.url()),
            why: format!("no {wanted} listed"),
        })?;
    let url = format!("{}/dists/{suite}/{wanted}", mirror.url());
    let dl = |why: String| KselftestError::Download {
        url: url.clone(),
        why,
    };
    let resp = agent().get(&url).call().map_err(|e| dl(e.to_string()))?;
    let mut hashing = HashingReader::new(resp.into_body().into_reader());
    let entries = {
        let mut xz = liblzma::read::XzDecoder::new(&mut hashing);
        let entries = apt::scan_packages(BufReader::new(&mut xz), |p| p == package)
            .map_err(|e| dl(e.to_string()))?;
        io::copy(&mut xz, &mut io::sink()).map_err(|e| dl(e.to_string()))?;
        entries
    };
    io::copy(&mut hashing, &mut io::sink()).map_err(|e| dl(e.to_string()))?;
    let (sha, size) = hashing.finish();
    if size != file.size || !sha.eq_ignore_ascii_case(&file.sha256) {
        return Err(dl(format!(
            "checksum mismatch: {size} bytes sha256 {sha}, InRelease says {} bytes {}",
            file.size, file.sha256
        )));
    }
    let json = serde_json::to_vec(&entries).expect("plain structs serialize");
    cache.write_atomic(&rel, &mut &json[..])?;
    Ok(entries)
}

/// Downloads (verified against the index's SHA-256) and unpacks one
/// libnuma-dev package.
fn unpack_libnuma(
    mirror: &DebianMirror,
    cache: &Cache,
    e: &PackageEntry,
) -> Result<LibNuma, KselftestError> {
    let base = e
        .filename
        .rsplit('/')
        .next()
        .unwrap_or(&e.filename)
        .to_string();
    let rel_dir = format!("kselftest/libnuma/{}", sanitize(&e.version));
    let dir = cache.checked_path(&rel_dir)?;
    let numa = LibNuma {
        dir: dir.clone(),
        package: base.clone(),
        version: e.version.clone(),
    };
    let _lock = cache.lock(&format!("kselftest-libnuma-{}", sanitize(&e.version)))?;
    if dir.join("lib/isoc23-shim.o").is_file() {
        return Ok(numa);
    }
    let url = format!("{}/{}", mirror.url(), e.filename);
    let dl = |why: String| KselftestError::Download {
        url: url.clone(),
        why,
    };
    let resp = agent().get(&url).call().map_err(|x| dl(x.to_string()))?;
    let mut bytes = Vec::new();
    resp.into_body()
        .into_reader()
        .take(e.size + 1)
        .read_to_end(&mut bytes)
        .map_err(|x| dl(x.to_string()))?;
    let sha = sha256_hex(&bytes);
    if bytes.len() as u64 != e.size || !sha.eq_ignore_ascii_case(&e.sha256) {
        return Err(dl(format!(
            "checksum mismatch: {} bytes sha256 {sha}, index says {} bytes {}",
            bytes.len(),
            e.size,
            e.sha256
        )));
    }
    let deb = cache.write_atomic(format!("kselftest/debs/{base}"), &mut &bytes[..])?;
    for (member, to) in [
        ("lib/x86_64-linux-gnu/libnuma.a", "lib/libnuma.a"),
        ("include/numa.h", "include/numa.h"),
        ("include/numaif.h", "include/numaif.h"),
        ("include/numacompat1.h", "include/numacompat1.h"),
    ] {
        cache
            .write_atomic_with(format!("{rel_dir}/{to}"), |f| {
                crate::kernel::deb::extract_file(&deb, &format!("usr/{member}"), f).map(|_| ())
            })
            .map_err(|x| match x {
                crate::kernel::cache::WriteError::Cache(e) => KselftestError::Cache(e),
                crate::kernel::cache::WriteError::Producer(e) => KselftestError::Io {
                    what: "extract from",
                    path: deb.clone(),
                    source: io::Error::other(e.to_string()),
                },
            })?;
    }
    add_isoc23_shim(&dir.join("lib"))?;
    Ok(numa)
}

/// Definitions of the C23 `strtol` family and `sscanf` that libraries
/// built against glibc >= 2.38 reference (`__isoc23_*`), for linking them
/// statically with an older glibc. Weak, so a newer libc's own win.
pub const ISOC23_SHIM: &str = r#"#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#define W __attribute__((weak))
W long __isoc23_strtol(const char *s, char **e, int b) { return strtol(s, e, b); }
W unsigned long __isoc23_strtoul(const char *s, char **e, int b) { return strtoul(s, e, b); }
W long long __isoc23_strtoll(const char *s, char **e, int b) { return strtoll(s, e, b); }
W unsigned long long __isoc23_strtoull(const char *s, char **e, int b) { return strtoull(s, e, b); }
W int __isoc23_sscanf(const char *s, const char *f, ...) {
    va_list ap; va_start(ap, f); int r = vsscanf(s, f, ap); va_end(ap); return r;
}
W int __isoc23_vsscanf(const char *s, const char *f, va_list ap) { return vsscanf(s, f, ap); }
"#;

/// Adds [`ISOC23_SHIM`] to `lib/libnuma.a` (once): Debian 12's glibc 2.36
/// lacks the `__isoc23_*` symbols a newer suite's libnuma.a needs.
fn add_isoc23_shim(lib: &Path) -> Result<(), KselftestError> {
    let marker = lib.join("isoc23-shim.o");
    if marker.is_file() {
        return Ok(());
    }
    let src = lib.join("isoc23-shim.c");
    fs::write(&src, ISOC23_SHIM).map_err(io_err("write", &src))?;
    let log = lib.join("isoc23-shim.log");
    let tmp = lib.join(".isoc23-shim.o");
    let mut cc = Command::new("gcc");
    cc.args(["-O2", "-c"]).arg(&src).arg("-o").arg(&tmp);
    step("compile the __isoc23 shim", cc, &log)?;
    let mut ar = Command::new("ar");
    ar.arg("rs").arg(lib.join("libnuma.a")).arg(&tmp);
    step("add the __isoc23 shim to libnuma.a", ar, &log)?;
    fs::rename(&tmp, &marker).map_err(io_err("rename", &marker))?;
    Ok(())
}

fn sanitize(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "._-".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect()
}

//! Debian's static busybox (`busybox-static`), the guest's shell for
//! `--exec` and `--shell`: the package found in a suite's signed index,
//! downloaded and checked against it, its one binary unpacked into the
//! cache (`<cache>/busybox/<version>/busybox`). Packed into a cell's
//! initramfs only when asked for (see [`crate::debug`]).

use crate::kernel::apt;
use crate::kernel::cache::{Cache, WriteError};
use crate::kernel::debian::DebianMirror;
use std::path::PathBuf;

/// Debian's package.
pub const PACKAGE: &str = "busybox-static";

/// Suites searched, in order (the first that has the package wins).
pub const SUITES: &[&str] = &["trixie", "sid"];

/// Why there is no busybox.
#[derive(Debug, thiserror::Error)]
pub enum BusyboxError {
    /// No suite has the package (each suite's reason).
    #[error("no {PACKAGE} in Debian's {}: {why}", SUITES.join(", "))]
    NotFound {
        /// What each suite said.
        why: String,
    },
    /// The mirror could not be used.
    #[error(transparent)]
    Debian(#[from] crate::kernel::debian::DebianError),
    /// The cache.
    #[error(transparent)]
    Cache(#[from] crate::kernel::cache::CacheError),
    /// The package has no busybox binary.
    #[error("{deb}: {why}")]
    Unpack {
        /// The `.deb`.
        deb: PathBuf,
        /// Why.
        why: String,
    },
}

/// The static busybox of the newest `busybox-static` in the first of
/// [`SUITES`] that has one, from the cache when it is there.
pub fn fetch(mirror: Option<&str>) -> Result<PathBuf, BusyboxError> {
    let mirror = DebianMirror::discover(mirror)?;
    let cache = Cache::from_env()?;
    let mut why = Vec::new();
    for suite in SUITES {
        let entries = match crate::kselftest::suite_packages(&mirror, &cache, suite, PACKAGE) {
            Ok(e) => e,
            Err(e) => {
                why.push(format!("{suite}: {e}"));
                continue;
            }
        };
        let Some(e) = entries
            .into_iter()
            .max_by(|a, b| apt::dpkg_version_cmp(&a.version, &b.version))
        else {
            why.push(format!("{suite}: not in the index"));
            continue;
        };
        let version: String = e
            .version
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || "._-+".contains(c) {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        let rel = format!("busybox/{version}/busybox");
        let bin = cache.checked_path(&rel)?;
        let _lock = cache.lock(&format!("busybox-{version}"))?;
        if bin.is_file() {
            return Ok(bin);
        }
        let deb = mirror.download_deb(&e, &cache, &mut |_| {})?;
        let unpack = |why: String| BusyboxError::Unpack {
            deb: deb.clone(),
            why,
        };
        let bin = cache
            .write_atomic_with(&rel, |f| {
                crate::kernel::deb::extract_file(&deb, "bin/busybox", f).map(|_| ())
            })
            .map_err(|x| match x {
                WriteError::Cache(e) => BusyboxError::Cache(e),
                WriteError::Producer(e) => unpack(e.to_string()),
            })?;
        set_executable(&bin).map_err(|e| unpack(e.to_string()))?;
        crate::guestbin::check_static(&bin).map_err(|e| unpack(e.to_string()))?;
        return Ok(bin);
    }
    Err(BusyboxError::NotFound {
        why: why.join("; "),
    })
}

fn set_executable(p: &std::path::Path) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755))
}

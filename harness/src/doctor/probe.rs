//! Gathers the doctor's [`Facts`]. Every lookup goes through a [`Probe`]:
//! the `PATH` searched, the prefix under which files and apt's
//! configuration are read, how virtiofsd and KVM are found, and whether the
//! mirror is asked. [`Probe::host`] is this machine; tests point a probe at
//! a directory of stub executables and an empty prefix.

use super::{
    CacheFact, Check, Facts, MirrorFact, OsRelease, QemuFact, ARM64_REQUIREMENTS, HELPERS,
    REQUIREMENTS, VIRTIOFSD_BUILD_DEPS,
};
use crate::arch::Arch;
use crate::guestbin;
use crate::host::{self, Kvm, Qemu};
use crate::kernel::archive::{DebianMirror, MirrorOrigin, MIRROR_ENV};
use std::ffi::OsString;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// How long the mirror gets to answer.
pub const MIRROR_TIMEOUT: Duration = Duration::from_secs(5);

/// Where and how facts are looked up.
#[derive(Debug, Clone)]
pub struct Probe {
    /// The directories searched for programs, as in `$PATH`.
    pub path: OsString,
    /// Prefix of every absolute file checked, of `/etc/os-release` and of
    /// apt's configuration (`/` on the host).
    pub prefix: PathBuf,
    /// The QEMU binary: `$HARNESS_QEMU`, else `qemu-system-x86_64`.
    pub qemu: String,
    /// Where this harness's arm64 guest binaries come from, or why it
    /// has none (a fact of this binary and its environment).
    pub arm64_guest_bins: Result<String, String>,
    /// Finds virtiofsd (on the host: [`crate::share::find_virtiofsd`]).
    pub virtiofsd: fn(&Probe) -> Result<PathBuf, String>,
    /// Probes KVM (on the host: [`host::probe_kvm`]).
    pub kvm: fn() -> Kvm,
    /// `$HARNESS_DEBIAN_MIRROR`.
    pub mirror_env: Option<String>,
    /// How long the mirror gets to answer; none: it is not asked.
    pub mirror_timeout: Option<Duration>,
    /// The cache directory, or why there is none.
    pub cache_dir: Result<PathBuf, String>,
    /// Whether this process runs as root.
    pub is_root: bool,
}

impl Probe {
    /// This machine, as the harness's own commands see it.
    pub fn host() -> Probe {
        Probe {
            path: std::env::var_os("PATH").unwrap_or_default(),
            prefix: "/".into(),
            qemu: std::env::var("HARNESS_QEMU").unwrap_or_else(|_| "qemu-system-x86_64".into()),
            arm64_guest_bins: arm64_guest_bins(),
            virtiofsd: |_| crate::share::find_virtiofsd(),
            kvm: host::probe_kvm,
            mirror_env: std::env::var(MIRROR_ENV).ok(),
            mirror_timeout: Some(MIRROR_TIMEOUT),
            cache_dir: crate::kernel::cache::Cache::from_env()
                .map(|c| c.root().to_path_buf())
                .map_err(|e| e.to_string()),
            // SAFETY: geteuid has no preconditions and cannot fail.
            is_root: unsafe { libc::geteuid() } == 0,
        }
    }

    /// Programs from `bin` only, files and apt's configuration under
    /// `prefix`, virtiofsd on that `PATH` only, KVM unusable, the cache in
    /// `prefix/cache`, not root; the mirror asked with a short timeout.
    pub fn stubs(bin: &Path, prefix: &Path) -> Probe {
        Probe {
            path: bin.as_os_str().to_owned(),
            prefix: prefix.to_path_buf(),
            qemu: "qemu-system-x86_64".into(),
            arm64_guest_bins: arm64_guest_bins(),
            virtiofsd: |p| {
                p.which("virtiofsd")
                    .ok_or_else(|| "no virtiofsd on PATH".to_string())
            },
            kvm: || Kvm::Unusable("not probed".into()),
            mirror_env: None,
            mirror_timeout: Some(Duration::from_secs(2)),
            cache_dir: Ok(prefix.join("cache")),
            is_root: false,
        }
    }

    /// Without asking the mirror (for `harness setup`, and the hint of a
    /// failed run).
    pub fn offline(mut self) -> Probe {
        self.mirror_timeout = None;
        self
    }

    /// The executable `name` on this probe's `PATH`.
    pub fn which(&self, name: &str) -> Option<PathBuf> {
        std::env::split_paths(&self.path)
            .map(|d| d.join(name))
            .find(|p| is_executable(p))
    }

    /// Where the absolute path `abs` is under the prefix.
    pub fn file(&self, abs: &str) -> PathBuf {
        self.prefix.join(abs.trim_start_matches('/'))
    }
}

/// `$HARNESS_GUEST_BIN_DIR_ARM64`, else the set built in, else why none.
fn arm64_guest_bins() -> Result<String, String> {
    let env = guestbin::GUEST_BIN_DIR_ARM64_ENV;
    match std::env::var_os(env).filter(|d| !d.is_empty()) {
        Some(dir) => Ok(format!("${env}={}", Path::new(&dir).display())),
        None if guestbin::built_in(Arch::Arm64) => Ok(format!(
            "built into this harness ({} binaries)",
            guestbin::embedded_for(Arch::Arm64).files.len()
        )),
        None => {
            Err("this harness was built without them (no arm64 toolchain when it was built)".into())
        }
    }
}

/// An aarch64 Rust std the guest build can use: in the sysroot of the
/// `rustc` on `PATH` (rustup after `target add`), else Debian's beside
/// `/usr/bin/rustc` (the build script's order).
fn arm64_rust_std(p: &Probe) -> Result<PathBuf, String> {
    let t = guestbin::cross_target(Arch::Arm64);
    let rustc = p.which("rustc");
    if let Some(dir) = rustc
        .as_deref()
        .and_then(|r| guestbin::target_libdir(r, t.triple))
        .filter(|d| guestbin::has_std(d))
    {
        return Ok(dir);
    }
    let debian = p.file(t.debian_libdir);
    if p.file(guestbin::DEBIAN_RUSTC).is_file() && guestbin::has_std(&debian) {
        return Ok(debian);
    }
    let first = match rustc {
        Some(r) => format!("not in the sysroot of {}", r.display()),
        None => "no rustc on PATH".to_string(),
    };
    Err(format!(
        "no {} std: {first}, nor {} with {}",
        t.triple,
        guestbin::DEBIAN_RUSTC,
        t.debian_libdir
    ))
}

/// dpkg's foreign architectures: `<prefix>/var/lib/dpkg/arch` lists every
/// architecture added, the native one first.
fn foreign_archs(p: &Probe) -> Vec<String> {
    std::fs::read_to_string(p.file("/var/lib/dpkg/arch"))
        .unwrap_or_default()
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(String::from)
        .collect()
}

fn is_executable(p: &Path) -> bool {
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// Looks everything up (blocking: runs `qemu --version`, may ask the mirror).
pub fn probe(p: &Probe) -> Facts {
    let mut programs = std::collections::BTreeMap::new();
    let mut files = std::collections::BTreeSet::new();
    let names = REQUIREMENTS
        .iter()
        .chain(VIRTIOFSD_BUILD_DEPS)
        .chain(ARM64_REQUIREMENTS)
        .map(|r| r.check);
    for check in names.chain(HELPERS.iter().map(|h| Check::Program(h))) {
        match check {
            Check::Program(name) => {
                if let Some(path) = p.which(name) {
                    programs.insert(name.to_string(), path);
                }
            }
            Check::File(f) => {
                if p.file(f).exists() {
                    files.insert(f.to_string());
                }
            }
        }
    }
    Facts {
        os: OsRelease::read(&p.prefix),
        qemu: qemu(p, &p.qemu),
        qemu_arm64: qemu(p, Arch::Arm64.qemu_binary()),
        arm64_rust_std: arm64_rust_std(p),
        arm64_guest_bins: p.arm64_guest_bins.clone(),
        foreign_archs: foreign_archs(p),
        kvm: (p.kvm)(),
        virtiofsd: (p.virtiofsd)(p),
        programs,
        files,
        mirror: mirror(p),
        cache: p.cache_dir.as_ref().map(|d| cache(d)).map_err(Clone::clone),
        is_root: p.is_root,
    }
}

fn qemu(p: &Probe, binary: &str) -> QemuFact {
    let found = if binary.contains('/') {
        Some(PathBuf::from(binary)).filter(|q| is_executable(q))
    } else {
        p.which(binary)
    };
    let Some(path) = found else {
        return QemuFact::Missing {
            binary: binary.to_string(),
        };
    };
    let out = match std::process::Command::new(&path)
        .arg("--version")
        .stdin(std::process::Stdio::null())
        .output()
    {
        Ok(o) => o,
        Err(e) => {
            return QemuFact::Unusable {
                path,
                why: e.to_string(),
            }
        }
    };
    let text = String::from_utf8_lossy(&out.stdout);
    match host::parse_qemu_version(&text) {
        Some(version) => QemuFact::Found(Qemu { path, version }),
        None => QemuFact::Unusable {
            path,
            why: format!("printed {:?}", text.lines().next().unwrap_or("")),
        },
    }
}

fn mirror(p: &Probe) -> Result<MirrorFact, String> {
    let m = DebianMirror::discover_in(None, p.mirror_env.as_deref(), &p.prefix)
        .map_err(|e| e.to_string())?;
    let found_in = match m.origin() {
        MirrorOrigin::Explicit => "--debian-mirror".to_string(),
        MirrorOrigin::Env => format!("${MIRROR_ENV}"),
        MirrorOrigin::AptConfig(f) => f.display().to_string(),
    };
    let suite = m.suites().first().map_or("sid", String::as_str);
    let answer = p
        .mirror_timeout
        .map(|t| ask(&format!("{}/dists/{suite}/InRelease", m.url()), t));
    Ok(MirrorFact {
        url: m.url().to_string(),
        found_in,
        answer,
    })
}

/// One HEAD request: does the mirror answer, with a success status?
fn ask(url: &str, timeout: Duration) -> Result<(), String> {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_global(Some(timeout))
        .user_agent(concat!("futex-harness/", env!("CARGO_PKG_VERSION")))
        .build()
        .into();
    agent
        .head(url)
        .call()
        .map(drop)
        .map_err(|e| format!("HEAD {url}: {e}"))
}

/// The cache directory, or where it would be created: asked, not written
/// (the doctor changes nothing, and a failed run's hint caches nothing).
fn cache(dir: &Path) -> CacheFact {
    let existing = dir.ancestors().find(|a| a.exists()).unwrap_or(dir);
    let writable = c_path(existing)
        .ok_or_else(|| "path contains a NUL byte".to_string())
        .and_then(|c| {
            // SAFETY: `c` is a valid C string.
            match unsafe { libc::access(c.as_ptr(), libc::W_OK | libc::X_OK) } {
                0 => Ok(()),
                _ => Err(format!(
                    "{}: {}",
                    existing.display(),
                    std::io::Error::last_os_error()
                )),
            }
        });
    CacheFact {
        dir: dir.to_path_buf(),
        writable,
        free_bytes: free_bytes(existing),
    }
}

fn c_path(p: &Path) -> Option<std::ffi::CString> {
    use std::os::unix::ffi::OsStrExt;
    std::ffi::CString::new(p.as_os_str().as_bytes()).ok()
}

/// Bytes available to this user on the file system of `dir` (statvfs).
fn free_bytes(dir: &Path) -> Option<u64> {
    let c = c_path(dir)?;
    // SAFETY: `c` is a valid C string; `s` is written by statvfs only.
    let mut s: libc::statvfs = unsafe { std::mem::zeroed() };
    let rc = unsafe { libc::statvfs(c.as_ptr(), &mut s) };
    (rc == 0).then(|| s.f_bavail.saturating_mul(s.f_frsize))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stub_directory_and_empty_prefix() {
        let d = tempfile::tempdir().unwrap();
        let bin = d.path().join("bin");
        std::fs::create_dir(&bin).unwrap();
        let make = bin.join("make");
        std::fs::write(&make, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&make, std::fs::Permissions::from_mode(0o755)).unwrap();
        // Not executable: not found.
        std::fs::write(bin.join("flex"), "").unwrap();
        std::fs::create_dir_all(d.path().join("usr/include")).unwrap();
        std::fs::write(d.path().join("usr/include/libelf.h"), "").unwrap();
        std::fs::create_dir_all(d.path().join("var/lib/dpkg")).unwrap();
        std::fs::write(d.path().join("var/lib/dpkg/arch"), "amd64\narm64\n").unwrap();
        let mut p = Probe::stubs(&bin, d.path()).offline();
        p.mirror_env = Some("http://127.0.0.1:9/debian".into());
        let f = probe(&p);
        assert!(f.has(Check::Program("make")));
        assert!(!f.has(Check::Program("flex")));
        assert!(f.has(Check::File("/usr/include/libelf.h")));
        assert!(!f.has(Check::File(super::super::LIBC_A)));
        assert!(matches!(f.qemu, QemuFact::Missing { .. }));
        assert!(matches!(f.qemu_arm64, QemuFact::Missing { .. }));
        assert!(f.arm64_rust_std.is_err());
        assert_eq!(f.foreign_archs, ["amd64", "arm64"]);
        assert_eq!(f.os, None);
        let m = f.mirror.unwrap();
        assert_eq!(
            (m.found_in.as_str(), m.answer),
            ("$HARNESS_DEBIAN_MIRROR", None)
        );
        let c = f.cache.unwrap();
        assert_eq!(c.writable, Ok(()));
        assert!(c.free_bytes.is_some_and(|b| b > 0));
        assert!(!d.path().join("cache").exists(), "the probe wrote nothing");
    }
}

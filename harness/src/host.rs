//! Facts about the host that the QEMU argv depends on: the QEMU binary and
//! its version, and whether KVM really works. Probed once; the choice of
//! accelerator from them is a pure function.

use crate::qemu::Accel;
use std::path::{Path, PathBuf};

/// Errors finding QEMU.
#[derive(Debug, thiserror::Error)]
pub enum HostError {
    /// No QEMU binary.
    #[error(
        "{binary} not found (set {env} or install it: apt-get install {package}, or harness setup{setup_arch})"
    )]
    QemuMissing {
        /// What was looked for.
        binary: String,
        /// The variable that names another binary.
        env: &'static str,
        /// The package that has it.
        package: &'static str,
        /// ` --arch arm64` where setup needs it.
        setup_arch: &'static str,
    },
    /// QEMU did not answer `--version` sensibly.
    #[error("{path} --version failed or printed no version: {detail}")]
    QemuVersion {
        /// The binary.
        path: PathBuf,
        /// What went wrong.
        detail: String,
    },
    /// QEMU is too old for the options we use.
    #[error("{path} is QEMU {version}; need >= {MIN_QEMU_MAJOR}.0 (-accel, socket chardevs)")]
    QemuTooOld {
        /// The binary.
        path: PathBuf,
        /// Its version.
        version: String,
    },
    /// `--accel kvm` asked for but KVM does not work here.
    #[error("--accel kvm: {0}")]
    KvmUnusable(String),
}

/// Oldest QEMU major version accepted.
pub const MIN_QEMU_MAJOR: u32 = 6;

/// Below this major version TCG is known to corrupt some guests: Debian's
/// 6.12 kernel crashed in about 3 boots in 10 under QEMU 7.2 (double
/// faults, SIGSEGVs, soft lockups) and in none of 12 under QEMU 10.
pub const RELIABLE_TCG_QEMU_MAJOR: u32 = 8;

/// A note when this QEMU's TCG is known to be unreliable.
pub fn tcg_note(qemu: &Qemu) -> Option<String> {
    (qemu.major()? < RELIABLE_TCG_QEMU_MAJOR).then(|| {
        format!(
            "QEMU {} emulates some kernels unreliably under TCG (seen: Debian 6.12 crashing at random); QEMU >= {RELIABLE_TCG_QEMU_MAJOR} is recommended (Debian 12: bookworm-backports)",
            qemu.version
        )
    })
}

/// The QEMU we run.
#[derive(Debug, Clone)]
pub struct Qemu {
    /// Absolute path.
    pub path: PathBuf,
    /// e.g. `7.2.19`.
    pub version: String,
}

impl Qemu {
    /// The major version (`7` of `7.2.19`), when the version has one.
    pub fn major(&self) -> Option<u32> {
        self.version.split('.').next()?.parse().ok()
    }
}

/// What `--accel` asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum AccelChoice {
    /// KVM where hardware KVM really works, else TCG.
    Auto,
    /// KVM or fail.
    Kvm,
    /// TCG always.
    Tcg,
}

/// Whether KVM can be used, and if not, why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kvm {
    /// /dev/kvm is usable and backed by a hardware module.
    Usable,
    /// Why not.
    Unusable(String),
}

/// Finds QEMU (`$HARNESS_QEMU`, else `qemu-system-x86_64` on `PATH`) and its version.
pub fn find_qemu() -> Result<Qemu, HostError> {
    find_qemu_for(crate::arch::Arch::X86_64)
}

/// The variable naming the QEMU binary of `arch` (`HARNESS_QEMU` for
/// x86-64, as before there were two).
pub fn qemu_env(arch: crate::arch::Arch) -> &'static str {
    match arch {
        crate::arch::Arch::X86_64 => "HARNESS_QEMU",
        crate::arch::Arch::Arm64 => "HARNESS_QEMU_ARM64",
    }
}

/// Finds the QEMU system emulator of `arch` (its variable, else
/// [`crate::arch::Arch::qemu_binary`] on `PATH`) and its version.
pub fn find_qemu_for(arch: crate::arch::Arch) -> Result<Qemu, HostError> {
    let env = qemu_env(arch);
    let binary = std::env::var(env).unwrap_or_else(|_| arch.qemu_binary().into());
    let path = if binary.contains('/') {
        Some(PathBuf::from(&binary)).filter(|p| p.is_file())
    } else {
        std::env::var_os("PATH").and_then(|paths| {
            std::env::split_paths(&paths)
                .map(|d| d.join(&binary))
                .find(|p| p.is_file())
        })
    }
    .ok_or(HostError::QemuMissing {
        binary: binary.clone(),
        env,
        package: arch.qemu_package(),
        setup_arch: match arch {
            crate::arch::Arch::X86_64 => "",
            crate::arch::Arch::Arm64 => " --arch arm64",
        },
    })?;
    let out = std::process::Command::new(&path)
        .arg("--version")
        .output()
        .map_err(|e| HostError::QemuVersion {
            path: path.clone(),
            detail: e.to_string(),
        })?;
    let text = String::from_utf8_lossy(&out.stdout);
    let version = parse_qemu_version(&text).ok_or_else(|| HostError::QemuVersion {
        path: path.clone(),
        detail: text.lines().next().unwrap_or("").to_string(),
    })?;
    let major: u32 = version
        .split('.')
        .next()
        .and_then(|m| m.parse().ok())
        .unwrap_or(0);
    if major < MIN_QEMU_MAJOR {
        return Err(HostError::QemuTooOld { path, version });
    }
    Ok(Qemu { path, version })
}

/// `QEMU emulator version 7.2.19 (Debian ...)` -> `7.2.19`.
pub fn parse_qemu_version(text: &str) -> Option<String> {
    let rest = text.lines().next()?.split("version ").nth(1)?;
    let v: String = rest
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == '.')
        .collect();
    (!v.is_empty()).then_some(v)
}

/// Probes KVM: `/dev/kvm` must open read-write and a hardware module
/// (`kvm_intel`/`kvm_amd`) must be loaded. A paravirtual KVM (as on these
/// development machines) crashes stock kernels, so it does not count.
///
/// `HARNESS_FORCE_KVM=1` skips the hardware-module check (the device must
/// still open): for testing the "KVM failed, retried under TCG" path on a
/// paravirtual KVM, and for hosts whose KVM module has another name.
pub fn probe_kvm() -> Kvm {
    let force = std::env::var_os(FORCE_KVM_ENV).is_some_and(|v| v == "1");
    probe_kvm_forced(Path::new("/dev/kvm"), Path::new("/sys/module"), force)
}

/// Environment variable that makes [`probe_kvm`] accept any openable `/dev/kvm`.
pub const FORCE_KVM_ENV: &str = "HARNESS_FORCE_KVM";

fn probe_kvm_forced(dev: &Path, modules: &Path, force: bool) -> Kvm {
    match probe_kvm_at(dev, modules) {
        Kvm::Unusable(why) if force && !why.starts_with("cannot open") => Kvm::Usable,
        k => k,
    }
}

fn probe_kvm_at(dev: &Path, modules: &Path) -> Kvm {
    if let Err(e) = std::fs::OpenOptions::new().read(true).write(true).open(dev) {
        return Kvm::Unusable(format!("cannot open {}: {e}", dev.display()));
    }
    if ["kvm_intel", "kvm_amd"]
        .iter()
        .any(|m| modules.join(m).exists())
    {
        Kvm::Usable
    } else {
        Kvm::Unusable(format!(
            "{} exists but no hardware KVM module (kvm_intel/kvm_amd) is loaded",
            dev.display()
        ))
    }
}

/// Picks the accelerator; the note says why when `auto` fell back to TCG.
pub fn choose_accel(choice: AccelChoice, kvm: &Kvm) -> Result<(Accel, Option<String>), HostError> {
    choose_accel_for(choice, kvm, crate::arch::Arch::host_or_default())
}

/// [`choose_accel`] for a guest of `arch`: KVM runs only guests of the
/// host's own architecture, so any other is TCG (or an error when KVM
/// was asked for).
pub fn choose_accel_for(
    choice: AccelChoice,
    kvm: &Kvm,
    arch: crate::arch::Arch,
) -> Result<(Accel, Option<String>), HostError> {
    let foreign;
    let kvm = match crate::arch::Arch::host() {
        Some(h) if h == arch => kvm,
        host => {
            foreign = Kvm::Unusable(format!(
                "KVM runs only guests of the host's architecture ({}), not {arch}",
                host.map_or(std::env::consts::ARCH, |h| h.name())
            ));
            &foreign
        }
    };
    match (choice, kvm) {
        (AccelChoice::Tcg, _) => Ok((Accel::Tcg, None)),
        (AccelChoice::Kvm | AccelChoice::Auto, Kvm::Usable) => Ok((Accel::Kvm, None)),
        (AccelChoice::Kvm, Kvm::Unusable(why)) => Err(HostError::KvmUnusable(why.clone())),
        (AccelChoice::Auto, Kvm::Unusable(why)) => Ok((
            Accel::Tcg,
            Some(format!("using TCG (software emulation, slower): {why}")),
        )),
    }
}

/// Whether QEMU's stderr shows KVM failing in a way TCG would not
/// (then the cell is retried under TCG).
pub fn is_kvm_failure(stderr: &str) -> bool {
    [
        "KVM internal error",
        "failed to set MSR",
        "kvm run failed",
        "Could not access KVM kernel module",
    ]
    .iter()
    .any(|p| stderr.contains(p))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn qemu_version_lines() {
        assert_eq!(
            parse_qemu_version(
                "QEMU emulator version 7.2.19 (Debian 1:7.2+dfsg-7+deb12u18)\nCopyright"
            ),
            Some("7.2.19".into())
        );
        assert_eq!(parse_qemu_version("garbage"), None);
    }

    #[test]
    fn old_qemu_gets_a_tcg_note() {
        let q = |v: &str| Qemu {
            path: "/q".into(),
            version: v.into(),
        };
        assert!(tcg_note(&q("7.2.22")).unwrap().contains("QEMU 7.2.22"));
        assert_eq!(tcg_note(&q("10.0.2")), None);
    }

    #[test]
    fn accel_choice_table() {
        let no = Kvm::Unusable("no module".into());
        assert_eq!(
            choose_accel(AccelChoice::Tcg, &Kvm::Usable).unwrap(),
            (Accel::Tcg, None)
        );
        assert_eq!(
            choose_accel(AccelChoice::Auto, &Kvm::Usable).unwrap().0,
            Accel::Kvm
        );
        let (a, note) = choose_accel(AccelChoice::Auto, &no).unwrap();
        assert_eq!(a, Accel::Tcg);
        assert!(note.unwrap().contains("no module"));
        assert!(choose_accel(AccelChoice::Kvm, &no)
            .unwrap_err()
            .to_string()
            .contains("no module"));
    }

    #[test]
    fn kvm_probe_needs_device_and_hardware_module() {
        let d = tempfile::tempdir().unwrap();
        let dev = d.path().join("kvm");
        assert!(
            matches!(probe_kvm_at(&dev, d.path()), Kvm::Unusable(w) if w.contains("cannot open"))
        );
        std::fs::write(&dev, "").unwrap();
        assert!(
            matches!(probe_kvm_at(&dev, d.path()), Kvm::Unusable(w) if w.contains("no hardware KVM"))
        );
        assert_eq!(probe_kvm_forced(&dev, d.path(), true), Kvm::Usable);
        std::fs::create_dir(d.path().join("kvm_amd")).unwrap();
        assert_eq!(probe_kvm_at(&dev, d.path()), Kvm::Usable);
        assert!(matches!(
            probe_kvm_forced(&d.path().join("none"), d.path(), true),
            Kvm::Unusable(_)
        ));
    }

    #[test]
    fn kvm_failures_are_recognised() {
        assert!(is_kvm_failure("KVM internal error. Suberror: 1"));
        assert!(is_kvm_failure(
            "qemu: error: failed to set MSR 0x10a to 0x0"
        ));
        assert!(!is_kvm_failure(
            "qemu-system-x86_64: terminating on signal 15"
        ));
    }
}

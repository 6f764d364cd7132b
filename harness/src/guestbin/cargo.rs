//! The `cargo build` of the static guest binaries, for the host's x86-64
//! set and the arm64 set. The harness' build script compiles this file too
//! (`#[path]`), so the command it runs and the one this crate documents and
//! tests are the same code; hence no `Arch` here (the script has no serde,
//! clap or object), only the targets' facts as data.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The target triple of the host set (the one `--list` is run from).
pub const GUEST_TARGET: &str = "x86_64-unknown-linux-gnu";

/// What building guest binaries for one target needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CrossTarget {
    /// The Rust target triple.
    pub triple: &'static str,
    /// The C cross linker (`None`: the host's `cc`).
    pub linker: Option<&'static str>,
    /// The static glibc the linker needs (`-C target-feature=+crt-static`).
    pub libc_a: &'static str,
    /// Debian's Rust std for the target, for Debian's `/usr/bin/rustc`
    /// (`rustup target add` cannot run everywhere; Debian's package can).
    pub debian_libdir: &'static str,
    /// The Debian packages that provide all of it (`harness setup --arch
    /// arm64` installs them; the `:arm64` one needs `dpkg --add-architecture`).
    pub packages: &'static [&'static str],
}

/// The host set: the toolchain that builds the harness builds it.
pub const X86_64: CrossTarget = CrossTarget {
    triple: GUEST_TARGET,
    linker: None,
    libc_a: "/usr/lib/x86_64-linux-gnu/libc.a",
    debian_libdir: "/usr/lib/rustlib/x86_64-unknown-linux-gnu/lib",
    packages: &["gcc", "libc6-dev"],
};

/// The arm64 set: cross-linked with Debian's aarch64 gcc and glibc.
pub const ARM64: CrossTarget = CrossTarget {
    triple: "aarch64-unknown-linux-gnu",
    linker: Some("aarch64-linux-gnu-gcc"),
    libc_a: "/usr/aarch64-linux-gnu/lib/libc.a",
    debian_libdir: "/usr/lib/rustlib/aarch64-unknown-linux-gnu/lib",
    packages: &[
        "gcc-aarch64-linux-gnu",
        "libc6-dev-arm64-cross",
        "rustc-web",
        "libstd-rust-web-dev:arm64",
    ],
};

/// Debian's rustc (from `rustc-web`), whose sysroot is `/usr`.
pub const DEBIAN_RUSTC: &str = "/usr/bin/rustc";

/// Variables a build script inherits from the outer cargo that would change
/// a nested build: flags meant for the harness (`CARGO_ENCODED_RUSTFLAGS`
/// wins over `RUSTFLAGS`), its target dir and target, and clippy's wrapper
/// (`cargo clippy` would lint guest-tests and fingerprint it differently).
pub const OUTER_CARGO_ENV: &[&str] = &[
    "CARGO_ENCODED_RUSTFLAGS",
    "CARGO_BUILD_RUSTFLAGS",
    "CARGO_TARGET_DIR",
    "CARGO_BUILD_TARGET",
    "CARGO_BUILD_TARGET_DIR",
    "RUSTC_WORKSPACE_WRAPPER",
];

/// Which rustc compiles a set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rustc {
    /// The one the outer cargo uses (`$RUSTC`, else `rustc`): it has the
    /// target's std (always the host's; arm64's after `rustup target add`).
    Default,
    /// Another rustc whose sysroot has the target's std (Debian's).
    At(PathBuf),
}

/// What is missing to build a set (the build script prints it once; the
/// harness says it when arm64 binaries are asked for and none are built in).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Missing {
    /// The target triple.
    pub triple: &'static str,
    /// What was looked for and not found, one item each.
    pub what: Vec<String>,
}

impl std::fmt::Display for Missing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "no {} toolchain: {}", self.triple, self.what.join("; "))
    }
}

/// Whether `libdir` holds a Rust std (`libstd-*.rlib`).
pub fn has_std(libdir: &Path) -> bool {
    std::fs::read_dir(libdir).is_ok_and(|d| {
        d.flatten().any(|e| {
            let n = e.file_name();
            let n = n.to_string_lossy();
            n.starts_with("libstd-") && n.ends_with(".rlib")
        })
    })
}

/// The rustc the outer build uses (cargo sets `$RUSTC` for build scripts).
pub fn default_rustc() -> PathBuf {
    std::env::var_os("RUSTC").map_or_else(|| "rustc".into(), PathBuf::from)
}

/// `rustc --print target-libdir --target T` of `rustc` (a rustup toolchain
/// prints the directory whether or not the target is installed).
pub fn target_libdir(rustc: &Path, triple: &str) -> Option<PathBuf> {
    let o = Command::new(rustc)
        .args(["--print", "target-libdir", "--target", triple])
        .stderr(std::process::Stdio::null())
        .output()
        .ok()?;
    let s = String::from_utf8_lossy(&o.stdout).trim().to_string();
    (o.status.success() && !s.is_empty()).then(|| s.into())
}

/// The executable `name` on `$PATH`.
pub fn on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// The choice between the default rustc and Debian's (pure): the default
/// when its sysroot has the target (rustup, GitHub's runners), else Debian's.
pub fn choose_rustc(default_has_std: bool, debian_has_std: bool) -> Option<Rustc> {
    if default_has_std {
        Some(Rustc::Default)
    } else if debian_has_std {
        Some(Rustc::At(DEBIAN_RUSTC.into()))
    } else {
        None
    }
}

/// Looks for what building `t` needs on this machine: a rustc with its std,
/// the cross linker and static glibc. The host set never fails here (its
/// build fails by itself, with cargo's message, when something is missing).
pub fn find_rustc(t: &CrossTarget) -> Result<Rustc, Missing> {
    if t.linker.is_none() {
        return Ok(Rustc::Default);
    }
    let default = target_libdir(&default_rustc(), t.triple).is_some_and(|d| has_std(&d));
    let debian = Path::new(DEBIAN_RUSTC).is_file() && has_std(Path::new(t.debian_libdir));
    let mut what = Vec::new();
    let rustc = choose_rustc(default, debian);
    if rustc.is_none() {
        what.push(format!(
            "no Rust std for {} (`rustup target add {}`, or Debian's rustc-web and libstd-rust-web-dev:arm64 in {})",
            t.triple, t.triple, t.debian_libdir
        ));
    }
    if let Some(linker) = t.linker {
        if on_path(linker).is_none() {
            what.push(format!("no {linker} on PATH (gcc-aarch64-linux-gnu)"));
        }
    }
    if !Path::new(t.libc_a).is_file() {
        what.push(format!("no {} (libc6-dev-arm64-cross)", t.libc_a));
    }
    match rustc {
        Some(r) if what.is_empty() => Ok(r),
        _ => Err(Missing {
            triple: t.triple,
            what,
        }),
    }
}

/// The `cargo build` command for the guest binaries of `t` (pure: returned,
/// not run): a release build of `guest-tests` with `+crt-static`, in
/// `target_dir` (never the host build's, so its flags and lock never mix
/// with the host build's), with `rustc` and `t`'s linker.
pub fn build_command_for(
    t: &CrossTarget,
    rustc: &Rustc,
    workspace: &Path,
    target_dir: &Path,
) -> Command {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut c = Command::new(cargo);
    c.current_dir(workspace)
        .args([
            "build",
            "--quiet",
            "--release",
            "--package",
            "guest-tests",
            "--bins",
        ])
        .args(["--target", t.triple])
        .arg("--target-dir")
        .arg(target_dir);
    for var in OUTER_CARGO_ENV {
        c.env_remove(var);
    }
    c.env("RUSTFLAGS", "-C target-feature=+crt-static");
    if let Rustc::At(path) = rustc {
        // rustup's cargo drives any rustc; its own has no aarch64 std here.
        c.env("RUSTC", path);
    }
    if let Some(linker) = t.linker {
        c.env(linker_env(t.triple), linker);
    }
    c
}

/// `CARGO_TARGET_<TRIPLE>_LINKER`.
pub fn linker_env(triple: &str) -> String {
    format!(
        "CARGO_TARGET_{}_LINKER",
        triple.to_ascii_uppercase().replace('-', "_")
    )
}

/// The host set's command ([`build_command_for`] with [`X86_64`]).
pub fn build_command(workspace: &Path, target_dir: &Path) -> Command {
    build_command_for(&X86_64, &Rustc::Default, workspace, target_dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(c: &Command) -> Vec<String> {
        c.get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect()
    }

    fn env(c: &Command, var: &str) -> Option<Option<String>> {
        c.get_envs()
            .find(|(k, _)| *k == var)
            .map(|(_, v)| v.map(|v| v.to_string_lossy().into_owned()))
    }

    #[test]
    fn host_command_is_static_and_separate() {
        let c = build_command(Path::new("/ws"), Path::new("/ws/target/guest"));
        let a = args(&c);
        assert!(a
            .windows(2)
            .any(|w| w == ["--target-dir", "/ws/target/guest"]));
        assert!(a.windows(2).any(|w| w == ["--target", GUEST_TARGET]));
        assert!(env(&c, "RUSTFLAGS")
            .flatten()
            .is_some_and(|v| v.contains("crt-static")));
        // The outer build's flags and wrapper are removed, not inherited.
        for var in ["CARGO_ENCODED_RUSTFLAGS", "RUSTC_WORKSPACE_WRAPPER"] {
            assert_eq!(env(&c, var), Some(None), "{var}");
        }
        // The outer rustc, the host's linker.
        assert_eq!(env(&c, "RUSTC"), None);
        assert!(!c
            .get_envs()
            .any(|(k, _)| k.to_string_lossy().ends_with("_LINKER")));
    }

    #[test]
    fn arm64_command_with_debians_rustc_and_the_cross_linker() {
        let c = build_command_for(
            &ARM64,
            &Rustc::At(DEBIAN_RUSTC.into()),
            Path::new("/ws"),
            Path::new("/out/guest-target-arm64"),
        );
        let a = args(&c);
        assert_eq!(
            a,
            [
                "build",
                "--quiet",
                "--release",
                "--package",
                "guest-tests",
                "--bins",
                "--target",
                "aarch64-unknown-linux-gnu",
                "--target-dir",
                "/out/guest-target-arm64",
            ]
        );
        assert_eq!(env(&c, "RUSTC"), Some(Some("/usr/bin/rustc".into())));
        assert_eq!(
            env(&c, "CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER"),
            Some(Some("aarch64-linux-gnu-gcc".into()))
        );
        assert_eq!(
            env(&c, "RUSTFLAGS"),
            Some(Some("-C target-feature=+crt-static".into()))
        );
        // A rustup toolchain with the target: the outer rustc stays.
        let c = build_command_for(&ARM64, &Rustc::Default, Path::new("/ws"), Path::new("/t"));
        assert_eq!(env(&c, "RUSTC"), None);
    }

    #[test]
    fn a_rustc_with_the_target_wins_over_debians() {
        assert_eq!(choose_rustc(true, true), Some(Rustc::Default));
        assert_eq!(
            choose_rustc(false, true),
            Some(Rustc::At("/usr/bin/rustc".into()))
        );
        assert_eq!(choose_rustc(false, false), None);
        assert_eq!(find_rustc(&X86_64), Ok(Rustc::Default));
    }

    #[test]
    fn what_is_missing_is_said_in_one_line() {
        let m = Missing {
            triple: ARM64.triple,
            what: vec![
                "no aarch64-linux-gnu-gcc on PATH (gcc-aarch64-linux-gnu)".into(),
                "no /usr/aarch64-linux-gnu/lib/libc.a (libc6-dev-arm64-cross)".into(),
            ],
        };
        assert_eq!(
            m.to_string(),
            "no aarch64-unknown-linux-gnu toolchain: no aarch64-linux-gnu-gcc on PATH (gcc-aarch64-linux-gnu); no /usr/aarch64-linux-gnu/lib/libc.a (libc6-dev-arm64-cross)"
        );
        assert_eq!(
            linker_env(ARM64.triple),
            "CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER"
        );
    }

    #[test]
    fn std_is_found_by_its_rlib() {
        let d = tempfile::tempdir().unwrap();
        assert!(!has_std(d.path()));
        assert!(!has_std(&d.path().join("absent")));
        std::fs::write(d.path().join("libstd-0123abcd.rlib"), "").unwrap();
        assert!(has_std(d.path()));
    }
}

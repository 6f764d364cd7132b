//! `harness setup`: installs what the doctor found missing, on Debian and
//! Ubuntu, with apt (as root, or through sudo) and, where no package has
//! virtiofsd, `cargo install`. [`plan`] is a pure function of the doctor's
//! [`Facts`] (which include os-release) and apt's sources; [`execute`]
//! runs its steps one by one, each said before it runs. Nothing missing:
//! an empty plan, on any system. arm64 guests' pieces (`--arch arm64`,
//! [`plan_for`]) are installed only when asked: the x86 plan needs none.

use crate::arch::Arch;
use crate::doctor::{
    Distro, Facts, Need, QemuFact, ARM64_REQUIREMENTS, QEMU_ARM64_PACKAGE, QEMU_PACKAGE,
    REQUIREMENTS, VIRTIOFSD_BUILD_DEPS, VIRTIOFSD_VERSION,
};
use crate::host;
use crate::kernel::archive::apt::{self, AptSource};
use std::io::Write;
use std::process::{Command, Stdio};

/// The apt sources file `harness setup` writes (Debian 12's backports).
pub const BACKPORTS_LIST: &str = "/etc/apt/sources.list.d/harness-backports.list";

/// How steps that need root get it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Privilege {
    /// This process is root.
    Root,
    /// Through `sudo`.
    Sudo,
    /// Neither: root steps are refused.
    Unavailable,
}

/// One command of a plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Step {
    /// Why it runs.
    pub why: String,
    /// The command (without `sudo`).
    pub argv: Vec<String>,
    /// What it reads on its standard input (a file's text for `tee`).
    pub stdin: Option<String>,
    /// Whether it runs as root (apt) or as this user (cargo).
    pub as_root: bool,
}

impl Step {
    /// The argv as run: `sudo` first when root is reached through it.
    pub fn command(&self, privilege: Privilege) -> Vec<String> {
        let mut argv = Vec::new();
        if self.as_root && privilege == Privilege::Sudo {
            argv.push("sudo".to_string());
        }
        argv.extend(self.argv.iter().cloned());
        argv
    }

    /// The command as a shell line (the text piped in shown with `echo`).
    pub fn shell_line(&self, privilege: Privilege) -> String {
        let words: Vec<String> = self.command(privilege).iter().map(|w| quote(w)).collect();
        match &self.stdin {
            Some(text) => format!("echo {} | {}", quote(text.trim_end()), words.join(" ")),
            None => words.join(" "),
        }
    }
}

fn quote(w: &str) -> String {
    let plain = !w.is_empty()
        && w.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=:+,@".contains(c));
    if plain {
        w.to_string()
    } else {
        format!("'{}'", w.replace('\'', r"'\''"))
    }
}

/// What `harness setup` will do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// The commands, in order; empty when nothing is missing.
    pub steps: Vec<Step>,
    /// What setup says but does not do.
    pub notes: Vec<String>,
    /// How root steps get root.
    pub privilege: Privilege,
}

impl Plan {
    /// Every command as a shell line.
    pub fn shell_lines(&self) -> Vec<String> {
        self.steps
            .iter()
            .map(|s| s.shell_line(self.privilege))
            .collect()
    }
}

/// Why setup does not (or could not) install.
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    /// Something is missing on a system setup does not know.
    #[error("{why}; missing here: {}; install them by hand (`harness doctor` says what each is)", missing.join(", "))]
    Unsupported {
        /// Which system, and which ones setup knows.
        why: String,
        /// What is missing.
        missing: Vec<String>,
    },
    /// QEMU has to come from backports, but apt names no Debian mirror.
    #[error("QEMU from {suite} is needed, but apt's sources name no Debian mirror to add it on: add `deb <a Debian mirror> {suite} main` to {BACKPORTS_LIST}, then run `harness setup` again")]
    NoMirror {
        /// The suite (`bookworm-backports`).
        suite: String,
    },
    /// Not root and no sudo.
    #[error("root is needed and this is not root, and there is no sudo: run as root:\n{commands}")]
    NoPrivilege {
        /// The commands, one a line.
        commands: String,
    },
    /// A step could not be started.
    #[error("cannot run `{command}`: {source}")]
    Spawn {
        /// The command line.
        command: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A step failed.
    #[error("`{command}` failed ({status})")]
    Failed {
        /// The command line.
        command: String,
        /// Its exit status.
        status: String,
    },
}

fn apt_get(args: &[&str]) -> Vec<String> {
    ["env", "DEBIAN_FRONTEND=noninteractive", "apt-get"]
        .iter()
        .chain(args)
        .map(|s| s.to_string())
        .collect()
}

fn root_step(why: impl Into<String>, argv: Vec<String>) -> Step {
    Step {
        why: why.into(),
        argv,
        stdin: None,
        as_root: true,
    }
}

/// What `harness setup` does on the host these facts describe, with apt's
/// `sources` (pure): x86-64 guests only ([`plan_for`] `[X86_64]`).
pub fn plan(facts: &Facts, sources: &[AptSource]) -> Result<Plan, SetupError> {
    plan_for(facts, sources, &[Arch::X86_64])
}

/// What `harness setup --arch ...` does (pure): what every run needs, and
/// with [`Arch::Arm64`] among `arches` also QEMU's aarch64 emulator and
/// the cross toolchain the harness' build embeds the
/// arm64 guest binaries with (an aarch64 Rust std from Debian after
/// `dpkg --add-architecture arm64`, or from rustup on Ubuntu).
pub fn plan_for(facts: &Facts, sources: &[AptSource], arches: &[Arch]) -> Result<Plan, SetupError> {
    let arm64 = arches.contains(&Arch::Arm64);
    let privilege = if facts.is_root {
        Privilege::Root
    } else if facts.programs.contains_key("sudo") {
        Privilege::Sudo
    } else {
        Privilege::Unavailable
    };
    let mut plan = Plan {
        steps: Vec::new(),
        notes: Vec::new(),
        privilege,
    };
    let distro = facts.os.as_ref().map(Distro::of);
    let known = distro.as_ref().and_then(|d| d.as_ref().ok());

    // What is missing, by the doctor's names; optional things are left.
    let mut missing: Vec<String> = REQUIREMENTS
        .iter()
        .filter(|r| r.need != Need::Optional && !facts.has(r.check))
        .map(|r| r.what.to_string())
        .collect();
    let major = facts.qemu_major().unwrap_or(0);
    let version = match &facts.qemu {
        QemuFact::Found(q) => q.version.as_str(),
        _ => "",
    };
    let qemu_absent = !matches!(facts.qemu, QemuFact::Found(_)) || major < host::MIN_QEMU_MAJOR;
    let qemu_old = !qemu_absent && major < host::RELIABLE_TCG_QEMU_MAJOR;
    // arm64 guests on another host always run under TCG.
    let arm64_major = facts.qemu_arm64_major().unwrap_or(0);
    let arm64_absent = arm64
        && (!matches!(facts.qemu_arm64, QemuFact::Found(_)) || arm64_major < host::MIN_QEMU_MAJOR);
    let arm64_old = arm64
        && !arm64_absent
        && arm64_major < host::RELIABLE_TCG_QEMU_MAJOR
        && Arch::host() != Some(Arch::Arm64);
    let suite = known.and_then(Distro::qemu_backports);
    // What comes from backports (the release's QEMU is too old for TCG).
    let mut from_backports: Vec<&str> = Vec::new();
    if suite.is_some() && (qemu_absent || qemu_old) {
        from_backports.push(QEMU_PACKAGE);
    }
    if suite.is_some() && (arm64_absent || arm64_old) {
        from_backports.push(QEMU_ARM64_PACKAGE);
    }
    let backports = suite.filter(|_| !from_backports.is_empty());
    if qemu_absent || from_backports.contains(&QEMU_PACKAGE) {
        missing.insert(0, "QEMU".into());
    } else if qemu_old {
        plan.notes.push(format!(
            "QEMU {version} is unreliable under TCG and this system's archive has no newer one: use KVM, or install QEMU >= {} yourself",
            host::RELIABLE_TCG_QEMU_MAJOR
        ));
    }
    if facts.virtiofsd.is_err() {
        missing.push("virtiofsd".into());
    }
    let arm64_missing: Vec<_> = ARM64_REQUIREMENTS
        .iter()
        .filter(|r| arm64 && !facts.has(r.check))
        .collect();
    let arm64_std = arm64 && facts.arm64_rust_std.is_err();
    if arm64_absent || from_backports.contains(&QEMU_ARM64_PACKAGE) {
        missing.push("QEMU (arm64)".into());
    } else if arm64_old {
        plan.notes.push(format!(
            "qemu-system-aarch64 is older than {}: arm64 guests run under TCG here, where it is unreliable; install a newer one yourself",
            host::RELIABLE_TCG_QEMU_MAJOR
        ));
    }
    missing.extend(arm64_missing.iter().map(|r| r.what.to_string()));
    if arm64_std {
        missing.push("aarch64 Rust std".into());
    }
    if arm64 && facts.arm64_guest_bins.is_err() {
        // Setup cannot rebuild the harness that runs it.
        plan.notes.push(
            "this harness has no arm64 guest binaries built in: once setup is done, build or install it again (`cargo build`, `cargo install --path harness`) and the build embeds them".into(),
        );
    }
    if missing.is_empty() {
        return Ok(plan);
    }
    let distro = match distro {
        Some(Ok(d)) => d,
        Some(Err(why)) => return Err(SetupError::Unsupported { why, missing }),
        None => {
            return Err(SetupError::Unsupported {
                why: "no /etc/os-release: not a system `harness setup` installs on".into(),
                missing,
            })
        }
    };

    let mut packages: Vec<&str> = REQUIREMENTS
        .iter()
        .filter(|r| r.need != Need::Optional && !facts.has(r.check))
        .map(|r| r.package)
        .collect();
    if qemu_absent && backports.is_none() {
        packages.push(QEMU_PACKAGE);
    }
    if arm64_absent && !from_backports.contains(&QEMU_ARM64_PACKAGE) {
        packages.push(QEMU_ARM64_PACKAGE);
    }
    packages.extend(arm64_missing.iter().map(|r| r.package));
    // The aarch64 std: Debian's packages (`:arm64`, so dpkg must know the
    // architecture first), else rustup's.
    let std_packages = distro.arm64_rust_std_packages().filter(|_| arm64_std);
    packages.extend(std_packages.into_iter().flatten());
    let add_arch = std_packages.is_some() && !facts.foreign_archs.iter().any(|a| a == "arm64");
    let rustup_std = arm64_std && std_packages.is_none();
    let mut cargo_virtiofsd = false;
    if facts.virtiofsd.is_err() {
        if distro.packages_virtiofsd() {
            packages.push("virtiofsd");
        } else {
            packages.extend(
                VIRTIOFSD_BUILD_DEPS
                    .iter()
                    .filter(|r| !facts.has(r.check))
                    .map(|r| r.package),
            );
            cargo_virtiofsd = true;
        }
    }

    if let Some(suite) = &backports {
        let configured = sources
            .iter()
            .any(|s| s.suites.contains(suite) && s.components.iter().any(|c| c == "main"));
        if !configured {
            let mirror = apt::pick_debian_mirror(sources).ok_or_else(|| SetupError::NoMirror {
                suite: suite.clone(),
            })?;
            plan.steps.push(Step {
                why: format!("add {suite} on this machine's Debian mirror"),
                argv: vec!["tee".into(), BACKPORTS_LIST.into()],
                stdin: Some(format!("deb {} {suite} main\n", mirror.uri)),
                as_root: true,
            });
        }
    }
    if add_arch {
        plan.steps.push(root_step(
            "let apt install arm64 packages (the aarch64 Rust std)",
            ["dpkg", "--add-architecture", "arm64"]
                .map(String::from)
                .to_vec(),
        ));
    }
    if !packages.is_empty() || backports.is_some() {
        plan.steps.push(root_step(
            "read the package lists",
            apt_get(&["update", "-q"]),
        ));
    }
    if !packages.is_empty() {
        let mut args = vec!["install", "-y", "-q", "--no-install-recommends"];
        args.extend(&packages);
        plan.steps.push(root_step(
            format!("install {}", packages.join(", ")),
            apt_get(&args),
        ));
    }
    if let Some(suite) = &backports {
        let why = match (from_backports.contains(&QEMU_PACKAGE), qemu_absent) {
            (true, true) | (false, _) => {
                format!("install QEMU from {suite} (this release's 7.2 is unreliable under TCG)")
            }
            (true, false) => {
                format!("QEMU {version} is unreliable under TCG: install QEMU from {suite}")
            }
        };
        let mut args = vec![
            "install",
            "-y",
            "-q",
            "--no-install-recommends",
            "-t",
            suite,
        ];
        args.extend(&from_backports);
        plan.steps.push(root_step(why, apt_get(&args)));
    }
    if rustup_std && !facts.programs.contains_key("rustup") {
        plan.notes.push(format!(
            "no rustup here to add the aarch64 Rust std with: install rustup, then `rustup target add {}`",
            Arch::Arm64.rust_target()
        ));
    } else if rustup_std {
        plan.steps.push(Step {
            why: "add the aarch64 Rust std to the rustup toolchain".into(),
            argv: ["rustup", "target", "add", Arch::Arm64.rust_target()]
                .map(String::from)
                .to_vec(),
            stdin: None,
            as_root: false,
        });
    }
    if cargo_virtiofsd {
        plan.steps.push(Step {
            why: "build virtiofsd (no package on this release) into ~/.cargo/bin".into(),
            argv: [
                "cargo",
                "install",
                "--locked",
                "virtiofsd",
                "--version",
                VIRTIOFSD_VERSION,
            ]
            .map(String::from)
            .to_vec(),
            stdin: None,
            as_root: false,
        });
    }
    if let Distro::Ubuntu { year, month } = distro {
        plan.notes.push(format!(
            "Ubuntu {year}.{month:02}: packages come from the archive apt is configured with (debian-archive-keyring{} are in universe, which must be enabled); Ubuntu's own QEMU is used",
            if packages.contains(&"virtiofsd") { " and virtiofsd" } else { "" }
        ));
    }
    Ok(plan)
}

/// Runs the plan's steps in order, saying each before it runs; stops at
/// the first that fails. Refuses before running anything when a step
/// needs root and root cannot be had.
pub fn execute(plan: &Plan, say: &mut dyn FnMut(&str)) -> Result<(), SetupError> {
    if plan.privilege == Privilege::Unavailable && plan.steps.iter().any(|s| s.as_root) {
        return Err(SetupError::NoPrivilege {
            commands: plan.shell_lines().join("\n"),
        });
    }
    let n = plan.steps.len();
    for (i, step) in plan.steps.iter().enumerate() {
        let line = step.shell_line(plan.privilege);
        say(&format!("[{}/{n}] {}: {line}", i + 1, step.why));
        let argv = step.command(plan.privilege);
        let mut cmd = Command::new(&argv[0]);
        cmd.args(&argv[1..]);
        if step.stdin.is_some() {
            // tee would echo the text back.
            cmd.stdin(Stdio::piped()).stdout(Stdio::null());
        } else {
            cmd.stdin(Stdio::null());
        }
        let spawn_error = |source| SetupError::Spawn {
            command: line.clone(),
            source,
        };
        let mut child = cmd.spawn().map_err(spawn_error)?;
        if let (Some(text), Some(mut pipe)) = (&step.stdin, child.stdin.take()) {
            pipe.write_all(text.as_bytes()).map_err(spawn_error)?;
        }
        let status = child.wait().map_err(spawn_error)?;
        if !status.success() {
            return Err(SetupError::Failed {
                command: line,
                status: status.to_string(),
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::doctor::{Check, OsRelease};
    use crate::host::Qemu;
    use std::path::Path;

    const BOOKWORM: &str = "PRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\nID=debian\nVERSION_ID=\"12\"\nVERSION_CODENAME=bookworm\n";
    const TRIXIE: &str = "PRETTY_NAME=\"Debian GNU/Linux 13 (trixie)\"\nID=debian\nVERSION_ID=\"13\"\nVERSION_CODENAME=trixie\n";
    const NOBLE: &str = "PRETTY_NAME=\"Ubuntu 24.04.2 LTS\"\nID=ubuntu\nID_LIKE=debian\nVERSION_ID=\"24.04\"\nVERSION_CODENAME=noble\n";
    const SOURCES: &str = "Types: deb\nURIs: http://mirror.example/debian\nSuites: bookworm bookworm-updates\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n\nTypes: deb\nURIs: http://mirror.example/debian-security\nSuites: bookworm-security\nComponents: main\n";

    fn sources(text: &str) -> Vec<AptSource> {
        apt::parse_deb822_sources(text, Path::new("/etc/apt/sources.list.d/debian.sources"))
    }

    fn with_backports() -> Vec<AptSource> {
        let mut s = sources(SOURCES);
        s.extend(apt::parse_one_line_sources(
            "deb http://mirror.example/debian bookworm-backports main\n",
            Path::new(BACKPORTS_LIST),
        ));
        s
    }

    fn facts(os: &str, qemu: Option<&str>) -> Facts {
        let mut f = crate::doctor::tests::complete();
        f.os = Some(OsRelease::parse(os));
        f.qemu = match qemu {
            Some(v) => QemuFact::Found(Qemu {
                path: "/usr/bin/qemu-system-x86_64".into(),
                version: v.into(),
            }),
            None => QemuFact::Missing {
                binary: "qemu-system-x86_64".into(),
            },
        };
        f
    }

    /// A fresh machine: nothing of what setup installs.
    fn fresh(os: &str) -> Facts {
        let mut f = facts(os, None);
        f.programs.retain(|p, _| p == "cargo" || p == "sudo");
        f.files.clear();
        f.virtiofsd = Err("no virtiofsd".into());
        f.qemu_arm64 = QemuFact::Missing {
            binary: "qemu-system-aarch64".into(),
        };
        f.arm64_rust_std = Err("no aarch64 Rust std".into());
        f.arm64_guest_bins = Err("built without them".into());
        f.foreign_archs = vec!["amd64".into()];
        f
    }

    fn lines(p: &Plan) -> Vec<String> {
        p.shell_lines()
    }

    #[test]
    fn bookworm_with_everything_has_nothing_to_do() {
        let p = plan(&facts(BOOKWORM, Some("10.0.2")), &with_backports()).unwrap();
        assert!(p.steps.is_empty(), "{:?}", lines(&p));
        assert!(p.notes.is_empty());
        // ccache is optional: setup leaves it.
        let mut f = facts(BOOKWORM, Some("10.0.2"));
        f.programs.remove("ccache");
        assert!(plan(&f, &with_backports()).unwrap().steps.is_empty());
    }

    #[test]
    fn bookworm_with_qemu_7_2_adds_backports_on_the_apt_mirror() {
        let p = plan(&facts(BOOKWORM, Some("7.2.19")), &sources(SOURCES)).unwrap();
        assert_eq!(
            lines(&p),
            [
                "echo 'deb http://mirror.example/debian bookworm-backports main' | tee /etc/apt/sources.list.d/harness-backports.list",
                "env DEBIAN_FRONTEND=noninteractive apt-get update -q",
                "env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends -t bookworm-backports qemu-system-x86",
            ]
        );
        assert!(p.steps[2]
            .why
            .contains("QEMU 7.2.19 is unreliable under TCG"));
        // Backports already there: no second line in apt's sources.
        let p = plan(&facts(BOOKWORM, Some("7.2.19")), &with_backports()).unwrap();
        assert_eq!(p.steps.len(), 2);
        // No Debian mirror in apt's sources: refused, saying what to add.
        let e = plan(&facts(BOOKWORM, Some("7.2.19")), &[]).unwrap_err();
        assert!(e.to_string().contains("bookworm-backports main"), "{e}");
    }

    #[test]
    fn fresh_bookworm_installs_everything() {
        let p = plan(&fresh(BOOKWORM), &sources(SOURCES)).unwrap();
        assert_eq!(
            lines(&p),
            [
                "echo 'deb http://mirror.example/debian bookworm-backports main' | tee /etc/apt/sources.list.d/harness-backports.list",
                "env DEBIAN_FRONTEND=noninteractive apt-get update -q",
                "env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends gcc libc6-dev gpgv debian-archive-keyring make flex bison bc libelf-dev libssl-dev git libcap-ng-dev libseccomp-dev",
                "env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends -t bookworm-backports qemu-system-x86",
                "cargo install --locked virtiofsd --version 1.14.0",
            ]
        );
        assert!(p.steps[..4].iter().all(|s| s.as_root) && !p.steps[4].as_root);
    }

    #[test]
    fn trixie_takes_qemu_and_virtiofsd_from_its_own_archive() {
        let mut f = fresh(TRIXIE);
        f.files.insert(crate::doctor::LIBC_A.into());
        let p = plan(&f, &[]).unwrap();
        assert_eq!(
            lines(&p),
            [
                "env DEBIAN_FRONTEND=noninteractive apt-get update -q",
                "env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends gcc gpgv debian-archive-keyring make flex bison bc libelf-dev libssl-dev git qemu-system-x86 virtiofsd",
            ]
        );
        assert!(p.notes.is_empty());
    }

    #[test]
    fn ubuntu_through_sudo() {
        let mut f = fresh(NOBLE);
        f.is_root = false;
        f.programs.insert("sudo".into(), "/usr/bin/sudo".into());
        let p = plan(&f, &[]).unwrap();
        assert_eq!(p.privilege, Privilege::Sudo);
        let l = lines(&p);
        assert_eq!(
            l[0],
            "sudo env DEBIAN_FRONTEND=noninteractive apt-get update -q"
        );
        assert!(l[1].starts_with("sudo env DEBIAN_FRONTEND=noninteractive apt-get install"));
        assert!(l[1].ends_with(" qemu-system-x86 virtiofsd"), "{}", l[1]);
        assert_eq!(l.len(), 2);
        assert!(p.notes[0].contains("Ubuntu 24.04") && p.notes[0].contains("universe"));
        // Neither root nor sudo: refused before anything runs, with the commands.
        f.programs.remove("sudo");
        let p = plan(&f, &[]).unwrap();
        let e = execute(&p, &mut |_| panic!("nothing runs")).unwrap_err();
        assert!(matches!(e, SetupError::NoPrivilege { .. }));
        assert!(e
            .to_string()
            .contains("env DEBIAN_FRONTEND=noninteractive apt-get update -q"));
    }

    #[test]
    fn other_systems_are_refused_only_when_something_is_missing() {
        let fedora = "ID=fedora\nVERSION_ID=40\nPRETTY_NAME=\"Fedora Linux 40\"\n";
        let mut f = facts(fedora, Some("7.2.0"));
        let p = plan(&f, &[]).unwrap();
        assert!(p.steps.is_empty());
        assert!(p.notes[0].contains("unreliable under TCG"));
        f.programs.remove("make");
        f.virtiofsd = Err("none".into());
        let e = plan(&f, &[]).unwrap_err().to_string();
        assert!(
            e.contains("Fedora Linux 40 is not a system `harness setup` installs on"),
            "{e}"
        );
        assert!(e.contains("missing here: make, virtiofsd"), "{e}");
        assert!(!f.has(Check::Program("make")));
    }

    #[test]
    fn steps_run_in_order_and_stop_at_a_failure() {
        let d = tempfile::tempdir().unwrap();
        let out = d.path().join("out");
        let step = |argv: &[&str], stdin: Option<&str>| Step {
            why: "test".into(),
            argv: argv.iter().map(|s| s.to_string()).collect(),
            stdin: stdin.map(String::from),
            as_root: false,
        };
        let p = Plan {
            steps: vec![
                step(&["tee", out.to_str().unwrap()], Some("deb x y main\n")),
                step(&["false"], None),
                step(&["touch", "/nonexistent/never"], None),
            ],
            notes: vec![],
            privilege: Privilege::Unavailable,
        };
        let mut said = Vec::new();
        let e = execute(&p, &mut |l| said.push(l.to_string())).unwrap_err();
        assert!(matches!(e, SetupError::Failed { .. }), "{e}");
        assert_eq!(std::fs::read_to_string(&out).unwrap(), "deb x y main\n");
        assert_eq!(said.len(), 2);
        assert!(said[0].starts_with("[1/3] test: echo 'deb x y main' | tee "));
    }

    #[test]
    fn the_x86_plan_needs_nothing_of_arm64() {
        let mut f = facts(BOOKWORM, Some("10.0.2"));
        f.qemu_arm64 = QemuFact::Missing {
            binary: "qemu-system-aarch64".into(),
        };
        f.arm64_rust_std = Err("none".into());
        f.programs.remove("aarch64-linux-gnu-gcc");
        let p = plan(&f, &with_backports()).unwrap();
        assert!(p.steps.is_empty() && p.notes.is_empty(), "{:?}", lines(&p));
        // With everything for arm64 too, `--arch arm64` has nothing to do.
        let p = plan_for(
            &facts(BOOKWORM, Some("10.0.2")),
            &with_backports(),
            &[Arch::X86_64, Arch::Arm64],
        )
        .unwrap();
        assert!(p.steps.is_empty() && p.notes.is_empty(), "{:?}", lines(&p));
    }

    #[test]
    fn fresh_bookworm_with_arm64_adds_the_architecture_and_the_cross_toolchain() {
        let p = plan_for(
            &fresh(BOOKWORM),
            &sources(SOURCES),
            &[Arch::X86_64, Arch::Arm64],
        )
        .unwrap();
        assert_eq!(
            lines(&p),
            [
                "echo 'deb http://mirror.example/debian bookworm-backports main' | tee /etc/apt/sources.list.d/harness-backports.list",
                "dpkg --add-architecture arm64",
                "env DEBIAN_FRONTEND=noninteractive apt-get update -q",
                "env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends gcc libc6-dev gpgv debian-archive-keyring make flex bison bc libelf-dev libssl-dev git gcc-aarch64-linux-gnu libc6-dev-arm64-cross rustc-web libstd-rust-web-dev:arm64 libcap-ng-dev libseccomp-dev",
                "env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends -t bookworm-backports qemu-system-x86 qemu-system-arm",
                "cargo install --locked virtiofsd --version 1.14.0",
            ]
        );
        assert!(
            p.notes[0].contains("cargo install --path harness"),
            "{:?}",
            p.notes
        );
    }

    #[test]
    fn bookworm_ready_for_x86_gets_only_the_arm64_pieces() {
        let mut f = facts(BOOKWORM, Some("10.0.2"));
        f.qemu_arm64 = QemuFact::Found(Qemu {
            path: "/usr/bin/qemu-system-aarch64".into(),
            version: "7.2.19".into(),
        });
        f.arm64_rust_std = Err("none".into());
        // arm64 known to dpkg already: no second --add-architecture.
        let p = plan_for(&f, &with_backports(), &[Arch::Arm64]).unwrap();
        let want_qemu = match Arch::host() {
            Some(Arch::Arm64) => vec![],
            _ => vec!["env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends -t bookworm-backports qemu-system-arm"],
        };
        let mut want = vec![
            "env DEBIAN_FRONTEND=noninteractive apt-get update -q",
            "env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends rustc-web libstd-rust-web-dev:arm64",
        ];
        want.extend(want_qemu);
        assert_eq!(lines(&p), want);
    }

    #[test]
    fn ubuntu_takes_the_aarch64_std_from_rustup() {
        let mut f = fresh(NOBLE);
        f.programs
            .insert("rustup".into(), "/root/.cargo/bin/rustup".into());
        let p = plan_for(&f, &[], &[Arch::X86_64, Arch::Arm64]).unwrap();
        let l = lines(&p);
        assert!(!l.iter().any(|l| l.contains("add-architecture")), "{l:?}");
        assert!(l[1].ends_with(" qemu-system-x86 qemu-system-arm gcc-aarch64-linux-gnu libc6-dev-arm64-cross virtiofsd"), "{}", l[1]);
        assert_eq!(l[2], "rustup target add aarch64-unknown-linux-gnu");
        assert!(!p.steps[2].as_root);
        // No rustup: said, not done.
        f.programs.remove("rustup");
        let p = plan_for(&f, &[], &[Arch::Arm64]).unwrap();
        assert_eq!(p.steps.len(), 2);
        assert!(
            p.notes.iter().any(|n| n.contains("install rustup")),
            "{:?}",
            p.notes
        );
    }
}

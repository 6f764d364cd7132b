//! `harness doctor`: on this machine as it is, and with a directory of stub
//! executables for a `PATH` on which tools are absent (each absent one
//! named with its fix). No VM; the mirror is asked only on loopback, except
//! by the real doctor on this machine.

use harness::doctor::{self, Probe, Status};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;

fn stub(dir: &Path, name: &str, script: &str) {
    let p = dir.join(name);
    std::fs::write(&p, format!("#!/bin/sh\n{script}\n")).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// A loopback URL nothing listens on.
fn dead_mirror() -> String {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    drop(l);
    format!("http://127.0.0.1:{port}/debian")
}

#[test]
fn doctor_on_this_machine() {
    let out = Command::new(env!("CARGO_BIN_EXE_harness"))
        .arg("doctor")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let code = out.status.code().unwrap();
    assert!(code == 0 || code == 1, "exit {code} (never 69):\n{text}");
    for what in [
        "QEMU",
        "KVM",
        "gcc",
        "libc.a",
        "Debian mirror",
        "cache directory",
        "gpgv",
        "Debian archive keyring",
        "virtiofsd",
        "make",
        "libelf headers",
        "ccache",
    ] {
        // The status column is 8 wide.
        assert!(
            text.lines()
                .any(|l| l.get(8..).is_some_and(|r| r.starts_with(what))),
            "no row for {what}:\n{text}"
        );
    }
    if code == 1 {
        assert!(text.contains("cannot work: missing"), "{text}");
    }
    // CI ran `harness setup` first: everything is here.
    if std::env::var_os("CI").is_some() {
        assert_eq!(code, 0, "{text}");
    }
}

#[test]
fn absent_tools_are_named_with_their_fix() {
    let d = tempfile::tempdir().unwrap();
    let bin = d.path().join("bin");
    let prefix = d.path().join("root");
    std::fs::create_dir_all(&bin).unwrap();
    std::fs::create_dir_all(prefix.join("etc/apt/sources.list.d")).unwrap();
    // Debian 12 with its own QEMU 7.2, gcc, and nothing else.
    stub(
        &bin,
        "qemu-system-x86_64",
        "echo 'QEMU emulator version 7.2.19 (Debian 1:7.2+dfsg-7+deb12u18)'",
    );
    stub(&bin, "gcc", "exit 0");
    std::fs::write(
        prefix.join("etc/os-release"),
        "PRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\nID=debian\nVERSION_ID=\"12\"\nVERSION_CODENAME=bookworm\n",
    )
    .unwrap();
    let mirror = dead_mirror();
    std::fs::write(
        prefix.join("etc/apt/sources.list.d/debian.sources"),
        format!("Types: deb\nURIs: {mirror}\nSuites: bookworm\nComponents: main\n"),
    )
    .unwrap();

    let facts = doctor::probe(&Probe::stubs(&bin, &prefix));
    let rows = doctor::rows(&facts);
    let row = |w: &str| rows.iter().find(|r| r.what == w).unwrap();
    let q = row("QEMU");
    assert_eq!(q.status, Status::Warning);
    assert!(q.found.contains("QEMU 7.2.19"), "{}", q.found);
    assert!(q.by_setup);
    assert!(q
        .fix
        .as_deref()
        .unwrap()
        .contains("apt-get install -t bookworm-backports qemu-system-x86"));
    assert_eq!(row("gcc").status, Status::Ok);
    for (what, fix) in [
        ("libc.a", "apt-get install libc6-dev"),
        ("gpgv", "apt-get install gpgv"),
        ("Debian archive keyring", "apt-get install debian-archive-keyring"),
        ("make", "apt-get install make"),
        ("flex", "apt-get install flex"),
        ("bison", "apt-get install bison"),
        ("bc", "apt-get install bc"),
        ("libelf headers", "apt-get install libelf-dev"),
        ("libssl headers", "apt-get install libssl-dev"),
        ("git", "apt-get install git"),
        ("ccache", "apt-get install ccache"),
        (
            "virtiofsd",
            "apt-get install libcap-ng-dev libseccomp-dev && cargo install --locked virtiofsd --version 1.14.0",
        ),
    ] {
        let r = row(what);
        assert_eq!(r.status, Status::Missing, "{r:?}");
        assert_eq!(r.fix.as_deref(), Some(fix), "{r:?}");
    }
    let m = row("Debian mirror");
    assert_eq!(m.status, Status::Missing);
    assert!(
        m.found.starts_with(&mirror) && m.found.contains("does not answer"),
        "{}",
        m.found
    );
    // Writable; its free space is this machine's (a warning when low).
    assert_ne!(row("cache directory").status, Status::Missing);
    let blocking: Vec<&str> = doctor::missing_for_default_run(&rows)
        .iter()
        .map(|r| r.what.as_str())
        .filter(|w| *w != "cache directory") // this machine's free space
        .collect();
    assert_eq!(blocking, ["libc.a", "Debian mirror"]);

    // Setup's plan from the same facts: backports on the mirror apt names.
    let sources = harness::kernel::archive::apt::read_sources_file(
        &prefix.join("etc/apt/sources.list.d/debian.sources"),
    );
    let plan = harness::setup::plan(&facts, &sources).unwrap();
    assert_eq!(
        plan.steps[0].stdin.as_deref(),
        Some(format!("deb {mirror} bookworm-backports main\n").as_str())
    );
    assert!(plan
        .shell_lines()
        .iter()
        .any(|l| l.starts_with("cargo install --locked virtiofsd")));
}

#[test]
fn doctor_binary_names_what_a_stub_path_lacks() {
    let d = tempfile::tempdir().unwrap();
    let bin = d.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    stub(&bin, "make", "exit 0");
    let out = Command::new(env!("CARGO_BIN_EXE_harness"))
        .arg("doctor")
        .env("PATH", &bin)
        .env("HOME", d.path())
        .env("HARNESS_CACHE_DIR", d.path().join("cache"))
        .env("HARNESS_DEBIAN_MIRROR", dead_mirror())
        .env_remove("HARNESS_QEMU")
        .env_remove("HARNESS_VIRTIOFSD")
        .env_remove("CARGO_HOME")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    // 3: not ready (harness::error::exit), not a test failure.
    assert_eq!(out.status.code(), Some(3), "{text}");
    let line = |what: &str| {
        text.lines()
            .find(|l| l.starts_with("missing") && l.contains(what))
            .unwrap_or_else(|| panic!("no missing row for {what}:\n{text}"))
    };
    assert!(line("QEMU").contains("no qemu-system-x86_64 on PATH"));
    assert!(line("gcc").contains("no gcc on PATH"));
    assert!(line("Debian mirror").contains("does not answer"));
    assert!(
        text.lines()
            .any(|l| l.starts_with("ok") && l.contains("make")),
        "{text}"
    );
    let verdict = text
        .lines()
        .find(|l| l.contains("cannot work: missing"))
        .unwrap();
    assert!(
        verdict.contains("QEMU") && verdict.contains("gcc") && verdict.contains("Debian mirror"),
        "{verdict}"
    );
}

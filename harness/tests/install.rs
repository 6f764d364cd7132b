//! `cargo install` gives a harness that works without the checkout: built
//! into a temporary root, run from an empty directory with no `HARNESS_*`
//! or `CARGO_*` variables, it lists the shipped kernel definitions and the
//! built-in matrix, and boots Debian's kernel through the smoke suite, on
//! x86-64 and on arm64 (the embedded arm64 guest binaries).
//! Real VM (`HARNESS_VM_TESTS=1`). The install is `cargo install --debug`
//! into this build's target directory: what it packages (the embedded
//! guest binaries and kernel definitions, no path back to the checkout) is
//! the same in either profile, and the dev profile's crates are the ones
//! `cargo test` just built, so the install takes about 20 s where a
//! release build from an empty target/ took nearly 5 minutes of CI.

mod common;

use std::ffi::OsStr;
use std::path::Path;
use std::process::{Command, Output};
use std::time::Instant;

/// `cmd` without the variables that could lead the harness back to the
/// checkout, or that cargo set for this test: `OUT_DIR` (this crate's) would
/// leak into the install's crates that read it and rebuild them every time.
fn without_checkout_env(cmd: &mut Command, keep: &[&str]) {
    for (k, _) in std::env::vars_os() {
        let k = k.to_string_lossy().into_owned();
        let ours =
            k.starts_with("HARNESS_") || k.starts_with("CARGO_") || k == "CARGO" || k == "OUT_DIR";
        if ours && !keep.contains(&k.as_str()) {
            cmd.env_remove(&k);
        }
    }
}

fn run(cmd: &mut Command) -> (Output, String) {
    let out = cmd.output().expect("start the installed harness");
    let text = format!(
        "status {}\n--- stdout\n{}\n--- stderr\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out, text)
}

#[test]
fn installed_harness_runs_without_the_checkout() {
    if !common::enabled() {
        return;
    }
    let _vm = common::vm_lock();
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let target = Path::new(env!("CARGO_TARGET_TMPDIR")).parent().unwrap();
    let root = tempfile::tempdir().unwrap();

    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut install = Command::new(cargo);
    // CARGO_INCREMENTAL as the test build had it: a different value
    // rebuilds every workspace crate.
    without_checkout_env(&mut install, &["CARGO_HOME", "CARGO_INCREMENTAL"]);
    install
        .current_dir(workspace)
        .args(["install", "--locked", "--debug", "--path", "harness"])
        .arg("--root")
        .arg(root.path())
        .env("CARGO_TARGET_DIR", target);
    let start = Instant::now();
    let status = install.status().expect("run cargo install");
    eprintln!("cargo install took {:.1?}", start.elapsed());
    assert!(status.success(), "cargo install failed: {status}");

    let harness = root.path().join("bin/harness");
    let elsewhere = tempfile::tempdir().unwrap();
    let installed = |args: &[&OsStr]| {
        let mut c = Command::new(&harness);
        without_checkout_env(&mut c, &[]);
        c.current_dir(elsewhere.path()).args(args);
        run(&mut c)
    };
    let os = |s: &'static str| OsStr::new(s);

    let (out, text) = installed(&[os("--version")]);
    assert!(out.status.success(), "{text}");
    let version = String::from_utf8_lossy(&out.stdout);
    assert!(
        version.starts_with(&format!("harness {} (", env!("CARGO_PKG_VERSION")))
            && !version.contains("(unknown)"),
        "{text}"
    );

    // The shipped definitions, from the cache.
    let (out, text) = installed(&[os("kernel"), os("list")]);
    assert!(out.status.success(), "{text}");
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("7.3-immutable:"),
        "{text}"
    );

    // No matrix.yaml here: the built-in one, said on stderr.
    let (out, text) = installed(&[os("matrix"), os("--list")]);
    assert!(out.status.success(), "{text}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("built-in default matrix"),
        "{text}"
    );
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("debian-7.3"),
        "{text}"
    );

    let junit = elsewhere.path().join("junit.xml");
    let kernel = common::kernel();
    let start = Instant::now();
    let (out, text) = installed(&[
        os("run"),
        os("--kernel"),
        OsStr::new(&kernel),
        os("--suite"),
        os("smoke"),
        os("--accel"),
        os("tcg"),
        os("--junit"),
        junit.as_os_str(),
    ]);
    eprintln!("harness run took {:.1?}", start.elapsed());
    assert_eq!(out.status.code(), Some(0), "{text}");
    let xml = std::fs::read_to_string(&junit).unwrap_or_else(|e| panic!("{e}\n{text}"));
    let cases = common::parse_junit(&xml);
    assert!(!cases.is_empty(), "{xml}");
    assert!(cases.iter().all(|c| c.failure.is_none()), "{xml}");

    // An arm64 cell from the same empty directory: Debian's arm64 kernel
    // and the arm64 guest binaries embedded in the installed binary.
    let junit = elsewhere.path().join("junit-arm64.xml");
    let start = Instant::now();
    let (out, text) = installed(&[
        os("run"),
        os("--arch"),
        os("arm64"),
        os("--kernel"),
        os("debian:7.3.4"),
        os("--suite"),
        os("smoke"),
        os("--junit"),
        junit.as_os_str(),
    ]);
    eprintln!("harness run --arch arm64 took {:.1?}", start.elapsed());
    assert_eq!(out.status.code(), Some(0), "{text}");
    let xml = std::fs::read_to_string(&junit).unwrap_or_else(|e| panic!("{e}\n{text}"));
    let cases = common::parse_junit(&xml);
    assert!(
        cases.iter().any(|c| c.name == "smoke/machine")
            && cases.iter().all(|c| c.failure.is_none()),
        "{xml}"
    );
    assert!(
        xml.contains(r#"<property name="arch" value="arm64"/>"#),
        "{xml}"
    );
}

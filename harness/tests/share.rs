//! virtiofs shares with real VMs: real QEMU under TCG, a real Debian
//! kernel, the real `virtiofsd`. Gated like `tests/vm.rs` by
//! `HARNESS_VM_TESTS=1` (under `CI` without it they fail).
//!
//! The kernel is `$HARNESS_TEST_KERNEL` (default `debian:7.3.4`, virtiofs
//! as modules from `linux-modules-*` or built in); the artifact, read-only
//! and binaries-from-a-share scenarios run again on
//! `$HARNESS_SOURCE_KERNEL` (`source:7.3`: virtiofs built in by the guest
//! fragment, support read from its `.config`).

mod common;
use common::{enabled, kernel, processes_with, vm_lock};

use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

fn guest_bin(name: &str) -> PathBuf {
    harness::guestbin::GuestBins::locate_or_build()
        .unwrap()
        .path(name)
        .unwrap()
}

/// The `artifact` binary under a name that selects its mode.
fn artifact_as(dir: &Path, mode: &str) -> PathBuf {
    let p = dir.join(format!("artifact-{mode}"));
    std::fs::copy(guest_bin("artifact"), &p).unwrap();
    p
}

fn harness_cmd(dir: &Path, extra: &[&str]) -> Command {
    harness_suite(dir, "none", extra)
}

fn harness_suite(dir: &Path, suite: &str, extra: &[&str]) -> Command {
    harness_on(&kernel(), dir, suite, extra)
}

fn harness_on(kernel: &str, dir: &Path, suite: &str, extra: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_harness"));
    c.args([
        "run",
        "--kernel",
        kernel,
        "--topology",
        "nodes=2,cpus=1,mem=384M",
        "--suite",
        suite,
        "--accel",
        "tcg",
    ])
    .arg("--junit")
    .arg(dir.join("junit.xml"))
    .arg("--out")
    .arg(dir.join("out"))
    .args(extra)
    .stdin(Stdio::null());
    c
}

struct Run {
    out: Output,
}

impl Run {
    fn text(&self) -> String {
        format!(
            "stdout:\n{}\nstderr:\n{}",
            String::from_utf8_lossy(&self.out.stdout),
            String::from_utf8_lossy(&self.out.stderr)
        )
    }
}

fn run_on(kernel: &str, dir: &Path, extra: &[&str]) -> Run {
    Run {
        out: harness_on(kernel, dir, "none", extra).output().unwrap(),
    }
}

/// (name, failed, skipped).
type Case = (String, bool, bool);

/// The testcases and the suite's properties.
fn junit(dir: &Path) -> (Vec<Case>, Vec<(String, String)>) {
    let xml = std::fs::read_to_string(dir.join("junit.xml")).unwrap();
    let doc = roxmltree::Document::parse(&xml).unwrap();
    let cases = doc
        .descendants()
        .filter(|n| n.has_tag_name("testcase"))
        .map(|n| {
            (
                n.attribute("name").unwrap_or("").to_string(),
                n.children()
                    .any(|c| c.has_tag_name("failure") || c.has_tag_name("error")),
                n.children().any(|c| c.has_tag_name("skipped")),
            )
        })
        .collect();
    let props = doc
        .descendants()
        .filter(|n| n.has_tag_name("property"))
        .map(|n| {
            (
                n.attribute("name").unwrap_or("").to_string(),
                n.attribute("value").unwrap_or("").to_string(),
            )
        })
        .collect();
    (cases, props)
}

fn assert_passed(dir: &Path, names: &[&str], r: &Run) {
    let (cases, _) = junit(dir);
    for n in names {
        let c = cases.iter().find(|c| c.0 == *n);
        assert!(
            matches!(c, Some((_, false, false))),
            "{n}: {c:?} in {cases:?}\n{}",
            r.text()
        );
    }
}

/// The one cell directory under `<dir>/out` (beside it, files such as the
/// run's `history.sqlite`).
fn cell_dir(dir: &Path) -> PathBuf {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir.join("out"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .collect();
    assert_eq!(v.len(), 1, "{v:?}");
    v.remove(0)
}

fn virtiofsd_with(marker: &str) -> Vec<u32> {
    processes_with(marker)
        .into_iter()
        .filter(|p| {
            std::fs::read(format!("/proc/{p}/cmdline"))
                .map(|c| String::from_utf8_lossy(&c).contains("virtiofsd"))
                .unwrap_or(false)
        })
        .collect()
}

#[test]
fn a_64_mib_artifact_arrives_intact_next_to_the_junit() {
    if !enabled() {
        return;
    }
    let _vm = vm_lock();
    artifact_arrives_intact(&kernel());
}

/// Returns the harness's stdout and stderr.
fn artifact_arrives_intact(kernel: &str) -> String {
    let dir = tempfile::tempdir().unwrap();
    let bin = artifact_as(dir.path(), "write");
    let r = run_on(kernel, dir.path(), &["--guest-bin", bin.to_str().unwrap()]);
    assert_eq!(r.out.status.code(), Some(0), "{}", r.text());
    assert_passed(
        dir.path(),
        &[
            "artifact-write/write",
            "artifact-write/fsync",
            "artifact-write/read-back",
        ],
        &r,
    );
    let cell = cell_dir(dir.path());
    let file = std::fs::canonicalize(cell.join("artifacts/artifact-64MiB.bin")).unwrap();
    let got = Sha256::digest(std::fs::read(&file).unwrap());
    let mut expected = vec![0u8; 64 << 20];
    guest_tests::artifact::stream().fill(&mut expected);
    assert_eq!(
        got,
        Sha256::digest(&expected),
        "checksum of {}",
        file.display()
    );
    // Referenced from the report as an attachment.
    let (_, props) = junit(dir.path());
    let want = format!("[[ATTACHMENT|{}]]", file.display());
    assert!(
        props.iter().any(|(k, v)| k == "note" && *v == want),
        "{props:?}"
    );
    // The daemon is gone with the cell.
    assert!(virtiofsd_with(&dir.path().display().to_string()).is_empty());
    r.text()
}

#[test]
fn a_read_only_share_refuses_writes_with_erofs() {
    if !enabled() {
        return;
    }
    let _vm = vm_lock();
    read_only_share_refuses_writes(&kernel());
}

fn read_only_share_refuses_writes(kernel: &str) {
    let dir = tempfile::tempdir().unwrap();
    let shared = dir.path().join("ro");
    std::fs::create_dir(&shared).unwrap();
    std::fs::write(shared.join("data.txt"), b"keep me").unwrap();
    let bin = artifact_as(dir.path(), "readonly");
    let share = format!("{}:/mnt/ro:ro", shared.display());
    let r = run_on(
        kernel,
        dir.path(),
        &["--share", &share, "--guest-bin", bin.to_str().unwrap()],
    );
    assert_eq!(r.out.status.code(), Some(0), "{}", r.text());
    assert_passed(
        dir.path(),
        &[
            "artifact-readonly/mnt-ro-create-erofs",
            "artifact-readonly/mnt-ro-open-write-erofs",
            "artifact-readonly/mnt-ro-read",
        ],
        &r,
    );
    assert_eq!(std::fs::read(shared.join("data.txt")).unwrap(), b"keep me");
    assert!(!shared.join(".harness-write-probe").exists());
}

#[test]
fn binaries_in_a_share_run_without_being_packed() {
    if !enabled() {
        return;
    }
    let _vm = vm_lock();
    binaries_in_a_share_run(&kernel());
}

fn binaries_in_a_share_run(kernel: &str) {
    let dir = tempfile::tempdir().unwrap();
    let shared = dir.path().join("bins");
    std::fs::create_dir(&shared).unwrap();
    // Dropped into the share: found and exec'd by `artifact exec`.
    std::fs::copy(guest_bin("smoke"), shared.join("run-me")).unwrap();
    // A --guest-bin that lies in the share runs from it.
    let in_share = shared.join("smoke-from-share");
    std::fs::copy(guest_bin("smoke"), &in_share).unwrap();
    let exec = artifact_as(dir.path(), "exec");
    let share = format!("{}:/opt/bins:ro", shared.display());
    let r = run_on(
        kernel,
        dir.path(),
        &[
            "--share",
            &share,
            "--guest-bin",
            exec.to_str().unwrap(),
            "--guest-bin",
            in_share.to_str().unwrap(),
        ],
    );
    assert_eq!(r.out.status.code(), Some(0), "{}", r.text());
    assert_passed(
        dir.path(),
        &[
            "artifact-exec/futex2-wait-wake",
            "smoke-from-share/futex2-wait-wake",
        ],
        &r,
    );
    let stdout = String::from_utf8_lossy(&r.out.stdout);
    assert!(
        stdout.contains("runs from share share0 as /opt/bins/smoke-from-share (not packed"),
        "{}",
        r.text()
    );
}

/// The same scenarios on a source-built kernel: virtiofs built in by the
/// guest fragment, no modules packed, the support read from the `.config`
/// cached beside the image.
#[test]
fn shares_work_on_a_source_built_kernel() {
    if !enabled() {
        return;
    }
    let Some(k) = common::source_kernel() else {
        return;
    };
    let _vm = vm_lock();
    let text = artifact_arrives_intact(&k);
    assert!(
        text.contains("virtiofs: built in (CONFIG_VIRTIO_FS=y, CONFIG_VIRTIO_PCI=y in "),
        "{text}"
    );
    read_only_share_refuses_writes(&k);
    // Two top-level execs of one file, and a second file, from a read-only
    // share and from a writable one. Under TCG the second exec from a share
    // ran stale translations of the first's code (SIGSEGV/SIGILL) until the
    // guest booted with init_on_alloc=1 (docs/shares.md).
    let dir = tempfile::tempdir().unwrap();
    let mut args: Vec<String> = Vec::new();
    let mut want = Vec::new();
    for (sub, mode) in [("bins", "ro"), ("rw-bins", "rw")] {
        let shared = dir.path().join(sub);
        std::fs::create_dir(&shared).unwrap();
        let once = shared.join(format!("smoke-{mode}"));
        let other = shared.join(format!("smoke-{mode}-2"));
        std::fs::copy(guest_bin("smoke"), &once).unwrap();
        std::fs::copy(guest_bin("smoke"), &other).unwrap();
        args.push("--share".into());
        args.push(format!("{}:/opt/{sub}:{mode}", shared.display()));
        for b in [&once, &once, &other] {
            args.push("--guest-bin".into());
            args.push(b.to_str().unwrap().into());
        }
        want.push(format!("smoke-{mode}/futex2-wait-wake"));
        want.push(format!("smoke-{mode}/futex2-wait-wake (2)"));
        want.push(format!("smoke-{mode}-2/futex2-wait-wake"));
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let r = run_on(&k, dir.path(), &args);
    assert_eq!(r.out.status.code(), Some(0), "{}", r.text());
    let want: Vec<&str> = want.iter().map(String::as_str).collect();
    assert_passed(dir.path(), &want, &r);
    assert!(
        r.text()
            .contains("runs from share share0 as /opt/bins/smoke-ro"),
        "{}",
        r.text()
    );
    let argv = std::fs::read_to_string(cell_dir(dir.path()).join("qemu-argv.txt")).unwrap();
    let tcg = argv.contains("-accel tcg");
    assert_eq!(argv.contains("init_on_alloc=1"), tcg, "{argv}");
    assert_eq!(
        r.text().contains("kernel booted with init_on_alloc=1"),
        tcg,
        "{}",
        r.text()
    );
}

#[test]
fn without_virtiofsd_artifacts_fall_back_and_explicit_shares_fail() {
    if !enabled() {
        return;
    }
    let _vm = vm_lock();
    let dir = tempfile::tempdir().unwrap();
    let bin = artifact_as(dir.path(), "write");
    let r = Run {
        out: harness_cmd(dir.path(), &["--guest-bin", bin.to_str().unwrap()])
            .env("HARNESS_VIRTIOFSD", "/nonexistent/virtiofsd")
            .output()
            .unwrap(),
    };
    assert_eq!(r.out.status.code(), Some(0), "{}", r.text());
    let stdout = String::from_utf8_lossy(&r.out.stdout);
    assert!(stdout.contains("NOTE no artifacts share"), "{}", r.text());
    let (cases, _) = junit(dir.path());
    assert!(
        cases.iter().any(|c| c.0 == "artifact-write" && c.2),
        "skipped without a share: {cases:?}"
    );

    let dir2 = tempfile::tempdir().unwrap();
    let share = format!("{}:/mnt/x", dir2.path().display());
    let start = Instant::now();
    let r = Run {
        out: harness_cmd(dir2.path(), &["--share", &share])
            .env("HARNESS_VIRTIOFSD", "/nonexistent/virtiofsd")
            .output()
            .unwrap(),
    };
    assert_eq!(r.out.status.code(), Some(69), "{}", r.text());
    assert!(
        r.text()
            .contains("--share asked for, but virtiofs cannot work here"),
        "{}",
        r.text()
    );
    assert!(
        start.elapsed() < Duration::from_secs(60),
        "fails before booting"
    );
}

#[test]
fn guest_init_loads_a_modular_module_decompressed_on_the_host() {
    if !enabled() {
        return;
    }
    let _vm = vm_lock();
    let dir = tempfile::tempdir().unwrap();
    let r = Run {
        out: harness_cmd(dir.path(), &[])
            .env("HARNESS_GUEST_MODULES", "cuse")
            .output()
            .unwrap(),
    };
    assert_eq!(r.out.status.code(), Some(0), "{}", r.text());
    assert!(
        r.text().contains("virtiofs: modules cuse (from "),
        "{}",
        r.text()
    );
    let console = std::fs::read(cell_dir(dir.path()).join("console.log")).unwrap();
    let console = String::from_utf8_lossy(&console);
    assert!(
        console.contains("harness: module /harness/modules/cuse.ko loaded"),
        "{console}"
    );
    assert!(console.contains("harness: share artifacts mounted on /harness/artifacts"));
}

#[test]
fn sigkill_of_the_harness_leaves_no_virtiofsd() {
    if !enabled() {
        return;
    }
    let _vm = vm_lock();
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().display().to_string();
    let mut child = harness_suite(dir.path(), "fault-hang", &[])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let start = Instant::now();
    while virtiofsd_with(&marker).is_empty() {
        assert!(
            start.elapsed() < Duration::from_secs(180),
            "virtiofsd never started"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    // SAFETY: plain kill(2) on our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
    child.wait().unwrap();
    let start = Instant::now();
    while !virtiofsd_with(&marker).is_empty() || !processes_with(&marker).is_empty() {
        assert!(
            start.elapsed() < Duration::from_secs(15),
            "left behind: {:?}",
            processes_with(&marker)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

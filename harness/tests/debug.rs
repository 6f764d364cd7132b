//! Debugging a failure (docs/debugging.md), each on a real kernel: the
//! shell through a pseudo-terminal, `--exec`, gdb attached to QEMU's
//! gdbstub on a `source:` kernel, the memory image of a panic, the user's
//! QEMU words, live lines, and a dry run that boots nothing.
//!
//! Real VMs (TCG here), so they run only with `HARNESS_VM_TESTS=1` (under
//! `CI` without it they fail). The kernel is `$HARNESS_TEST_KERNEL`
//! (default `debian:7.3.4`); the gdb test boots `$HARNESS_SOURCE_KERNEL`
//! (`source:7.3`, whose `vmlinux` the image cache keeps).

mod common;
use common::{case, enabled, kernel, parse_junit, processes_with, text, vm_lock, wait_for};

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

/// `harness run` on `kernel` in `topology`, its reports in `dir`.
fn run_cmd(dir: &Path, kernel: &str, topology: &str, suite: &str, extra: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_harness"));
    c.stdin(Stdio::null())
        .env_remove("HARNESS_FORCE_KVM")
        .args(["run", "--kernel", kernel, "--topology", topology])
        .args(["--suite", suite, "--accel", "tcg", "--no-artifacts"])
        .arg("--junit")
        .arg(dir.join("junit.xml"))
        .arg("--out")
        .arg(dir.join("out"))
        .args(extra);
    c
}

/// The one cell directory below `<dir>/out`.
fn cell_dir(dir: &Path) -> PathBuf {
    std::fs::read_dir(dir.join("out"))
        .expect("an output directory")
        .flatten()
        .map(|e| e.path())
        .find(|p| p.is_dir())
        .expect("a cell directory")
}

/// No QEMU whose argv carries `marker` is left.
fn no_qemu_left(marker: &str) {
    wait_for("QEMU to be gone", Duration::from_secs(10), || {
        processes_with(marker).is_empty()
    });
}

#[test]
fn dry_run_prints_the_plan_and_boots_nothing() {
    if !enabled() {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    // A QEMU that writes down how it was called: only `--version` may be.
    let log = d.path().join("qemu-calls.log");
    let wrapper = d.path().join("qemu-system-x86_64");
    std::fs::write(
        &wrapper,
        format!(
            "#!/bin/sh\necho \"$*\" >> {}\nexec qemu-system-x86_64 \"$@\"\n",
            log.display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755)).unwrap();
    let o = run_cmd(
        d.path(),
        &kernel(),
        "nodes=2,cpus=1,mem=256M",
        "smoke",
        &[
            "--dry-run",
            "--exec",
            "uname -r",
            "--qemu-arg=-d",
            "--qemu-arg",
            "guest_errors",
        ],
    )
    .env("HARNESS_QEMU", &wrapper)
    .output()
    .unwrap();
    let all = text(&o);
    assert_eq!(o.status.code(), Some(0), "{all}");
    let out = String::from_utf8_lossy(&o.stdout);
    for want in [
        "kernel: ",
        "topology: nodes=2,cpus=1,mem=256M",
        "  exec-1: /bin/sh -c 'uname -r'",
        "  /init (from ",
        "  /bin/busybox (from ",
        "kernel command line: console=ttyS0,115200 panic=-1",
        "-numa node,nodeid=1,cpus=1-1,memdev=mem1",
    ] {
        assert!(out.contains(want), "{want:?} missing:\n{all}");
    }
    let qemu_line = out.lines().find(|l| l.starts_with("qemu: ")).unwrap();
    assert!(qemu_line.ends_with(" -d guest_errors"), "{qemu_line}");
    let calls = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(
        calls.lines().all(|l| l.trim() == "--version"),
        "QEMU was started: {calls}"
    );
    assert!(!d.path().join("out").join("console.log").exists());
}

#[test]
fn matrix_gdb_wants_exactly_one_cell() {
    let matrix = Path::new(env!("CARGO_MANIFEST_DIR")).join("../matrix.yaml");
    let d = tempfile::tempdir().unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_harness"))
        .current_dir(d.path())
        .arg("matrix")
        .arg("--matrix")
        .arg(&matrix)
        .args(["--kernel", "debian-7.3", "--suite", "smoke", "--gdb"])
        .output()
        .unwrap();
    let all = text(&o);
    assert_eq!(o.status.code(), Some(2), "{all}");
    assert!(
        String::from_utf8_lossy(&o.stderr).contains(
            "--gdb debugs one VM, but the selection has 4 cells (debian-7.3/1n2c/smoke, "
        ),
        "{all}"
    );
    assert!(
        std::fs::read_dir(d.path()).unwrap().next().is_none(),
        "nothing written"
    );
}

#[test]
fn matrix_overrides_give_cells_their_qemu_args() {
    let text = "kernels:
  - {name: k73, spec: 'debian:7.3'}
topologies:
  - name: one
    nodes: [{cpus: 1, mem: 256M}]
  - name: two
    nodes: [{cpus: 1, mem: 256M}, {cpus: 1, mem: 256M}]
overrides:
  - {topology: two, qemu_args: [-d, guest_errors]}
";
    let m = harness::matrix::parse_str(text, Path::new("m.yaml")).unwrap();
    let args = |name: &str| {
        m.cells
            .iter()
            .find(|c| c.name == name)
            .map(|c| c.qemu_args.clone())
            .unwrap()
    };
    assert_eq!(args("k73/two/smoke"), ["-d", "guest_errors"]);
    assert!(args("k73/one/smoke").is_empty());
    let bad = text.replace("[-d, guest_errors]", "['']");
    let e = harness::matrix::parse_str(&bad, Path::new("m.yaml"))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("overrides[0]: qemu_args: \"\": an empty word"),
        "{e}"
    );
}

#[test]
fn qemu_args_reach_the_argv_and_live_lines_stream() {
    if !enabled() {
        return;
    }
    let _vm = vm_lock();
    let d = tempfile::tempdir().unwrap();
    let marker = format!("harness-debug-qemu-arg-{}", std::process::id());
    let o = run_cmd(
        d.path(),
        &kernel(),
        "nodes=1,cpus=1,mem=256M",
        "smoke",
        &["--qemu-arg=-name", "--qemu-arg", &marker, "--live"],
    )
    .output()
    .unwrap();
    let all = text(&o);
    assert_eq!(o.status.code(), Some(0), "{all}");
    let argv = std::fs::read_to_string(cell_dir(d.path()).join("qemu-argv.txt")).unwrap();
    assert!(
        argv.trim_end().ends_with(&format!("-name {marker}")),
        "{argv}"
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("console| ") && err.contains("Linux version"),
        "{all}"
    );
    assert!(err.contains("results| ok 1 topology"), "{all}");
    assert!(err.contains("results| ok 2 smoke"), "{all}");
    no_qemu_left(&marker);
}

#[test]
fn exec_runs_a_shell_command_and_reports_its_output() {
    if !enabled() {
        return;
    }
    let _vm = vm_lock();
    let d = tempfile::tempdir().unwrap();
    let json = d.path().join("results.json");
    let o = run_cmd(
        d.path(),
        &kernel(),
        "nodes=2,cpus=2,mem=256M",
        "none",
        &[
            "--exec",
            "grep -c processor /proc/cpuinfo",
            "--exec",
            "echo failing on purpose; exit 3",
            "--json",
            json.to_str().unwrap(),
        ],
    )
    .output()
    .unwrap();
    let all = text(&o);
    assert_eq!(o.status.code(), Some(1), "exec-2 fails: {all}");
    let cases = parse_junit(&std::fs::read_to_string(d.path().join("junit.xml")).unwrap());
    assert!(case(&cases, "exec-1").failure.is_none(), "{all}");
    let (msg, body) = case(&cases, "exec-2")
        .failure
        .clone()
        .expect("exec-2 fails");
    assert!(msg.contains("exited with status 3"), "{msg}");
    assert!(body.contains("failing on purpose"), "{body}");
    // The passing command's output is in the report: 4 vCPUs.
    let results: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let notes = results.to_string();
    assert!(notes.contains(r#"exec-1 output:\n4""#), "{notes}");
}

#[test]
fn shell_on_a_pseudo_terminal_reads_the_guest_and_ends_the_vm() {
    if !enabled() {
        return;
    }
    let _vm = vm_lock();
    let d = tempfile::tempdir().unwrap();
    let marker = format!("harness-debug-shell-{}", std::process::id());
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/pty_shell.py");
    let harness = run_cmd(
        d.path(),
        &kernel(),
        "nodes=2,cpus=1,mem=256M",
        "smoke",
        &["--shell", "--qemu-arg=-name", "--qemu-arg", &marker],
    );
    let o = Command::new("python3")
        .arg(&script)
        .arg(harness.get_program())
        .args(harness.get_args())
        .env(
            "PTY_INPUT",
            // Ctrl-C stops the guest's `sleep`, not the harness.
            "sleep 600\n<pause>\x03<pause>cat /sys/devices/system/node/online; futex-prctl --help | sed -n 3p | tr a-z A-Z; exit\n",
        )
        .env("PTY_TIMEOUT", "600")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let all = text(&o);
    assert_eq!(o.status.code(), Some(0), "{all}");
    let screen = String::from_utf8_lossy(&o.stdout);
    assert!(
        screen.lines().any(|l| l.trim() == "0-1"),
        "no `0-1` from the guest:\n{all}"
    );
    // The test binaries run by name; `--help` answers (upper-cased, so the
    // terminal's echo of the command line cannot be mistaken for it).
    assert!(
        screen.contains("USAGE: FUTEX-PRCTL [--LIST]"),
        "no `futex-prctl --help` from the guest:\n{all}"
    );
    // The plan before the shell ran and is reported, the shell too.
    let cases = parse_junit(&std::fs::read_to_string(d.path().join("junit.xml")).unwrap());
    assert!(case(&cases, "smoke/uname").failure.is_none(), "{all}");
    assert!(case(&cases, "shell").failure.is_none(), "{all}");
    no_qemu_left(&marker);
}

#[test]
fn shell_without_a_terminal_reads_stdin_as_a_script_and_ends_at_its_end() {
    if !enabled() {
        return;
    }
    let _vm = vm_lock();
    let d = tempfile::tempdir().unwrap();
    let mut child = run_cmd(
        d.path(),
        &kernel(),
        "nodes=2,cpus=1,mem=256M",
        "none",
        &["--shell=only"],
    )
    .stdin(Stdio::piped())
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"echo nodes=$(cat /sys/devices/system/node/online)\n")
        .unwrap();
    let o = child.wait_with_output().unwrap();
    let all = text(&o);
    assert_eq!(o.status.code(), Some(0), "{all}");
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("nodes=0-1"),
        "{all}"
    );
    let cases = parse_junit(&std::fs::read_to_string(d.path().join("junit.xml")).unwrap());
    assert_eq!(cases.len(), 1, "only the shell: {cases:#?}");
    assert!(case(&cases, "shell").failure.is_none(), "{all}");
}

#[test]
fn gdb_attaches_to_a_source_kernel_reads_it_and_the_run_passes() {
    if !enabled() {
        return;
    }
    // Source kernels are on (`$HARNESS_SOURCE_KERNEL`); this one has DWARF
    // and the kernel's gdb scripts (`kernels/7.3-gdb.yaml`, built by
    // `cargo xtask ci`).
    if common::source_kernel().is_none() {
        return;
    }
    let source = "source:7.3-gdb".to_string();
    let _vm = vm_lock();
    let d = tempfile::tempdir().unwrap();
    let sock = d.path().join("gdb.sock");
    let harness = run_cmd(
        d.path(),
        &source,
        "nodes=1,cpus=1,mem=256M",
        "smoke",
        &["--gdb", sock.to_str().unwrap()],
    )
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    wait_for("the gdbstub", Duration::from_secs(300), || sock.exists());
    let image = Command::new(env!("CARGO_BIN_EXE_harness"))
        .args(["kernel", "path", source.trim_start_matches("source:")])
        .output()
        .unwrap();
    let vmlinux =
        PathBuf::from(String::from_utf8_lossy(&image.stdout).trim()).with_file_name("vmlinux");
    assert!(
        vmlinux.is_file(),
        "no vmlinux beside the image: {}",
        vmlinux.display()
    );
    let scripts = vmlinux.with_file_name("vmlinux-gdb.py");
    assert!(
        scripts.is_file(),
        "no {} (CONFIG_GDB_SCRIPTS)",
        scripts.display()
    );
    // Halted at the reset vector: stop in start_kernel (paging on), read
    // the release through the DWARF types, run one of the kernel's own
    // gdb commands, then let the guest go.
    let gdb = Command::new("timeout")
        .args(["300", "gdb", "-batch", "-nx"])
        .arg("-iex")
        .arg(format!("add-auto-load-safe-path {}", scripts.display()))
        .arg(&vmlinux)
        .arg("-ex")
        .arg(format!("target remote {}", sock.display()))
        .args(["-ex", "hbreak start_kernel", "-ex", "continue"])
        .args(["-ex", "print init_uts_ns.name.release"])
        .args(["-ex", "lx-version"])
        .args(["-ex", "delete", "-ex", "detach"])
        .output()
        .unwrap();
    let gdb_text = text(&gdb);
    let o = harness.wait_with_output().unwrap();
    let all = text(&o);
    assert!(
        gdb_text.contains("$1 = \"7.3."),
        "gdb did not read init_uts_ns.name.release:\n{gdb_text}\nharness:\n{all}"
    );
    assert!(
        gdb_text.contains("Linux version 7.3."),
        "lx-version (scripts/gdb) did not run:\n{gdb_text}"
    );
    assert_eq!(o.status.code(), Some(0), "{all}");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains(&format!(
            "gdb: gdb -iex 'add-auto-load-safe-path {}' {} -ex 'target remote {}'",
            scripts.display(),
            vmlinux.display(),
            sock.display()
        )),
        "{all}"
    );
    let argv = std::fs::read_to_string(cell_dir(d.path()).join("qemu-argv.txt")).unwrap();
    assert!(argv.contains(" nokaslr") && argv.contains(" -S"), "{argv}");
}

#[test]
fn dump_on_panic_writes_an_elf_core_naming_every_vcpu() {
    if !enabled() {
        return;
    }
    let _vm = vm_lock();
    let d = tempfile::tempdir().unwrap();
    let o = run_cmd(
        d.path(),
        &kernel(),
        "nodes=1,cpus=2,mem=256M",
        "fault-panic",
        &["--dump-on-panic"],
    )
    .output()
    .unwrap();
    let all = text(&o);
    assert_eq!(o.status.code(), Some(1), "{all}");
    let core = cell_dir(d.path()).join("vmcore.elf");
    let size = std::fs::metadata(&core).map(|m| m.len()).unwrap_or(0);
    assert!(
        size > 200 << 20 && size < 300 << 20,
        "{} is {size} bytes\n{all}",
        core.display()
    );
    let notes = Command::new("readelf")
        .arg("-n")
        .arg(&core)
        .output()
        .unwrap();
    let notes = String::from_utf8_lossy(&notes.stdout);
    assert_eq!(
        notes.matches("NT_PRSTATUS").count(),
        2,
        "one note per vCPU:\n{notes}"
    );
    let cases = parse_junit(&std::fs::read_to_string(d.path().join("junit.xml")).unwrap());
    let (_, body) = case(&cases, "panic").failure.clone().expect("panic fails");
    assert!(body.contains(&core.display().to_string()), "{body}");

    // kdump-compressed where QEMU writes it: the diskdump signature.
    let d = tempfile::tempdir().unwrap();
    let o = run_cmd(
        d.path(),
        &kernel(),
        "nodes=1,cpus=1,mem=256M",
        "fault-panic",
        &["--dump-on-panic=kdump-zlib"],
    )
    .output()
    .unwrap();
    let kdump = cell_dir(d.path()).join("vmcore.kdump");
    let head = std::fs::read(&kdump)
        .map(|b| b[..8].to_vec())
        .unwrap_or_default();
    assert_eq!(head, b"KDUMP   ", "{}\n{}", kdump.display(), text(&o));
}

/// The image `kernel` boots, from the default cache (fetched by a run
/// first when the cache does not have it yet).
fn cached_image(kernel: &str) -> PathBuf {
    let named = || {
        let o = Command::new(env!("CARGO_BIN_EXE_harness"))
            .args(["run", "--kernel", kernel, "--suite", "smoke", "--dry-run"])
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(0), "{}", text(&o));
        let out = String::from_utf8_lossy(&o.stdout).into_owned();
        let line = out.lines().find(|l| l.starts_with("kernel: ")).unwrap();
        let path = line.rsplit_once(" (").unwrap().1.trim_end_matches(')');
        PathBuf::from(path)
    };
    let image = named();
    if image.is_file() {
        return image;
    }
    let d = tempfile::tempdir().unwrap();
    let o = run_cmd(d.path(), kernel, "nodes=1,cpus=1,mem=256M", "smoke", &[])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let image = named();
    assert!(image.is_file(), "{}", image.display());
    image
}

/// The result lines of a KTAP file, every level (`  ok 1 uname`).
fn result_lines(ktap: &Path) -> Vec<String> {
    std::fs::read_to_string(ktap)
        .unwrap_or_else(|e| panic!("{}: {e}", ktap.display()))
        .lines()
        .filter(|l| {
            let t = l.trim_start();
            t.starts_with("ok ") || t.starts_with("not ok ")
        })
        .map(String::from)
        .collect()
}

/// `--dry-run` with no QEMU and an empty cache prints a `by hand:` line;
/// after the same run with `--keep-initramfs`, that line, run as printed by
/// a shell, boots the same cell without the harness: QEMU exits 33 (the
/// plan ran), the kernel's console on its stdout, and the results file has
/// the run's results.
#[test]
fn a_dry_runs_by_hand_line_boots_the_cell_as_printed() {
    if !enabled() {
        return;
    }
    let image = cached_image(&kernel());
    let _vm = vm_lock();
    let d = tempfile::tempdir().unwrap();
    let cache = d.path().join("cache");
    let spec = format!("path:{}", image.display());
    let topology = "nodes=2,cpus=1,mem=256M";
    let o = run_cmd(d.path(), &spec, topology, "smoke", &["--dry-run"])
        .env("HARNESS_QEMU", "/nonexistent/qemu-system-x86_64")
        .env("HARNESS_CACHE_DIR", &cache)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    let line = out
        .lines()
        .find_map(|l| l.strip_prefix("by hand: "))
        .unwrap_or_else(|| panic!("no by hand line:\n{out}"))
        .to_string();
    assert!(line.starts_with("qemu-system-x86_64 "), "{line}");
    assert!(!line.contains('<'), "a placeholder in {line}");
    assert!(!cache.exists(), "the dry run wrote the cache");
    assert!(!d.path().join("out").exists(), "the dry run made --out");

    let o = run_cmd(d.path(), &spec, topology, "smoke", &["--keep-initramfs"])
        .env("HARNESS_CACHE_DIR", &cache)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let cell = cell_dir(d.path());
    assert!(cell.join("initramfs.cpio").is_file());
    let kept = std::fs::read_to_string(cell.join("qemu-by-hand.txt")).unwrap();
    assert!(kept.contains(" -serial stdio "), "{kept}");
    let run_results = result_lines(&cell.join("results.ktap"));
    // topology's and smoke's cases, then the two binaries.
    assert!(run_results.len() > 2, "{run_results:?}");
    assert_eq!(
        run_results.iter().filter(|l| !l.starts_with(' ')).count(),
        2
    );

    let by_hand = Command::new("timeout")
        .args(["--kill-after=5", "600", "sh", "-c", &line])
        .current_dir(d.path())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let console = String::from_utf8_lossy(&by_hand.stdout);
    assert_eq!(
        by_hand.status.code(),
        Some(33),
        "QEMU's status is guest-init's: {}",
        text(&by_hand)
    );
    assert!(console.contains("Linux version "), "{console}");
    assert!(console.contains("harness: begin "), "{console}");
    assert_eq!(
        result_lines(&cell.join("results-by-hand.ktap")),
        run_results
    );
}

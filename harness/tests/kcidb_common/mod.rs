//! Shared by `kcidb.rs`, `kcidb_submit.rs` (and `results_schema.rs`, for
//! the fixtures): KernelCI's validator
//! (kcidb-io from PyPI, installed into a venv under the target directory
//! on first use; under `CI` a validator that cannot be had fails) and
//! fixtures that go through the real verdict (`runner::judge`).
// Each test binary uses part of it.
#![allow(dead_code)]

use harness::events::{CellOutcome, CellStatus, Event, HostFacts, KernelFacts, RunStats};
use harness::kernelspec::{KernelOrigin, ResolvedKernel};
use harness::planner::{CellRequest, ReadyCell};
use harness::reporter::kcidb::Options;
use harness::reporter::Reporter;
use harness::result::{CellResult, KnownFailure, VmEnd};
use harness::topology::Topology;
use serde_json::Value;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, SystemTime};

/// The validator, pinned: its schema module is what the document follows.
pub const KCIDB_IO: &str = "kcidb-io==141";
/// The origin of the fixtures' documents.
pub const ORIGIN: &str = "futex_ci";
/// Their `--log-base-url`.
pub const BASE: &str = "https://logs.example/run-1";

// ---------------------------------------------------------------- validator

/// A Python with `kcidb_io`: `$HARNESS_KCIDB_PYTHON`, else a venv under the
/// target directory, made once (a lock keeps parallel test binaries from
/// making it twice). `None` (skip) only outside CI.
pub fn validator() -> Option<PathBuf> {
    static PYTHON: std::sync::OnceLock<Result<PathBuf, String>> = std::sync::OnceLock::new();
    let r = PYTHON.get_or_init(|| {
        if let Some(p) = std::env::var_os("HARNESS_KCIDB_PYTHON") {
            return Ok(PathBuf::from(p));
        }
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("kcidb-venv");
        let python = dir.join("bin/python");
        let lock_path = Path::new(env!("CARGO_TARGET_TMPDIR")).join("kcidb-venv.lock");
        let lock = std::fs::File::create(&lock_path).map_err(|e| e.to_string())?;
        fs4::FileExt::lock(&lock).map_err(|e| e.to_string())?;
        let ready = |p: &Path| {
            Command::new(p)
                .args(["-c", "import kcidb_io"])
                .status()
                .is_ok_and(|s| s.success())
        };
        if !ready(&python) {
            let run = |c: &mut Command| -> Result<(), String> {
                let o = c.output().map_err(|e| format!("{c:?}: {e}"))?;
                if o.status.success() {
                    Ok(())
                } else {
                    Err(format!(
                        "{c:?}: {}\n{}",
                        o.status,
                        String::from_utf8_lossy(&o.stderr)
                    ))
                }
            };
            let _ = std::fs::remove_dir_all(&dir);
            run(Command::new("python3").args(["-m", "venv"]).arg(&dir))?;
            run(Command::new(&python).args([
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
                KCIDB_IO,
            ]))?;
        }
        if ready(&python) {
            Ok(python)
        } else {
            Err(format!("{} has no kcidb_io", python.display()))
        }
    });
    match r {
        Ok(p) => Some(p.clone()),
        Err(e) => {
            assert!(
                std::env::var_os("CI").is_none(),
                "CI is set but the KCIDB validator ({KCIDB_IO}) cannot be had: {e}"
            );
            eprintln!("skipping the KCIDB schema check: {e}");
            None
        }
    }
}

/// Validates `doc` against kcidb-io's schema 5.3, which must also be the
/// package's latest version; panics with the validator's words.
pub fn validate(doc: &[u8]) {
    let Some(python) = validator() else { return };
    let script = r#"
import json, sys
from kcidb_io.schema import V5_3, LATEST
doc = json.load(sys.stdin)
version = (doc["version"]["major"], doc["version"]["minor"])
assert version == (LATEST.major, LATEST.minor) == (V5_3.major, V5_3.minor), (version, LATEST)
V5_3.validate_exactly(doc)
LATEST.validate(doc)
print("valid")
"#;
    let mut child = Command::new(python)
        .args(["-c", script])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(doc).unwrap();
    let o = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        o.status.success() && o.stdout.starts_with(b"valid"),
        "kcidb-io rejects the document:\n{}",
        err.chars().take(4000).collect::<String>()
    );
}

// ---------------------------------------------------------------- fixtures

pub fn harness() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_harness"));
    c.stdin(Stdio::null());
    c
}

pub fn fixture(name: &str) -> Vec<u8> {
    std::fs::read(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/console")
            .join(name),
    )
    .unwrap()
}

pub fn debian_facts() -> KernelFacts {
    let k = ResolvedKernel {
        arch: harness::arch::Arch::X86_64,
        path: "/cache/debian/kernels/7.3.4+deb13-cloud-amd64/vmlinuz".into(),
        version: Some("7.3.4".into()),
        description: "7.3.4+deb13-cloud-amd64 (linux-image-7.3.4+deb13-cloud-amd64, trixie)".into(),
        expect: None,
        origin: KernelOrigin::Debian {
            abi: "7.3.4+deb13-cloud-amd64".into(),
            package: "linux-image-7.3.4+deb13-cloud-amd64".into(),
        },
    };
    harness::reporter::kcidb::kernel_facts("debian:7.3.4", &k)
}

pub const PATCH_SHA: &str = "5f2c9d7e1a3b4c6d8e0f1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b1c2d";

/// `source:7.3-immutable` as the build cache leaves it.
pub fn patched_facts(cache: &Path) -> KernelFacts {
    let key_dir = cache.join("kbuild/images/7.3-immutable/0123456789abcdef0123");
    std::fs::create_dir_all(&key_dir).unwrap();
    std::fs::write(key_dir.join("bzImage"), b"image").unwrap();
    std::fs::write(
        key_dir.join("meta.json"),
        serde_json::json!({
            "name": "7.3-immutable",
            "key": "0123456789abcdef0123",
            "inputs": {
                "base": "debian:linux-source-7.3_7.3.4-1_all.deb",
                "patches": [["7.3-immutable/0001-futex-immutable private hash.patch", PATCH_SHA]],
                "toolchain": ["gcc (Debian 14.2.0-19) 14.2.0", "GNU ld (GNU Binutils for Debian) 2.44"],
            },
            "base_commit": "9".repeat(40),
            "build_seconds": 301.5,
        })
        .to_string(),
    )
    .unwrap();
    let k = ResolvedKernel {
        arch: harness::arch::Arch::X86_64,
        path: key_dir.join("bzImage"),
        version: Some("7.3".into()),
        description: "source:7.3-immutable 0123456789abcdef0123 (cache hit in 0.10 s)".into(),
        expect: Some("immutable=1".into()),
        origin: KernelOrigin::Source,
    };
    harness::reporter::kcidb::kernel_facts("source:7.3-immutable", &k)
}

/// A definition on an upstream git base (facts as `kernel_facts` makes them).
pub fn git_facts() -> KernelFacts {
    KernelFacts {
        kind: "source".into(),
        version: Some("7.3".into()),
        description: "source:mainline abc (built)".into(),
        source: format!("git:{}", "a1".repeat(20)),
        build: "source:mainline@fedcba9876543210fedc".into(),
        config: "mainline".into(),
        git_url: Some("https://git.kernel.org/pub/scm/linux/kernel/git/torvalds/linux.git".into()),
        git_ref: Some("v7.3".into()),
        git_commit: Some("a1".repeat(20)),
        compiler: Some("gcc (Debian 14.2.0-19) 14.2.0".into()),
        build_seconds: Some(280.0),
        build_started: Some(1_764_580_000.0),
        build_log: Some("mainline/fedcba9876543210fedc/build.log".into()),
        ..KernelFacts::default()
    }
}

pub fn ready(
    index: usize,
    kernel: &str,
    facts: Option<KernelFacts>,
    topo: (&str, &str),
    suite: &str,
    out: &Path,
) -> ReadyCell {
    let t = Topology::parse_spec(topo.1).unwrap();
    let mut req = CellRequest::new(
        kernel,
        "/k/bzImage".into(),
        topo.0,
        t,
        suite,
        Vec::new(),
        harness::qemu::Accel::Tcg,
        out.join(format!("cell{index}")),
    );
    req.name = format!("{kernel}/{}/{suite}", topo.0).replace(':', "-");
    req.expect = Some("prctl=1,private_hash=1,numa=1".into());
    req.kernel_facts = facts;
    req.known_failures = vec![KnownFailure {
        case: "futex-resize/set0-vs-thread-create".into(),
        reason: "kernel race (docs/findings.md)".into(),
        message: "EBUSY".into(),
        kernels: vec!["*".into()],
        suite: suite.into(),
        at: "matrix.yaml:85:9".into(),
        ..Default::default()
    }];
    harness::planner::cell(index, req)
}

/// What the VM of `cell` produced: `ktap` on the results port, `console`.
pub fn ran(
    cell: &ReadyCell,
    planned: &[&str],
    ktap: &str,
    console: &[u8],
    end: VmEnd,
    started: SystemTime,
) -> CellOutcome {
    let result = CellResult {
        name: cell.meta.name.clone(),
        kernel: cell.meta.kernel.clone(),
        topology: cell.meta.topology.clone(),
        suite: cell.meta.suite.clone(),
        accel: "tcg".into(),
        qemu_version: "QEMU emulator version 10.0.2 (Debian 1:10.0.2+ds-2)".into(),
        planned: planned.iter().map(|s| s.to_string()).collect(),
        end,
        ktap: harness::ktap::parse(ktap.as_bytes()),
        console: harness::console::scan(console),
        console_log: Some(cell.meta.out_dir.join("console.log")),
        duration: Duration::from_millis(12_500),
        started,
        qemu_cpu: None,
        known_failures: Vec::new(),
        boot_retries: Vec::new(),
        qemu_command: String::new(),
        profile: harness::profile::CellProfile {
            phases: vec![(harness::profile::Phase::Boot, Duration::from_secs(4))],
            tests: vec![harness::profile::TestTime {
                number: Some(1),
                name: "topology".into(),
                duration: Duration::from_millis(120),
            }],
        },
        notes: Vec::new(),
    };
    harness::runner::judge(cell, result)
}

pub fn bench_diag(config: &str, totals: &[f64]) -> String {
    use guest_tests::bench::{BenchLine, Stats, Summary};
    BenchLine::Summary(Summary {
        config: config.into(),
        spec: format!("{config}:threads=2"),
        total: Stats::of(totals),
        per_thread: Stats::of(totals),
        threads: 2,
    })
    .to_diag()
}

/// Seven cells: passed (with a known failure), failed (a WARNING and a
/// hostile message), a panicking guest on a patched source kernel, a
/// benchmark on a git-based kernel, one that could not run, one never
/// started, one interrupted.
pub fn outcomes(out: &Path, started: SystemTime) -> Vec<CellOutcome> {
    let two = ("2n", "nodes=2,cpus=1,mem=256M,distance=20");
    let one = ("1n", "nodes=1,cpus=2,mem=512M");
    let passed = ready(0, "debian:7.3.4", Some(debian_facts()), two, "futex", out);
    let failed = ready(1, "debian:7.3.4", Some(debian_facts()), one, "futex", out);
    let panics = ready(
        2,
        "source:7.3-immutable",
        Some(patched_facts(out)),
        one,
        "smoke",
        out,
    );
    let bench = ready(3, "source:mainline", Some(git_facts()), two, "bench", out);
    let error = ready(4, "source:mainline", Some(git_facts()), one, "futex", out);
    let mut not_run = ready(5, "debian:7.3.4", None, one, "smoke", out);
    not_run.meta.facts = None; // a placeholder, never planned
    let interrupted = ready(6, "debian:7.3.4", Some(debian_facts()), two, "smoke", out);
    vec![
        ran(
            &passed,
            &["topology", "futex-numa", "futex-resize"],
            "KTAP version 1\n1..3\n  KTAP version 1\n  1..1\n  ok 1 nodes\nok 1 topology\n  KTAP version 1\n  1..2\n  ok 1 flag-accepted\n  ok 2 home-node # SKIP no memory-less node\nok 2 futex-numa\n  KTAP version 1\n  1..1\n  # EBUSY\n  not ok 1 set0-vs-thread-create\nnot ok 3 futex-resize\n",
            b"",
            VmEnd::Finished,
            started,
        ),
        ran(
            &failed,
            &["futex_basic", "topology"],
            "KTAP version 1\n1..2\n  KTAP version 1\n  1..2\n  ok 1 wait-wake\n  # expected EINVAL\u{0} got 0 <\"&'>\n  not ok 2 bad-flags\nnot ok 1 futex_basic\n  KTAP version 1\n  1..1\n  ok 1 nodes\nok 2 topology\n",
            &fixture("warning.log"),
            VmEnd::Finished,
            started,
        ),
        ran(
            &panics,
            &["topology", "smoke", "futex-prctl"],
            "KTAP version 1\n1..3\n  KTAP version 1\n  1..1\n  ok 1 nodes\nok 1 topology\n# Subtest: smoke\n  KTAP version 1\n  1..2\n  ok 1 first\n",
            &fixture("oops-panic.log"),
            VmEnd::KernelPanic,
            started,
        ),
        ran(
            &bench,
            &["topology", "futex-bench"],
            &format!(
                "KTAP version 1\n1..2\n  KTAP version 1\n  1..1\n  ok 1 nodes\nok 1 topology\n  KTAP version 1\n  1..2\n  # {}\n  ok 1 private\n  # BENCH {{\"kind\":\"skip\",\"config\":\"immutable\",\"reason\":\"no immutable hash\"}}\n  ok 2 immutable # SKIP no immutable hash\nok 2 futex-bench\n",
                bench_diag("private", &[1.0e6, 1.2e6, 1.1e6])
            ),
            b"",
            VmEnd::Finished,
            started,
        ),
        CellOutcome::without_result(error.meta.clone(), CellStatus::Error("QEMU refused the image".into())),
        CellOutcome::without_result(not_run.meta.clone(), CellStatus::NotRun("--fail-fast: not started".into())),
        ran(
            &interrupted,
            &["topology", "smoke"],
            "KTAP version 1\n1..2\n  KTAP version 1\n  1..1\n  ok 1 nodes\nok 1 topology\n",
            b"",
            VmEnd::Interrupted,
            started,
        ),
    ]
}

/// Feeds a run of `outcomes` to `reporters`.
pub fn run_events(
    outcomes: &[CellOutcome],
    started: SystemTime,
    reporters: &mut [&mut dyn Reporter],
) {
    let host = HostFacts {
        qemu_version: "QEMU emulator version 10.0.2".into(),
        harness_version: "0.1.0".into(),
    };
    let mut events = vec![Event::RunStarted {
        cells: outcomes.iter().map(|o| o.meta.clone()).collect(),
        host,
        at: started,
    }];
    events.extend(
        outcomes
            .iter()
            .map(|o| Event::CellFinished(Box::new(o.clone()))),
    );
    events.push(Event::RunFinished {
        stats: RunStats::default(),
        interrupted: false,
    });
    for e in &events {
        for r in reporters.iter_mut() {
            r.report(e).unwrap();
        }
    }
}

pub fn opts() -> Options {
    Options::new(ORIGIN, Some(BASE)).unwrap()
}

pub fn tests_of<'a>(doc: &'a Value, path: &str) -> Vec<&'a Value> {
    doc["tests"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["path"] == path)
        .collect()
}

pub fn one<'a>(doc: &'a Value, path: &str, cell: &str) -> &'a Value {
    let found: Vec<_> = tests_of(doc, path)
        .into_iter()
        .filter(|t| t["misc"]["cell"].as_str().unwrap_or("").contains(cell))
        .collect();
    assert_eq!(found.len(), 1, "{path} in {cell}: {found:?}");
    found[0]
}

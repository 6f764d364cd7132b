//! The suite registry: named lists of guest binaries with their arguments
//! and timeouts (built-in, fault-injection, the `bench` suite, and the names
//! of the suites built from a kernel tree), turned into the guest's
//! [`RunPlan`] plus the files the initramfs needs. Every run starts with the
//! `topology` check of the declared topology.
//!
//! Architecture invariant: a floor module. It knows the guest binaries
//! (through [`guest_tests::binaries`]) but not how kselftests are built,
//! how a benchmark is reported, or how a cell runs.

use crate::guestbin::{GuestBinError, GuestBins};
use crate::topology::Topology;
use guest_tests::plan::{PlannedTest, RunPlan, BIN_DIR, PLAN_VERSION};
use std::path::PathBuf;
use std::time::Duration;

/// Errors resolving a suite.
#[derive(Debug, thiserror::Error)]
pub enum SuiteError {
    /// No such suite.
    #[error("unknown suite {name:?}; known suites: {}", known.join(", "))]
    Unknown {
        /// Asked for.
        name: String,
        /// What exists.
        known: Vec<&'static str>,
    },
    /// A binary problem.
    #[error(transparent)]
    Bin(#[from] GuestBinError),
    /// The suite is built from a kernel source tree: resolve it with
    /// [`crate::kselftest::resolve_suite`].
    #[error("suite {name:?} is built from a kernel source tree; resolve it with kselftest::resolve_suite")]
    NeedsBuild {
        /// The suite.
        name: String,
    },
    /// A user binary has a name the guest cannot use.
    #[error("guest binary {path}: file name {name:?} must be 1-64 characters of [A-Za-z0-9._-]")]
    BadName {
        /// The file.
        path: PathBuf,
        /// The name.
        name: String,
    },
    /// A `--guest-env` word that is not `KEY=VALUE` or sets what the
    /// harness sets itself.
    #[error("--guest-env {word:?}: {why}")]
    BadGuestEnv {
        /// As given.
        word: String,
        /// What is wrong with it.
        why: &'static str,
    },
}

/// Where a test's executable comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Binary {
    /// One of ours, by name.
    Builtin(&'static str),
    /// A user-supplied static binary (`--guest-bin`).
    Host(PathBuf),
    /// A static binary built outside this workspace (e.g. the kernel's own
    /// selftests, see [`crate::kselftest`]), packed as `file`.
    External {
        /// File name inside the guest's binary directory.
        file: String,
        /// The binary on the host.
        path: PathBuf,
    },
}

/// One top-level test of a suite.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SuiteTest {
    /// KTAP name.
    pub name: String,
    /// Executable.
    pub binary: Binary,
    /// Arguments.
    pub args: Vec<String>,
    /// Timeout inside the guest.
    pub timeout: Duration,
}

impl SuiteTest {
    fn builtin(name: &'static str, args: &[&str], secs: u64) -> SuiteTest {
        SuiteTest {
            name: name.into(),
            binary: Binary::Builtin(name),
            args: args.iter().map(|s| s.to_string()).collect(),
            timeout: Duration::from_secs(secs),
        }
    }
}

/// Names of the built-in suites.
pub const SUITES: &[&str] = &[
    "smoke",
    "futex",
    "none",
    "fault-panic",
    "fault-hang",
    "fault-garbage",
    KSELFTEST_FUTEX,
    "bench",
];

/// The kernel's own futex selftests, built from a kernel tree
/// (`crate::kselftest` builds them).
pub const KSELFTEST_FUTEX: &str = "kselftest-futex";

/// Whether a suite is built from a kernel source tree (kselftests).
pub fn is_kselftest_suite(suite: &str) -> bool {
    suite == KSELFTEST_FUTEX
}

/// Fault-injection suites of `harness/tests/faults.rs` (accepted by
/// [`builtin`], not advertised in [`SUITES`]); see `docs/reliability.md`.
pub const FAULT_SUITES: &[&str] = &[
    "fault-flood",
    "fault-console-flood",
    "fault-fake-console",
    "fault-hung-task",
    "fault-lkdtm",
    "fault-softlockup",
    "fault-wedge",
    "fault-livelock",
    "fault-long",
    "fault-flaky",
];

/// The tests of a built-in suite. `expect` is the `--expect` string for
/// the futex binaries (`None`: they derive it from the guest's `uname`).
pub fn builtin(name: &str, expect: Option<&str>) -> Result<Vec<SuiteTest>, SuiteError> {
    let t = SuiteTest::builtin;
    Ok(match name {
        "smoke" => vec![t("smoke", &[], 60)],
        "futex" => guest_tests::binaries::futex()
            .map(|b| {
                let mut s = t(b, &[], 600);
                if let Some(e) = expect {
                    s.args = vec!["--expect".into(), e.into()];
                }
                s
            })
            .collect(),
        "none" => vec![],
        n if is_kselftest_suite(n) => return Err(SuiteError::NeedsBuild { name: n.into() }),
        "bench" => vec![bench_test(expect)],
        // Fault-injection suites: what the harness must survive and report.
        "fault-panic" => vec![
            t("smoke", &[], 60),
            named("panic", "fault", &["panic"], 60),
            named("smoke-after", "smoke", &[], 60),
        ],
        "fault-hang" => vec![
            named("hang", "fault", &["hang"], 3),
            named("smoke-after", "smoke", &[], 60),
        ],
        "fault-garbage" => vec![
            named("garbage", "fault", &["garbage"], 30),
            named("smoke-after", "smoke", &[], 60),
        ],
        // 300 MiB of KTAP-less output: guest-init keeps 8 MiB and says so.
        "fault-flood" => vec![
            named("flood", "fault", &["flood", "300"], 600),
            named("smoke-after", "smoke", &[], 60),
        ],
        // Past guest-init, straight onto the console socket: more than the
        // host's console limit.
        "fault-console-flood" => vec![
            named("console-flood", "fault", &["flood-console", "40"], 900),
            named("smoke-after", "smoke", &[], 60),
        ],
        "fault-fake-console" => vec![
            named("fake-console", "fault", &["fake-console"], 30),
            named("smoke-after", "smoke", &[], 60),
        ],
        "fault-hung-task" => vec![
            named("hung-task", "fault", &["hung-task"], 60),
            named("smoke-after", "smoke", &[], 60),
        ],
        // Needs a kernel with CONFIG_LKDTM (each skips without it).
        "fault-lkdtm" => vec![
            named("lkdtm-warning", "fault", &["lkdtm", "WARNING"], 30),
            named("lkdtm-bug", "fault", &["lkdtm", "BUG"], 30),
            named("lkdtm-exception", "fault", &["lkdtm", "EXCEPTION"], 30),
            // The WARNING inside a case: it fails that case, not the binary.
            named("lkdtm-in-case", "fault", &["cases-lkdtm"], 30),
            named("smoke-after", "smoke", &[], 60),
        ],
        // The CPU never comes back: last, with a short timeout.
        "fault-softlockup" => vec![named(
            "lkdtm-softlockup",
            "fault",
            &["lkdtm", "SOFTLOCKUP"],
            20,
        )],
        // A task that sleeps uninterruptibly for ever (LKDTM `HUNG_TASK`):
        // SIGKILL at 20 s does not end it; guest-init leaves it behind and
        // runs the next binary.
        "fault-wedge" => vec![
            named("hung", "fault", &["lkdtm", "HUNG_TASK"], 20),
            named("smoke-after", "smoke", &[], 60),
        ],
        // Every CPU but one spins in the kernel for good (LKDTM
        // `SOFTLOCKUP`, pinned children that outlive SIGKILL): the harness
        // ends the guest as wedged by `livelock` at its timeout; `smoke`
        // keeps its result, `smoke-after` is "not run".
        "fault-livelock" => vec![
            t("smoke", &[], 60),
            named("livelock", "fault", &["lkdtm-others", "SOFTLOCKUP"], 20),
            named("smoke-after", "smoke", &[], 60),
        ],
        // Results first, then a long wait (for killing QEMU mid-run).
        // Passes six times in a boot, fails from the seventh: what
        // `--until-fail` must stop at.
        "fault-flaky" => vec![named("flaky", "fault", &["fail-on-run", "7"], 30)],
        "fault-long" => vec![
            t("smoke", &[], 60),
            named("long-hang", "fault", &["hang"], 600),
        ],
        _ => {
            return Err(SuiteError::Unknown {
                name: name.into(),
                known: SUITES.to_vec(),
            })
        }
    })
}

fn named(name: &str, bin: &'static str, args: &[&str], secs: u64) -> SuiteTest {
    SuiteTest {
        name: name.into(),
        binary: Binary::Builtin(bin),
        args: args.iter().map(|s| s.to_string()).collect(),
        timeout: Duration::from_secs(secs),
    }
}

/// The guest timeout for a futex-bench run of `n` configurations.
pub fn bench_timeout(n: usize, rounds: usize, runtime: f64) -> Duration {
    // Each round: runtime + process start and thread start/stop (slow under TCG).
    Duration::from_secs_f64(n as f64 * rounds as f64 * (runtime + 3.0) + 60.0)
}

/// Rounds per configuration of the `bench` suite.
pub const BENCH_ROUNDS: usize = 3;
/// Seconds per round of the `bench` suite.
pub const BENCH_RUNTIME: f64 = 1.0;

/// The built-in `bench` suite (usable from a matrix): the standard set,
/// 3 interleaved rounds of 1 s each.
pub fn bench_test(expect: Option<&str>) -> SuiteTest {
    let mut args: Vec<String> = vec!["--set".into(), "standard".into()];
    args.extend(bench_round_args());
    if let Some(e) = expect {
        args.push("--expect".into());
        args.push(e.into());
    }
    SuiteTest {
        name: "futex-bench".into(),
        binary: Binary::Builtin("futex-bench"),
        args,
        timeout: bench_timeout(12, BENCH_ROUNDS, BENCH_RUNTIME),
    }
}

fn bench_round_args() -> [String; 4] {
    [
        "--rounds".into(),
        BENCH_ROUNDS.to_string(),
        "--runtime".into(),
        BENCH_RUNTIME.to_string(),
    ]
}

/// The `bench` suite restricted to some configurations (`name:key=val,...`
/// specs, e.g. a part of [`guest_tests::bench::standard_set`]), with the
/// suite's rounds: what `harness bisect --test bench/GLOB` runs.
pub fn bench_test_with(specs: &[String], expect: Option<&str>) -> SuiteTest {
    let mut t = bench_test(expect);
    let mut args: Vec<String> = bench_round_args().into();
    for s in specs {
        args.push("--config".into());
        args.push(s.clone());
    }
    if let Some(e) = expect {
        args.push("--expect".into());
        args.push(e.into());
    }
    t.args = args;
    t.timeout = bench_timeout(specs.len(), BENCH_ROUNDS, BENCH_RUNTIME);
    t
}

/// A user binary as one test named after its file.
pub fn user_binary(path: PathBuf, timeout: Duration) -> Result<SuiteTest, SuiteError> {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let ok = !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c));
    if !ok {
        return Err(SuiteError::BadName { path, name });
    }
    crate::guestbin::check_static(&path)?;
    Ok(SuiteTest {
        name,
        binary: Binary::Host(path),
        args: vec![],
        timeout,
    })
}

/// One `--guest-env KEY=VALUE` word: a variable every test binary of the
/// cell gets (e.g. `FUTEX_STRESS_ITERATIONS=50`, `FUTEX_RACE_SERIALIZE=1`).
/// `KEY` is a shell name; `PATH` and `HARNESS_*` are the harness's own.
pub fn guest_env(word: &str) -> Result<(String, String), SuiteError> {
    let bad = |why| SuiteError::BadGuestEnv {
        word: word.to_string(),
        why,
    };
    let (key, value) = word
        .split_once('=')
        .ok_or_else(|| bad("expected KEY=VALUE"))?;
    let name = key
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if !name {
        return Err(bad(
            "KEY must be a name of [A-Za-z0-9_], not starting with a digit",
        ));
    }
    if key == "PATH" || key.starts_with("HARNESS_") {
        return Err(bad("PATH and HARNESS_* are set by the harness"));
    }
    if value.contains('\0') {
        return Err(bad("VALUE cannot hold a NUL byte"));
    }
    Ok((key.to_string(), value.to_string()))
}

/// The topology check that opens every run: the nodes, and the distance
/// matrix when one is declared (without one the guest expects QEMU's
/// defaults, 10 local and 20 remote).
pub fn topology_check(t: &Topology) -> SuiteTest {
    let mut args = vec!["--nodes".into(), t.check_arg()];
    if let Some(d) = t.distance_arg() {
        args.extend(["--distances".into(), d]);
    }
    SuiteTest {
        name: "topology".into(),
        binary: Binary::Builtin("topology"),
        args,
        timeout: Duration::from_secs(60),
    }
}

/// Bytes of output kept per binary in the guest.
pub const MAX_OUTPUT_BYTES: u64 = 8 << 20;

/// The plan and the (guest file name, host path) pairs to pack.
pub fn plan(
    tests: &[SuiteTest],
    bins: &GuestBins,
    timeout_scale: f64,
) -> Result<(RunPlan, Vec<(String, PathBuf)>), SuiteError> {
    let mut files: Vec<(String, PathBuf)> = Vec::new();
    let mut planned = Vec::new();
    for t in tests {
        let (file, host) = match &t.binary {
            Binary::Builtin(b) => (b.to_string(), bins.path(b)?),
            Binary::Host(p) => (format!("user-{}", t.name), p.clone()),
            Binary::External { file, path } => {
                bins.check_external(path)?;
                (file.clone(), path.clone())
            }
        };
        if !files.iter().any(|(f, _)| *f == file) {
            files.push((file.clone(), host));
        }
        planned.push(PlannedTest {
            name: t.name.clone(),
            path: format!("{BIN_DIR}/{file}"),
            args: t.args.clone(),
            env: vec![(
                guest_tests::cases::TIMEOUT_SCALE_ENV.to_string(),
                timeout_scale.to_string(),
            )],
            timeout_ms: (t.timeout.as_millis() as f64 * timeout_scale) as u64,
            max_output_bytes: MAX_OUTPUT_BYTES,
            // Upstream's programs: their log lines must stay with their test.
            one_pipe: matches!(t.binary, Binary::External { .. }),
        });
    }
    Ok((
        RunPlan {
            version: PLAN_VERSION,
            tests: planned,
            ..RunPlan::default()
        },
        files,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn guest_env_words_are_names_with_values() {
        assert_eq!(
            guest_env("FUTEX_RACE_SERIALIZE=1").unwrap(),
            ("FUTEX_RACE_SERIALIZE".to_string(), "1".to_string())
        );
        assert_eq!(
            guest_env("_X=a=b c").unwrap(),
            ("_X".to_string(), "a=b c".to_string())
        );
        assert_eq!(guest_env("EMPTY=").unwrap().1, "");
        for (word, why) in [
            ("NOVALUE", "expected KEY=VALUE"),
            ("=1", "KEY must be a name"),
            ("1X=1", "KEY must be a name"),
            ("A-B=1", "KEY must be a name"),
            ("PATH=/x", "PATH and HARNESS_* are set by the harness"),
            (
                "HARNESS_TIMEOUT_SCALE=3",
                "PATH and HARNESS_* are set by the harness",
            ),
        ] {
            let e = guest_env(word).unwrap_err().to_string();
            assert!(
                e.starts_with(&format!("--guest-env {word:?}: {why}")),
                "{e}"
            );
        }
    }

    #[test]
    fn fault_suites_resolve() {
        for s in FAULT_SUITES {
            assert!(!builtin(s, None).unwrap().is_empty(), "{s}");
        }
    }

    #[test]
    fn unknown_suite_lists_the_known_ones() {
        let e = builtin("smok", None).unwrap_err().to_string();
        assert!(e.contains("\"smok\"") && e.contains("smoke, futex"), "{e}");
    }

    #[test]
    fn futex_suite_passes_expectations() {
        let s = builtin("futex", Some("numa=1")).unwrap();
        assert_eq!(s.len(), guest_tests::binaries::futex().count());
        assert!(s.iter().all(|t| t.args == ["--expect", "numa=1"]));
        assert!(builtin("futex", None)
            .unwrap()
            .iter()
            .all(|t| t.args.is_empty()));
    }

    #[test]
    fn topology_check_declares_every_node() {
        let t = Topology::parse_spec("nodes=2,cpus=1,mem=256M").unwrap();
        assert_eq!(topology_check(&t).args, ["--nodes", "0:0:256M,1:1:256M"]);
        let d = Topology::parse_spec("nodes=3,cpus=1,mem=256M,distance=31").unwrap();
        assert_eq!(
            topology_check(&d).args,
            [
                "--nodes",
                "0:0:256M,1:1:256M,2:2:256M",
                "--distances",
                "10,31,31/31,10,31/31,31,10"
            ]
        );
    }

    #[test]
    fn user_binaries_need_sane_names_and_static_elf() {
        let e = user_binary("/bin/sh".into(), Duration::from_secs(1)).unwrap_err();
        assert!(e.to_string().contains("dynamically linked"), "{e}");
        let e = user_binary("/tmp/a b".into(), Duration::from_secs(1)).unwrap_err();
        assert!(e.to_string().contains("must be 1-64 characters"), "{e}");
    }
}

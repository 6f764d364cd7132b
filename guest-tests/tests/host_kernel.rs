//! The futex suites on the kernel this machine runs, with no VM: every case
//! passes with the running kernel's expectations, and flipping one
//! expectation makes the cases that assert it fail (proof the assertions
//! bite). Quick tier: about 20 s, always on.
//!
//! The mutation table below is written for a 6.17+ kernel with the private
//! hash, FUTEX2_NUMA/MPOL and without the immutable patch (this machine:
//! 6.18.44, one node); the first assertion says so if the host differs.

use guest_tests::expect::{Expect, Growth};
use std::collections::BTreeSet;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The futex binaries of the one registry (`guest_tests::binaries`),
/// found beside one whose path cargo gives.
fn binary_path(name: &str) -> std::path::PathBuf {
    let dir = std::path::Path::new(env!("CARGO_BIN_EXE_futex-prctl"))
        .parent()
        .expect("a directory");
    dir.join(name)
}

struct Outcome {
    status: Option<i32>,
    ktap: String,
}

impl Outcome {
    /// Top-level case names by result (`ok`, `not ok`, SKIP counts as ok).
    fn cases(&self, want_ok: bool) -> BTreeSet<String> {
        self.ktap
            .lines()
            .filter_map(|l| {
                let (ok, rest) = if let Some(r) = l.strip_prefix("not ok ") {
                    (false, r)
                } else if let Some(r) = l.strip_prefix("ok ") {
                    (true, r)
                } else {
                    return None;
                };
                let name = rest.split_once(' ')?.1;
                let name = name.split(" # ").next()?.trim().to_string();
                (ok == want_ok).then_some(name)
            })
            .collect()
    }
}

fn run(binary: &str, expect: Option<&str>, filters: &[&str]) -> Outcome {
    let mut args: Vec<&str> = expect.map(|e| vec!["--expect", e]).unwrap_or_default();
    for f in filters {
        args.extend(["--filter", f]);
    }
    run_with(binary, &args, None)
}

/// Runs `binary` with `args`, and `env` (a name and value) set for it and
/// its case processes.
fn run_with(binary: &str, args: &[&str], env: Option<(&str, &str)>) -> Outcome {
    assert!(
        guest_tests::binaries::futex().any(|b| b == binary),
        "no futex binary {binary}"
    );
    let path = binary_path(binary);
    let mut cmd = Command::new(&path);
    cmd.args(args);
    if let Some((k, v)) = env {
        cmd.env(k, v);
    }
    let tag = format!("{} {}", args.join(" "), env.map_or("", |e| e.1));
    let out_path = std::env::temp_dir().join(format!(
        "host-kernel-{}-{binary}-{}.ktap",
        std::process::id(),
        tag.replace([',', '=', ' ', '/', '*'], "_")
    ));
    let out = std::fs::File::create(&out_path).unwrap();
    let mut child = cmd
        .stdout(out)
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap_or_else(|e| panic!("spawn {}: {e}", path.display()));
    // Every case has its own bounded waits; this only keeps a bug from
    // hanging the test run.
    let deadline = Instant::now() + Duration::from_secs(300);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s.code();
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{binary} {tag} ran over 300 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let ktap = std::fs::read_to_string(&out_path).unwrap();
    let _ = std::fs::remove_file(&out_path);
    Outcome { status, ktap }
}

/// `Some(why)` when the host's kernel allocates a private hash on vfork
/// and posix_spawn although its release says it does not (a vendor build
/// of 6.18.44, "-fc-v1045", does; an earlier one of the same release did
/// not): the cases these tests pin to the table's model cannot be judged
/// here, and they say so instead of failing on the host.
fn host_grows_on_vfork_unlike_its_release() -> Option<String> {
    let o = run(
        "futex-resize",
        Some("growth=any-vm"),
        &["vfork-growth", "posix-spawn-growth"],
    );
    (Expect::for_running_kernel().growth == Growth::VmNotVfork && o.status == Some(0)).then(|| {
        let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
        format!(
            "skipped: this host's kernel {} allocates on vfork and posix_spawn (growth=any-vm passes), \
             unlike the release table's vm-not-vfork these tests are written for",
            release.trim()
        )
    })
}

fn host_has_what_the_table_assumes() -> Expect {
    let e = Expect::for_running_kernel();
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    assert!(
        e.prctl
            && e.private_hash
            && !e.immutable
            && e.numa
            && e.mpol
            && e.requeue_same_flags
            && e.growth == Growth::VmNotVfork,
        "these tests are written for a 6.18.16+ / 7.0-7.2.7 kernel (private hash, \
         growth on CLONE_VM without CLONE_VFORK, FUTEX2_NUMA/MPOL, the requeue \
         flags fix, no immutable patch); this host runs {} with expectations {}",
        release.trim(),
        e.encode()
    );
    e
}

#[test]
fn every_futex_case_passes_on_the_running_kernel() {
    if let Some(why) = host_grows_on_vfork_unlike_its_release() {
        eprintln!("{why}");
        return;
    }
    let e = host_has_what_the_table_assumes();
    let mut total = 0;
    for binary in guest_tests::binaries::futex() {
        let o = run(binary, None, &[]);
        let failed = o.cases(false);
        let passed = o.cases(true);
        assert!(
            o.ktap.contains(&format!("# expect: {}", e.encode())),
            "{binary} did not take the running kernel's expectations:\n{}",
            o.ktap
        );
        assert!(
            failed.is_empty() && o.status == Some(0),
            "{binary} on the host kernel: exit {:?}, failed {failed:?}\n{}",
            o.status,
            o.ktap
        );
        assert!(passed.len() >= 9, "{binary}: only {passed:?}");
        total += passed.len();
    }
    assert!(total >= 80, "{total} cases");
}

/// One flipped expectation and cases that must then fail.
struct Mutation {
    binary: &'static str,
    expect: &'static str,
    /// `--filter`s (none: every case), to keep slow mutations short.
    filters: &'static [&'static str],
    must_fail: &'static [&'static str],
}

const MUTATIONS: &[Mutation] = &[
    // The kernel has the private hash; told it has not, every SET that
    // succeeds and every GET that reports a size is a failure.
    Mutation {
        binary: "futex-prctl",
        filters: &[],
        expect: "private_hash=0",
        must_fail: &["set-2", "set-0-one-way", "custom-2-stops-growth"],
    },
    // Told the expectations are another version's row: the booted
    // kernel's release does not match it.
    Mutation {
        binary: "futex-prctl",
        filters: &[],
        expect: "version=1.2.3",
        must_fail: &["kernel-version-matches"],
    },
    // Told the prctl is unknown (6.15 and older): GET answering 0 fails.
    Mutation {
        binary: "futex-prctl",
        filters: &[],
        expect: "prctl=0",
        must_fail: &["get-fresh-is-0", "unknown-subops-einval", "set-arg4-einval"],
    },
    // Told the seed's immutable flag exists: EINVAL for arg4 = 1 fails.
    Mutation {
        binary: "futex-immutable",
        filters: &[],
        expect: "immutable=1",
        must_fail: &[
            "set-immutable",
            "immutable-blocks-set",
            "global-is-immutable",
        ],
    },
    // Told FUTEX2_NUMA is absent: an accepted flag and node write-back fail.
    Mutation {
        binary: "futex-numa",
        filters: &[],
        expect: "numa=0",
        must_fail: &[
            "flag-accepted",
            "node-not-possible-einval",
            "writeback-wait-eagain-each-cpu",
            "node-possible-offline-accepted",
            "node-offline-wait-timeout-unchanged",
            "node-offline-wait-wake-one",
            "node-offline-own-table",
        ],
    },
    // Told requeue accepts mismatched flags (before 19f94b390586).
    Mutation {
        binary: "futex-numa",
        filters: &[],
        expect: "requeue_same_flags=0",
        must_fail: &["requeue-mismatched-flags-einval"],
    },
    // Told FUTEX2_MPOL is ignored: the policy routing the key fails.
    Mutation {
        binary: "futex-mpol",
        filters: &[],
        expect: "mpol=0",
        must_fail: &["mpol-only-routes-key"],
    },
    // Told SET is refused (6.16's stub): every race round that gets 0
    // from SET fails, and so does SET 0 before threads.
    Mutation {
        binary: "futex-resize",
        filters: &["-race", "thread-create", "then-threads"],
        expect: "private_hash=0",
        must_fail: &[
            "set0-race",
            "set0-vs-set128-race",
            "set32-vs-set128-race",
            "set-vs-thread-create",
            "set0-vs-thread-create",
            "set0-then-threads",
        ],
    },
    // Told vfork and posix_spawn allocate (7.2.8+): they do not here.
    Mutation {
        binary: "futex-resize",
        filters: &[],
        expect: "growth=any-vm",
        must_fail: &["vfork-growth", "posix-spawn-growth"],
    },
    // Told only CLONE_THREAD allocates (6.17): clone(CLONE_VM) does here.
    Mutation {
        binary: "futex-resize",
        filters: &[],
        expect: "growth=thread",
        must_fail: &["clone-vm-growth"],
    },
    // The same, for a waiter the clone(CLONE_VM) child leaves queued: told
    // it sits in the global hash (a wake after the first table finds
    // nobody), the wake that finds it here fails.
    Mutation {
        binary: "futex-resize",
        filters: &["clone-vm-waiter"],
        expect: "growth=thread",
        must_fail: &["clone-vm-waiter-then-thread", "clone-vm-waiter-then-set"],
    },
    // Told the immutable patch is there: the race rounds' SET with
    // FH_FLAG_IMMUTABLE is EINVAL here, not one of the endings.
    Mutation {
        binary: "futex-immutable",
        filters: &["-vs-"],
        expect: "immutable=1",
        must_fail: &["immutable-vs-set-race", "immutable-vs-thread-create"],
    },
];

#[test]
fn flipped_expectations_fail_the_cases_that_assert_them() {
    if let Some(why) = host_grows_on_vfork_unlike_its_release() {
        eprintln!("{why}");
        return;
    }
    host_has_what_the_table_assumes();
    let mut bad = Vec::new();
    for m in MUTATIONS {
        let o = run(m.binary, Some(m.expect), m.filters);
        let failed = o.cases(false);
        let missing: Vec<_> = m
            .must_fail
            .iter()
            .filter(|c| !failed.contains(**c))
            .collect();
        eprintln!(
            "{} --expect {}: exit {:?}, {} cases failed",
            m.binary,
            m.expect,
            o.status,
            failed.len()
        );
        if !missing.is_empty() || o.status == Some(0) {
            bad.push(format!(
                "{} --expect {}: exit {:?}; these passed but must fail: {missing:?}",
                m.binary, m.expect, o.status
            ));
        }
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

/// The offline-node cases skip on a host without a possible-but-offline
/// node; told that a node the kernel does not have is one
/// (`guest_tests::numa::FAKE_OFFLINE_ENV`), each must fail, since the
/// kernel answers EINVAL where they assert it accepts the node (and so
/// must `node-class-boundaries`, which runs either way).
#[test]
fn a_fake_offline_node_fails_the_cases_that_assert_offline_nodes_work() {
    host_has_what_the_table_assumes();
    let offline_cases = [
        "node-possible-offline-accepted",
        "node-offline-wait-timeout-unchanged",
        "node-offline-wait-wake-one",
        "node-offline-own-table",
    ];
    let mut must_fail = offline_cases.to_vec();
    must_fail.push("node-class-boundaries");
    let plain = run("futex-numa", None, &["offline"]);
    let skipped = plain
        .ktap
        .matches("# SKIP needs a possible but offline node")
        .count();
    assert_eq!(
        (skipped, plain.status),
        (offline_cases.len(), Some(0)),
        "without an offline node the cases skip:\n{}",
        plain.ktap
    );
    let fake = guest_tests::cpulist::read("/sys/devices/system/node/possible")
        .ok()
        .and_then(|p| p.last().map(|n| n + 1))
        .expect("the host's possible nodes");
    let o = run_with(
        "futex-numa",
        &["--filter", "offline", "--filter", "node-class-boundaries"],
        Some((guest_tests::numa::FAKE_OFFLINE_ENV, &fake.to_string())),
    );
    let failed = o.cases(false);
    let missing: Vec<_> = must_fail.iter().filter(|c| !failed.contains(**c)).collect();
    assert!(
        missing.is_empty() && o.status == Some(1),
        "with fake offline node {fake}: exit {:?}; these passed but must fail: {missing:?}\n{}",
        o.status,
        o.ktap
    );
}

/// A wrong-kernel model of the classic-operation binaries
/// (`guest_tests::ops::MUTATIONS`, turned on through
/// `guest_tests::ops::MUTATION_ENV`): the cases that must then fail, and
/// cases of the same binary that must still pass (the failure is the
/// model's, not a broken run).
struct OpsMutation {
    binary: &'static str,
    mutation: &'static str,
    must_fail: &'static [&'static str],
    must_pass: &'static [&'static str],
    /// What the failures must say (substrings of the KTAP document).
    says: &'static [&'static str],
}

const OPS_MUTATIONS: &[OpsMutation] = &[
    OpsMutation {
        binary: "futex-ops",
        mutation: "wait-timeout-absolute",
        must_fail: &["wait-timeout-relative"],
        must_pass: &["wait-bitset-timeout-absolute"],
        says: &[],
    },
    OpsMutation {
        binary: "futex-wake",
        mutation: "wake-ignores-nr",
        must_fail: &["wake-one-fifo", "wake-counts", "wake-nr-0-legacy-wakes-one"],
        must_pass: &["wake-no-waiter-0", "wake-op-ops"],
        says: &[],
    },
    OpsMutation {
        binary: "futex-wake",
        mutation: "wake-lifo",
        must_fail: &["wake-one-fifo", "wake-priority-order", "wake-op-return-sum"],
        must_pass: &["wake-no-waiter-0"],
        says: &[],
    },
    OpsMutation {
        binary: "futex-wake",
        mutation: "wake-nr-0-wakes-none",
        must_fail: &["wake-nr-0-legacy-wakes-one"],
        must_pass: &["wake2-nr-0-wakes-none"],
        says: &[],
    },
    OpsMutation {
        binary: "futex-wake",
        mutation: "bitset-ignored",
        must_fail: &["wake-bitset-selects", "bitset-futex2-and-legacy"],
        must_pass: &["wake-one-fifo"],
        says: &[],
    },
    OpsMutation {
        binary: "futex-wake",
        mutation: "wake-op-cmp-unsigned",
        must_fail: &["wake-op-cmp"],
        must_pass: &["wake-op-ops"],
        says: &[],
    },
    OpsMutation {
        binary: "futex-requeue",
        mutation: "cmp-requeue-no-compare",
        must_fail: &["cmp-requeue-eagain"],
        must_pass: &["cmp-requeue-counts"],
        says: &[],
    },
    OpsMutation {
        binary: "futex-requeue",
        mutation: "requeue-returns-woken",
        must_fail: &[
            "cmp-requeue-counts",
            "futex2-requeue-counts",
            "requeue-same-address",
        ],
        must_pass: &["requeue-negative-einval"],
        says: &[],
    },
    OpsMutation {
        binary: "futex-requeue",
        mutation: "waitv-index-one-based",
        must_fail: &["waitv-returns-woken-index", "waitv-same-word-twice"],
        must_pass: &["waitv-eagain-order"],
        says: &[],
    },
    OpsMutation {
        binary: "futex-pi",
        mutation: "pi-no-waiters-bit",
        must_fail: &[
            "lock-pi-contended-waiters-bit",
            "trylock-pi-contended-eagain",
            "lock-pi-no-owner-esrch",
        ],
        must_pass: &["lock-pi-free-word"],
        says: &[],
    },
    // A deadline read on the other clock: CLOCK_MONOTONIC's (the uptime)
    // read as CLOCK_REALTIME ends at once, CLOCK_REALTIME's (since 1970)
    // read as CLOCK_MONOTONIC never; FUTEX_WAIT's relative timeout has no
    // clock to read.
    OpsMutation {
        binary: "futex-upstream-gaps",
        mutation: "wrong-clock",
        must_fail: &[
            "wait-bitset-timeout-absolute",
            "waitv-timeout",
            "lock-pi-timeout",
            "requeue-pi-timeout",
        ],
        must_pass: &["wait-timeout-relative", "waitv-wouldblock"],
        says: &[
            "# FUTEX_WAIT_BITSET: no ETIMEDOUT within 5s of its deadline (now + 100ms on CLOCK_REALTIME): still blocked",
            "# futex_waitv with clockid CLOCK_REALTIME: ETIMEDOUT ",
            "# FUTEX_LOCK_PI of a held lock: ETIMEDOUT ",
            "# FUTEX_WAIT_REQUEUE_PI|FUTEX_CLOCK_REALTIME with nobody requeueing: ETIMEDOUT ",
            " before its deadline (now + 100ms on CLOCK_MONOTONIC)",
        ],
    },
    // futex-ops' table reads its absolute deadlines through futex_clock();
    // its first on the other clock is LOCK_PI's shared one (CLOCK_REALTIME
    // read as CLOCK_MONOTONIC's uptime: at once).
    OpsMutation {
        binary: "futex-ops",
        mutation: "wrong-clock",
        must_fail: &["clock-realtime-every-op"],
        must_pass: &["clock-realtime-enosys", "wait-timeout-relative"],
        says: &["# FUTEX_LOCK_PI (shared), arg4 a timeout: ETIMEDOUT "],
    },
    // The requeue of futex-upstream-gaps counts exactly too.
    OpsMutation {
        binary: "futex-upstream-gaps",
        mutation: "requeue-returns-woken",
        must_fail: &["requeue-single", "requeue-multiple"],
        must_pass: &["wait-wouldblock"],
        says: &["# FUTEX_CMP_REQUEUE A -> B with 10 waiting (nr_wake 0, nr_requeue INT_MAX): expected Ok(0), got Ok(10)"],
    },
];

#[test]
fn wrong_kernel_models_fail_the_classic_operation_cases() {
    let modelled: BTreeSet<&str> = OPS_MUTATIONS.iter().map(|m| m.mutation).collect();
    let defined: BTreeSet<&str> = guest_tests::ops::MUTATIONS.iter().copied().collect();
    assert_eq!(
        modelled, defined,
        "every wrong-kernel model needs a row here"
    );
    let mut bad = Vec::new();
    for m in OPS_MUTATIONS {
        let mut args = Vec::new();
        for c in m.must_fail.iter().chain(m.must_pass) {
            args.extend(["--filter", c]);
        }
        let o = run_with(
            m.binary,
            &args,
            Some((guest_tests::ops::MUTATION_ENV, m.mutation)),
        );
        let (failed, passed) = (o.cases(false), o.cases(true));
        let wrong: Vec<_> = m
            .must_fail
            .iter()
            .filter(|c| !failed.contains(**c))
            .chain(m.must_pass.iter().filter(|c| !passed.contains(**c)))
            .chain(m.says.iter().filter(|s| !o.ktap.contains(**s)))
            .collect();
        eprintln!(
            "{} with {}: exit {:?}, failed {failed:?}",
            m.binary, m.mutation, o.status
        );
        if !wrong.is_empty() || o.status == Some(0) {
            bad.push(format!(
                "{} with {}: exit {:?}; these did not fail / pass as they must: {wrong:?}\n{}",
                m.binary, m.mutation, o.status, o.ktap
            ));
        }
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

#[test]
fn contradictory_expectations_are_refused_before_any_case_runs() {
    let o = Command::new(binary_path("futex-prctl"))
        .args(["--expect", "private_hash=0,immutable=1"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(
        o.stdout.is_empty(),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("immutable expected without private_hash"),
        "{err}"
    );
}

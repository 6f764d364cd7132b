//! Cells that boot once together: planned cells whose VM would be the
//! same (kernel image, topology, command line, accelerator, shares,
//! timeouts) run their tests in one boot, and the boot's result is cut
//! back into one result per cell.
//!
//! Why: a boot is most of a small cell's cost under TCG (the default
//! matrix's 36 `smoke` cells each booted the kernel their `futex` cell
//! booted again: 14% of the tier's QEMU CPU). Every cell keeps its own
//! verdict, report directory and JUnit file; the boot's console log and
//! results stream stay in the *host* cell's directory (the one member
//! that may not ride, else the longest) and the others link to them.
//!
//! A group's tests run riders first (in the planned order), then the
//! host's; the topology check runs once and counts for every member.
//! Kernel reports printed outside any test (boot) or during the topology
//! check are every member's, as they would be had each booted alone.

use crate::planner::{PlannedCell, ReadyCell};
use crate::result::CellResult;
use crate::result::VmEnd;
use crate::schedule::Placement;
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The test every cell opens with ([`crate::suite::topology_check`]).
const TOPOLOGY: &str = "topology";

/// Cells (indices into the planned list) that boot once: `host` keeps the
/// boot's logs; `riders` run first in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BootGroup {
    /// The member whose directory holds the console log.
    pub host: usize,
    /// The others, in the order their tests run.
    pub riders: Vec<usize>,
}

impl BootGroup {
    /// One cell alone.
    pub fn alone(index: usize) -> BootGroup {
        BootGroup {
            host: index,
            riders: Vec::new(),
        }
    }

    /// Every member: riders, then the host.
    pub fn members(&self) -> impl Iterator<Item = usize> + '_ {
        self.riders.iter().copied().chain([self.host])
    }
}

/// Whether two cells' VMs would be the same, so that one boot serves both.
/// Cells with a person or a debugger in the loop, a repeat, a fixed
/// watchdog or a `exclusive` placement never share.
fn same_boot(a: &ReadyCell, b: &ReadyCell) -> bool {
    let (x, y) = (&a.spec, &b.spec);
    let plain = |r: &ReadyCell| {
        r.spec.repeat.is_none()
            && r.spec.watchdog.is_none()
            && r.spec.debug == crate::debug::DebugOptions::default()
            && r.spec.tests.first().is_some_and(|t| t.name == TOPOLOGY)
    };
    plain(a)
        && plain(b)
        && x.kernel_image == y.kernel_image
        && x.topology == y.topology
        && x.accel == y.accel
        && x.tcg_thread == y.tcg_thread
        && x.cmdline_extra == y.cmdline_extra
        && x.timeout_scale == y.timeout_scale
        && x.guest_env == y.guest_env
        && x.boot_retries == y.boot_retries
        && x.tests.first() == y.tests.first()
        && a.shares.shares == b.shares.shares
        && a.shares.artifacts == b.shares.artifacts
        && a.shares.virtiofsd == b.shares.virtiofsd
        && a.shares.modules == b.shares.modules
        && a.test_glob == b.test_glob
}

/// Whether a cell may ride in another's boot: its tests are our own
/// binaries that do not harm the VM (not `fault`, nor a user's or a
/// kselftest binary), so the host's tests, which run after them, cannot
/// lose their VM to them.
fn may_ride(r: &ReadyCell) -> bool {
    r.spec
        .tests
        .iter()
        .skip(1)
        .all(|t| matches!(t.binary, crate::suite::Binary::Builtin(n) if n != "fault"))
}

/// Groups `cells` (in `order`) by [`same_boot`]: each group's host is the
/// member that may not ride ([`may_ride`]; at most one a group), else the
/// member expected to take longest, and the group takes the place of its
/// first member in `order`. A cell whose tests' names clash with the
/// group's stays alone (a plan's names are unique).
pub fn groups(cells: &[PlannedCell], order: &[usize], placement: &[Placement]) -> Vec<BootGroup> {
    let ready = |i: usize| match cells.get(i) {
        Some(PlannedCell::Ready(r)) if !placement.get(i).is_some_and(|p| p.exclusive) => {
            Some(r.as_ref())
        }
        _ => None,
    };
    let seconds = |i: usize| placement.get(i).and_then(|p| p.seconds).unwrap_or(0.0);
    let mut members: Vec<Vec<usize>> = Vec::new();
    for &i in order {
        let Some(r) = ready(i) else {
            members.push(vec![i]);
            continue;
        };
        let names = || r.spec.tests.iter().skip(1).map(|t| t.name.as_str());
        let rides = |m: usize| ready(m).is_some_and(may_ride);
        let joins = members.iter_mut().find(|g| {
            ready(g[0]).is_some_and(|first| same_boot(first, r))
                && (may_ride(r) || g.iter().all(|&m| rides(m)))
                && g.iter().all(|&m| {
                    ready(m).is_some_and(|o| {
                        let theirs: HashSet<&str> = o
                            .spec
                            .tests
                            .iter()
                            .skip(1)
                            .map(|t| t.name.as_str())
                            .collect();
                        names().all(|n| !theirs.contains(n))
                    })
                })
        });
        match joins {
            Some(g) => g.push(i),
            None => members.push(vec![i]),
        }
    }
    members
        .into_iter()
        .map(|g| {
            // The longest member hosts (ties: the earliest in the order);
            // riders keep the order's relative order reversed, so the
            // quickest (a smoke check) runs first.
            let host = g
                .iter()
                .copied()
                .find(|&i| !ready(i).is_some_and(may_ride))
                .or_else(|| {
                    g.iter()
                        .copied()
                        .enumerate()
                        .max_by(|(ka, a), (kb, b)| {
                            seconds(*a).total_cmp(&seconds(*b)).then(kb.cmp(ka))
                        })
                        .map(|(_, i)| i)
                })
                .unwrap_or(g[0]);
            let mut riders: Vec<usize> = g.into_iter().filter(|&i| i != host).collect();
            riders.reverse();
            BootGroup { host, riders }
        })
        .collect()
}

/// What the runner needs of a group: a group's placement is its members'
/// summed seconds and their time-weighted demand.
pub fn placement(group: &BootGroup, placement: &[Placement]) -> Placement {
    let of = |i: usize| placement.get(i).copied().unwrap_or_default();
    let host = of(group.host);
    if group.riders.is_empty() {
        return host;
    }
    let all: Vec<Placement> = group.members().map(of).collect();
    let seconds: Option<f64> = all.iter().map(|p| p.seconds).sum();
    let demand = match (seconds, all.iter().all(|p| p.demand.is_some())) {
        (Some(s), true) if s > 0.0 => Some(
            all.iter()
                .map(|p| p.demand.unwrap_or(0.0) * p.seconds.unwrap_or(0.0))
                .sum::<f64>()
                / s,
        ),
        _ => host.demand,
    };
    Placement {
        demand,
        exclusive: all.iter().any(|p| p.exclusive),
        seconds,
    }
}

/// The host's cell with every member's tests: the topology check once,
/// then each rider's tests, then the host's own.
pub fn merged(host: &ReadyCell, riders: &[&ReadyCell]) -> ReadyCell {
    let mut cell = host.clone();
    let mut tests = host.spec.tests[..1.min(host.spec.tests.len())].to_vec();
    for r in riders {
        tests.extend(r.spec.tests.iter().skip(1).cloned());
    }
    tests.extend(host.spec.tests.iter().skip(1).cloned());
    cell.spec.tests = tests;
    cell
}

/// Cuts the result of a group's one boot into one result per member (in
/// `members` order, each the member's planned tests).
///
/// - A member gets its own tests' results, the topology check's, and the
///   kernel reports printed in them, at boot or in the topology check.
/// - A rider whose tests all ended before the VM did sees the VM finish;
///   otherwise every member sees how it ended (the host's tests then
///   "did not run").
/// - Time: a rider's duration and profile are its binaries' times; the
///   host keeps the boot and the rest. QEMU's CPU time is shared in
///   proportion to duration.
pub fn split(result: &CellResult, host: &ReadyCell, riders: &[&ReadyCell]) -> Vec<CellResult> {
    let total = result.duration;
    let mut out = Vec::new();
    let mut rider_time = Duration::ZERO;
    for r in riders {
        let mut sub = part(result, r, false);
        let time: Duration = sub.profile.tests.iter().map(|t| t.duration).sum();
        let time = time.min(total.saturating_sub(rider_time));
        rider_time += time;
        sub.duration = time;
        sub.profile.phases = vec![(crate::profile::Phase::Tests, time)];
        sub.qemu_cpu = share(result.qemu_cpu, time, total);
        out.push(sub);
    }
    let mut own = part(result, host, true);
    own.duration = total.saturating_sub(rider_time);
    for (phase, d) in &mut own.profile.phases {
        if *phase == crate::profile::Phase::Tests {
            *d = d.saturating_sub(rider_time);
        }
    }
    own.qemu_cpu = share(result.qemu_cpu, own.duration, total);
    out.push(own);
    out
}

/// `cpu` in the proportion `part` / `total`.
fn share(cpu: Option<Duration>, part: Duration, total: Duration) -> Option<Duration> {
    let cpu = cpu?;
    if total.is_zero() {
        return Some(Duration::ZERO);
    }
    Some(cpu.mul_f64(part.as_secs_f64() / total.as_secs_f64()))
}

/// The part of `result` that is `cell`'s (see [`split`]); `host` also gets
/// what belongs to no planned test.
fn part(result: &CellResult, cell: &ReadyCell, host: bool) -> CellResult {
    let planned: Vec<String> = cell.spec.tests.iter().map(|t| t.name.clone()).collect();
    let own: HashSet<&str> = planned.iter().skip(1).map(String::as_str).collect();
    let all_planned: HashSet<&str> = result.planned.iter().map(String::as_str).collect();
    let mine = |name: &str| {
        name == TOPOLOGY || own.contains(name) || (host && !all_planned.contains(name))
    };
    let mut sub = result.clone();
    sub.name = cell.spec.name.clone();
    sub.suite = cell.spec.suite_label.clone();
    sub.planned = planned.clone();
    sub.ktap.tests.retain(|t| mine(&t.name));
    sub.ktap.plan = Some(sub.ktap.tests.len() as u64);
    if !host {
        sub.ktap.problems.clear();
    }
    sub.console.reports.retain(|r| match r.test.as_deref() {
        None => true,
        Some(t) => mine(t),
    });
    // The topology check's time is the host's (it ran once).
    sub.profile.tests.retain(|t| {
        if host {
            mine(&t.name)
        } else {
            own.contains(t.name.as_str())
        }
    });
    let ended_in_mine = result
        .console
        .running_at_end
        .as_deref()
        .is_some_and(|t| own.contains(t));
    let seen: HashSet<&str> = sub.ktap.tests.iter().map(|t| t.name.as_str()).collect();
    let complete = planned.iter().all(|p| seen.contains(p.as_str()));
    if !host && complete && !ended_in_mine {
        sub.end = VmEnd::Finished;
        sub.console.running_at_end = None;
        sub.console.tail.clear();
    } else if !ended_in_mine {
        sub.console.running_at_end = result.console.running_at_end.clone().filter(|t| mine(t));
    }
    sub
}

/// Links a rider's directory to the host's boot logs (`console.log`,
/// `results.ktap`, `qemu-argv.txt`), relative where the two directories
/// are siblings, and says in `booted-with.txt` which cell booted.
pub fn link_logs(rider_dir: &Path, host_dir: &Path, host_name: &str) -> Result<(), String> {
    let fail = |what: &Path, e: &dyn std::fmt::Display| format!("{}: {e}", what.display());
    std::fs::create_dir_all(rider_dir).map_err(|e| fail(rider_dir, &e))?;
    let base: PathBuf = match (rider_dir.parent(), host_dir.parent(), host_dir.file_name()) {
        (Some(a), Some(b), Some(name)) if a == b => Path::new("..").join(name),
        _ => host_dir.to_path_buf(),
    };
    for file in ["console.log", "results.ktap", "qemu-argv.txt"] {
        let link = rider_dir.join(file);
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink(base.join(file), &link).map_err(|e| fail(&link, &e))?;
    }
    let note = rider_dir.join("booted-with.txt");
    let text = format!(
        "This cell's tests ran in the boot of {host_name}: its console log, results \
         stream and QEMU command line are in {}.\n",
        host_dir.display()
    );
    std::fs::write(&note, text).map_err(|e| fail(&note, &e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::planner::{cell, CellRequest};
    use crate::qemu::Accel;
    use crate::suite::SuiteTest;
    use crate::topology::Topology;

    fn ready(index: usize, topo: &str, suite: &str, tests: &[&'static str]) -> PlannedCell {
        let t = Topology::parse_spec(topo).unwrap();
        let tests = tests
            .iter()
            .map(|n| SuiteTest {
                name: n.to_string(),
                binary: crate::suite::Binary::Builtin(n),
                args: vec![],
                timeout: Duration::from_secs(60),
            })
            .collect();
        let r = CellRequest::new(
            "debian:7.3.4",
            "/k".into(),
            topo,
            t,
            suite,
            tests,
            Accel::Tcg,
            format!("/o/cells/{topo}/{suite}").into(),
        );
        PlannedCell::Ready(Box::new(cell(index, r)))
    }

    fn at(seconds: f64, demand: f64) -> Placement {
        Placement {
            demand: Some(demand),
            exclusive: false,
            seconds: Some(seconds),
        }
    }

    const TWO: &str = "nodes=2,cpus=1,mem=256M";
    const ONE: &str = "nodes=1,cpus=2,mem=512M";

    #[test]
    fn cells_with_the_same_vm_share_a_boot_hosted_by_the_longest() {
        let cells = vec![
            ready(0, TWO, "smoke", &["smoke"]),
            ready(1, TWO, "futex", &["futex-prctl", "futex-wake"]),
            ready(2, ONE, "smoke", &["smoke"]),
            ready(3, ONE, "futex", &["futex-prctl"]),
            ready(4, TWO, "again", &["smoke"]),
        ];
        let placement = vec![
            at(4.0, 0.9),
            at(40.0, 0.5),
            at(3.0, 1.0),
            at(30.0, 0.5),
            at(1.0, 1.0),
        ];
        let order = [1, 3, 0, 2, 4];
        let g = groups(&cells, &order, &placement);
        assert_eq!(
            g,
            [
                BootGroup {
                    host: 1,
                    riders: vec![0]
                },
                BootGroup {
                    host: 3,
                    riders: vec![2]
                },
                // `smoke` again would clash with cell 0's test of that name.
                BootGroup::alone(4),
            ]
        );
        let p = super::placement(&g[0], &placement);
        assert_eq!(p.seconds, Some(44.0));
        let demand = p.demand.unwrap();
        assert!(
            (demand - (4.0 * 0.9 + 40.0 * 0.5) / 44.0).abs() < 1e-9,
            "{demand}"
        );
        let PlannedCell::Ready(host) = &cells[1] else {
            unreachable!()
        };
        let PlannedCell::Ready(rider) = &cells[0] else {
            unreachable!()
        };
        let names: Vec<_> = merged(host, &[rider])
            .spec
            .tests
            .iter()
            .map(|t| t.name.clone())
            .collect();
        assert_eq!(names, ["topology", "smoke", "futex-prctl", "futex-wake"]);
    }

    #[test]
    fn a_cell_that_may_harm_the_vm_only_hosts() {
        let cells = vec![
            ready(0, TWO, "smoke", &["smoke"]),
            ready(1, TWO, "panic", &["fault"]),
            ready(2, TWO, "hang", &["fault-2"]),
        ];
        let mut cells = cells;
        if let PlannedCell::Ready(r) = &mut cells[2] {
            r.spec.tests[1].binary = crate::suite::Binary::Builtin("fault");
        }
        // The smoke cell is the longest but rides; the second fault cell
        // has no group to join.
        let placement = vec![at(50.0, 0.9), at(5.0, 0.5), at(5.0, 0.5)];
        let g = groups(&cells, &[0, 1, 2], &placement);
        assert_eq!(
            g,
            [
                BootGroup {
                    host: 1,
                    riders: vec![0]
                },
                BootGroup::alone(2)
            ]
        );
    }

    #[test]
    fn exclusive_debugged_or_repeated_cells_boot_alone() {
        let mut cells = vec![
            ready(0, TWO, "smoke", &["smoke"]),
            ready(1, TWO, "futex", &["futex-prctl"]),
            ready(2, TWO, "kselftest", &["futex_wait"]),
            ready(3, TWO, "fault", &["fault"]),
        ];
        let mut placement = vec![at(4.0, 0.9), at(40.0, 0.5), at(30.0, 0.7), at(5.0, 1.0)];
        placement[2].exclusive = true;
        if let PlannedCell::Ready(r) = &mut cells[1] {
            r.spec.debug.live = true;
        }
        if let PlannedCell::Ready(r) = &mut cells[3] {
            r.spec.cmdline_extra = vec!["quiet".into()];
        }
        let g = groups(&cells, &[0, 1, 2, 3], &placement);
        assert_eq!(g.len(), 4, "{g:?}");
        assert!(g.iter().all(|g| g.riders.is_empty()));
    }

    const KTAP: &str = "\
KTAP version 1
1..4
  KTAP version 1
  # Subtest: topology
  1..1
  ok 1 nodes
ok 1 topology
  KTAP version 1
  # Subtest: smoke
  1..1
  ok 1 uname
ok 2 smoke
  KTAP version 1
  # Subtest: futex-prctl
  1..1
  ok 1 get
ok 3 futex-prctl
";

    const WARN_IN_SMOKE: &str = "\
[    0.5] WARNING: CPU: 0 PID: 1 at init/main.c:1 boot+0x1/0x2
[    0.6] ---[ end trace 0000000000000000 ]---
[    1.0] harness: begin 2 smoke
[    1.1] ------------[ cut here ]------------
[    1.2] WARNING: CPU: 1 PID: 2 at kernel/futex/core.c:10 f+0x1/0x2
[    1.3] ---[ end trace 0000000000000000 ]---
[    1.4] harness: end 2 smoke
[    1.5] harness: begin 3 futex-prctl
[    1.6] harness: end 3 futex-prctl
[    1.7] harness: begin 4 futex-wake
";

    fn boot(end: VmEnd, ktap: &str, console: &str) -> CellResult {
        CellResult {
            name: "debian-7.3.4/two/futex".into(),
            kernel: "debian:7.3.4".into(),
            topology: "two".into(),
            suite: "futex".into(),
            accel: "tcg".into(),
            qemu_version: "QEMU emulator version 10.0.0".into(),
            planned: ["topology", "smoke", "futex-prctl", "futex-wake"]
                .map(String::from)
                .to_vec(),
            end,
            ktap: crate::ktap::parse(ktap.as_bytes()),
            console: crate::console::scan(console.as_bytes()),
            console_log: None,
            duration: Duration::from_secs(40),
            started: std::time::SystemTime::UNIX_EPOCH,
            qemu_cpu: Some(Duration::from_secs(20)),
            known_failures: vec![],
            boot_retries: Vec::new(),
            qemu_command: String::new(),
            notes: vec![],
            profile: crate::profile::CellProfile {
                phases: vec![
                    (crate::profile::Phase::Boot, Duration::from_secs(4)),
                    (crate::profile::Phase::Tests, Duration::from_secs(34)),
                ],
                tests: ["topology", "smoke", "futex-prctl", "futex-wake"]
                    .iter()
                    .enumerate()
                    .map(|(k, n)| crate::profile::TestTime {
                        number: Some(k + 1),
                        name: n.to_string(),
                        duration: Duration::from_secs([1, 2, 10, 21][k]),
                    })
                    .collect(),
            },
        }
    }

    fn pair() -> (ReadyCell, ReadyCell) {
        let unbox = |c: PlannedCell| match c {
            PlannedCell::Ready(r) => *r,
            PlannedCell::Failed { .. } => unreachable!(),
        };
        (
            unbox(ready(1, TWO, "futex", &["futex-prctl", "futex-wake"])),
            unbox(ready(0, TWO, "smoke", &["smoke"])),
        )
    }

    #[test]
    fn a_rider_that_ended_sees_the_vm_finish_and_only_its_own_reports() {
        let (host, rider) = pair();
        let r = boot(VmEnd::KernelPanic, KTAP, WARN_IN_SMOKE);
        assert_eq!(r.console.running_at_end.as_deref(), Some("futex-wake"));
        let parts = split(&r, &host, &[&rider]);
        let (s, f) = (&parts[0], &parts[1]);
        assert_eq!(s.planned, ["topology", "smoke"]);
        assert_eq!(s.end, VmEnd::Finished);
        assert_eq!(s.console.running_at_end, None);
        let names = |c: &CellResult| -> Vec<String> {
            c.ktap.tests.iter().map(|t| t.name.clone()).collect()
        };
        assert_eq!(names(s), ["topology", "smoke"]);
        assert_eq!(names(f), ["topology", "futex-prctl"]);
        // The boot's warning is both cells', smoke's only the rider's.
        let tests = |c: &CellResult| -> Vec<Option<String>> {
            c.console.reports.iter().map(|r| r.test.clone()).collect()
        };
        assert_eq!(tests(s), [None, Some("smoke".to_string())]);
        assert_eq!(tests(f), [None]);
        assert_eq!(f.end, VmEnd::KernelPanic);
        assert_eq!(f.console.running_at_end.as_deref(), Some("futex-wake"));
        // Time: the rider's binary; the host the rest, CPU in proportion.
        assert_eq!(s.duration, Duration::from_secs(2));
        assert_eq!(f.duration, Duration::from_secs(38));
        assert_eq!(s.qemu_cpu, Some(Duration::from_secs(1)));
        assert_eq!(f.qemu_cpu, Some(Duration::from_secs(19)));
        assert_eq!(
            f.profile.phase(crate::profile::Phase::Tests),
            Duration::from_secs(32)
        );
        let f_tests: Vec<_> = f.profile.tests.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(f_tests, ["topology", "futex-prctl", "futex-wake"]);
        // Judged apart: the smoke cell fails on its own warning, the futex
        // cell on the panic in futex-wake.
        let judge = |c: &ReadyCell, r: &CellResult| {
            crate::verdict::cases(r)
                .into_iter()
                .filter(|c| matches!(c.status, crate::verdict::CaseStatus::Fail { .. }))
                .map(|c| c.name)
                .collect::<Vec<_>>()
                .join(" ")
                + &format!(" ({})", c.meta.suite)
        };
        assert_eq!(
            judge(&rider, s),
            "smoke/kernel-warning boot/kernel-warning (smoke)"
        );
        assert_eq!(judge(&host, f), "futex-wake boot/kernel-warning (futex)");
    }

    #[test]
    fn a_vm_that_died_in_a_rider_fails_both() {
        let (host, rider) = pair();
        let ktap = KTAP
            .split("  KTAP version 1\n  # Subtest: smoke")
            .next()
            .unwrap();
        let console = "[    1.0] harness: begin 2 smoke\n";
        let r = boot(VmEnd::Watchdog(Duration::from_secs(99)), ktap, console);
        let parts = split(&r, &host, &[&rider]);
        assert_eq!(parts[0].end, VmEnd::Watchdog(Duration::from_secs(99)));
        assert_eq!(parts[0].console.running_at_end.as_deref(), Some("smoke"));
        assert_eq!(parts[1].end, VmEnd::Watchdog(Duration::from_secs(99)));
        assert_eq!(parts[1].console.running_at_end, None);
        let failed = |r: &CellResult| -> Vec<String> {
            crate::verdict::cases(r)
                .into_iter()
                .filter(|c| matches!(c.status, crate::verdict::CaseStatus::Fail { .. }))
                .map(|c| c.name)
                .collect()
        };
        assert_eq!(failed(&parts[0]), ["smoke"]);
        assert_eq!(failed(&parts[1]), ["futex-prctl", "futex-wake"]);
    }

    #[test]
    fn a_rider_links_to_the_boot_logs_of_its_sibling_host() {
        let root = tempfile::tempdir().unwrap();
        let (host, rider) = (root.path().join("futex"), root.path().join("smoke"));
        std::fs::create_dir_all(&host).unwrap();
        std::fs::write(host.join("console.log"), "boot\n").unwrap();
        link_logs(&rider, &host, "k/t/futex").unwrap();
        assert_eq!(
            std::fs::read_link(rider.join("console.log")).unwrap(),
            Path::new("../futex/console.log")
        );
        assert_eq!(
            std::fs::read_to_string(rider.join("console.log")).unwrap(),
            "boot\n"
        );
        let note = std::fs::read_to_string(rider.join("booted-with.txt")).unwrap();
        assert!(note.contains("k/t/futex"), "{note}");
        // Twice (a rerun into the same directory) is fine.
        link_logs(&rider, &host, "k/t/futex").unwrap();
    }
}

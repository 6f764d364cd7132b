//! Where a run's time goes: a cell's phases (initramfs, QEMU start, boot,
//! guest-init, the test binaries, shutdown) from host instants the cell
//! recorded, the run's totals with each phase's share, and the table of
//! the costliest items (`--profile`). Pure: fed by [`CellClock`], the
//! console and results bytes and when they arrived ([`Arrivals`]).
//!
//! Times are host instants, never the guest's printk timestamps: under
//! TCG the guest clock drifts from the host's (a busy host slows the
//! vCPUs, not the wall clock), and phases must add up to the host's wall
//! time to be compared with it.

use guest_tests::plan::KMSG_MARKER;
use std::fmt::Write as _;
use std::time::Duration;

/// A part of a run's time, in the order a cell goes through them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Phase {
    /// Before any cell: guest binaries, kernel resolution (fetch, verify,
    /// build: once per kernel, shared by its cells), kselftest builds.
    Prepare,
    /// Building the run plan and writing the cell's initramfs.
    Initramfs,
    /// Boots that were retried (died before guest-init spoke, or KVM
    /// failed and TCG took over): their whole VM time.
    Retries,
    /// QEMU spawned to the first console byte (firmware, image loading).
    QemuStart,
    /// The first console byte to guest-init's first line: the kernel's boot.
    Boot,
    /// guest-init's own steps: mounts, plan, modules, shares, and the gaps
    /// between test binaries.
    GuestInit,
    /// The test binaries, begin marker to end marker.
    Tests,
    /// The last result line to QEMU's exit.
    Shutdown,
    /// The rest of the cell's wall time on the host: directories,
    /// virtiofsd, logs, parsing.
    Harness,
}

impl Phase {
    /// Every phase, in order.
    pub const ALL: [Phase; 9] = [
        Phase::Prepare,
        Phase::Initramfs,
        Phase::Retries,
        Phase::QemuStart,
        Phase::Boot,
        Phase::GuestInit,
        Phase::Tests,
        Phase::Shutdown,
        Phase::Harness,
    ];

    /// The word reports use (JSON, JUnit property names, the terminal).
    pub fn word(self) -> &'static str {
        match self {
            Phase::Prepare => "prepare",
            Phase::Initramfs => "initramfs",
            Phase::Retries => "retries",
            Phase::QemuStart => "qemu-start",
            Phase::Boot => "boot",
            Phase::GuestInit => "guest-init",
            Phase::Tests => "tests",
            Phase::Shutdown => "shutdown",
            Phase::Harness => "harness",
        }
    }
}

/// Test binaries kept per cell at most (the markers are guest output).
const MAX_TESTS: usize = 4096;

/// Marks kept per stream at most (the guest decides how often we read).
const MAX_MARKS: usize = 1 << 16;

/// Reads closer together than this share a mark (bounds the marks; the
/// error it adds is below what the serial port's reads resolve anyway).
const MARK_GRAIN: Duration = Duration::from_millis(1);

/// When the bytes of one serial stream reached the host: for each read,
/// the stream offset of its first byte and the time since QEMU was spawned.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Arrivals {
    marks: Vec<(u64, Duration)>,
    read: u64,
}

impl Arrivals {
    /// `len` bytes arrived `at` (since QEMU was spawned).
    pub fn record(&mut self, len: usize, at: Duration) {
        let near = self
            .marks
            .last()
            .is_some_and(|&(_, last)| at.saturating_sub(last) < MARK_GRAIN);
        if !near && self.marks.len() < MAX_MARKS {
            self.marks.push((self.read, at));
        }
        self.read += len as u64;
    }

    /// When the byte at `offset` arrived.
    pub fn at(&self, offset: u64) -> Option<Duration> {
        if offset >= self.read {
            return None;
        }
        let i = self.marks.partition_point(|&(o, _)| o <= offset);
        i.checked_sub(1).map(|i| self.marks[i].1)
    }

    /// When the first byte arrived.
    pub fn first(&self) -> Option<Duration> {
        self.marks.first().map(|m| m.1)
    }

    /// When the last read arrived.
    pub fn last(&self) -> Option<Duration> {
        self.marks.last().map(|m| m.1)
    }
}

/// Host times one cell recorded around its VM.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CellClock {
    /// Writing the initramfs (plan, layout, file).
    pub initramfs: Duration,
    /// The VM time of the boot attempts that were retried.
    pub retried: Duration,
    /// The last boot's QEMU spawn to its exit.
    pub vm: Duration,
    /// The cell's wall time.
    pub wall: Duration,
}

/// One test binary's run, from its kmsg markers' arrival on the host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TestTime {
    /// Its number in the results stream.
    pub number: Option<usize>,
    /// The binary.
    pub name: String,
    /// Begin marker to end marker (to the last result when it never ended).
    pub duration: Duration,
}

/// Where one cell's time went.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CellProfile {
    /// The cell's phases in [`Phase::ALL`] order, without [`Phase::Prepare`]
    /// (a run's, see [`Totals`]).
    pub phases: Vec<(Phase, Duration)>,
    /// Each test binary, in the order they ran (a looping guest's binaries
    /// once per iteration).
    pub tests: Vec<TestTime>,
}

impl CellProfile {
    /// The time of `phase` (zero when the cell did not record it).
    pub fn phase(&self, phase: Phase) -> Duration {
        self.phases
            .iter()
            .filter(|(p, _)| *p == phase)
            .map(|(_, d)| *d)
            .sum()
    }
}

/// A console line without its printk timestamp (`[   12.345678] `).
fn without_timestamp(line: &str) -> &str {
    let t = line.trim_start();
    match t.strip_prefix('[').and_then(|r| r.split_once(']')) {
        Some((stamp, rest)) if stamp.trim().parse::<f64>().is_ok() => rest.trim_start(),
        _ => t,
    }
}

/// The profile of a cell's last boot: `console` is what the VM printed
/// on its console, `console_at` and `results_at` when the console and the
/// results stream arrived.
pub fn cell(
    clock: &CellClock,
    console: &[u8],
    console_at: &Arrivals,
    results_at: &Arrivals,
) -> CellProfile {
    let exit = clock.vm;
    let mut guest_init: Option<Duration> = results_at.first();
    let mut open: Vec<(Option<usize>, String, Duration)> = Vec::new();
    let mut tests = Vec::new();
    let mut last_end: Option<Duration> = None;
    let mut offset = 0u64;
    for raw in console.split(|&b| b == b'\n') {
        let at = console_at.at(offset);
        offset += raw.len() as u64 + 1;
        let (Some(at), Ok(line)) = (at, std::str::from_utf8(raw)) else {
            continue;
        };
        // Past a capture's cut (vm.rs) offsets no longer match arrivals.
        if line.starts_with("[harness: ") && line.contains(" bytes dropped here: ") {
            break;
        }
        let Some(marker) = without_timestamp(line.trim_end()).strip_prefix(KMSG_MARKER) else {
            continue;
        };
        // guest-init's first line (stderr before /dev/kmsg, then kmsg).
        guest_init = Some(guest_init.map_or(at, |g| g.min(at)));
        let mut words = marker.split_whitespace();
        let verb = words.next();
        let number = words.next().and_then(|n| n.parse::<usize>().ok());
        let name = words.collect::<Vec<_>>().join(" ");
        match verb {
            Some("begin") if open.len() + tests.len() < MAX_TESTS => open.push((number, name, at)),
            Some("end") => {
                if let Some(i) = open.iter().rposition(|o| o.0 == number && o.1 == name) {
                    let (number, name, begun) = open.remove(i);
                    tests.push(TestTime {
                        number,
                        name,
                        duration: at.saturating_sub(begun),
                    });
                    last_end = Some(at);
                }
            }
            _ => {}
        }
    }
    // The timeline of the boot; a point never reached is the next one, so
    // the phase before it takes the time (a guest dead in boot: all boot).
    let shutdown = match (last_end, results_at.last()) {
        (Some(a), Some(b)) => Some(a.max(b)),
        (a, b) => a.or(b),
    }
    .unwrap_or(exit)
    .min(exit);
    let guest_init = guest_init.unwrap_or(shutdown).min(shutdown);
    let first_byte = console_at.first().unwrap_or(guest_init).min(guest_init);
    // A test begun and never ended ran until the last result.
    for (number, name, begun) in open {
        tests.push(TestTime {
            number,
            name,
            duration: shutdown.saturating_sub(begun),
        });
    }
    let in_tests: Duration = tests.iter().map(|t| t.duration).sum();
    let window = shutdown - guest_init;
    let in_tests = in_tests.min(window);
    let mut phases = vec![
        (Phase::Initramfs, clock.initramfs),
        (Phase::Retries, clock.retried),
        (Phase::QemuStart, first_byte),
        (Phase::Boot, guest_init - first_byte),
        (Phase::GuestInit, window - in_tests),
        (Phase::Tests, in_tests),
        (Phase::Shutdown, exit - shutdown),
    ];
    let counted: Duration = phases.iter().map(|p| p.1).sum();
    phases.push((Phase::Harness, clock.wall.saturating_sub(counted)));
    CellProfile { phases, tests }
}

/// One cell as the run's totals read it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CellTimes {
    /// The cell's name.
    pub cell: String,
    /// Its wall time.
    pub wall: Duration,
    /// Its profile.
    pub profile: CellProfile,
}

/// A run's time by phase. The share of a phase is its time summed over
/// the cells (plus the run's prepare) over [`Totals::work`]: the prepare
/// time plus the sum of the cells' wall times, i.e. the seconds the run's
/// cell slots were busy (with every slot busy, the cells' wall time times
/// the number of cells at once), so the shares add up to 1.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Totals {
    /// Each phase, in [`Phase::ALL`] order.
    pub phases: Vec<(Phase, Duration)>,
    /// Prepare plus the cells' wall times.
    pub work: Duration,
}

impl Totals {
    /// The share of `d` in the run's work (0 for a run with none).
    pub fn share(&self, d: Duration) -> f64 {
        if self.work.is_zero() {
            0.0
        } else {
            d.as_secs_f64() / self.work.as_secs_f64()
        }
    }

    /// One line: each phase with its seconds and share, zero ones left out.
    pub fn line(&self) -> String {
        let parts: Vec<String> = self
            .phases
            .iter()
            .filter(|(_, d)| !d.is_zero())
            .map(|(p, d)| {
                format!(
                    "{} {:.1} s ({:.0}%)",
                    p.word(),
                    d.as_secs_f64(),
                    100.0 * self.share(*d)
                )
            })
            .collect();
        format!("time: {}", parts.join(", "))
    }
}

/// The run's totals: `prepare` and every cell that ran.
pub fn totals(prepare: Duration, cells: &[CellTimes]) -> Totals {
    let phases = Phase::ALL
        .iter()
        .map(|&p| {
            let d = match p {
                Phase::Prepare => prepare,
                _ => cells.iter().map(|c| c.profile.phase(p)).sum(),
            };
            (p, d)
        })
        .collect();
    Totals {
        phases,
        work: prepare + cells.iter().map(|c| c.wall).sum::<Duration>(),
    }
}

/// One row of the `--profile` table.
#[derive(Debug, Clone, PartialEq)]
pub struct Item {
    /// A phase's word, or a test binary's name.
    pub name: String,
    /// The cell (`-` for the run's prepare).
    pub cell: String,
    /// Its time.
    pub duration: Duration,
    /// Its share of the run's work ([`Totals::share`]).
    pub share: f64,
}

/// The `top` costliest items of a run, costliest first: the run's prepare,
/// each cell's phases except [`Phase::Tests`], and each test binary of
/// each cell (which make up that phase).
pub fn costliest(prepare: Duration, cells: &[CellTimes], top: usize) -> Vec<Item> {
    let t = totals(prepare, cells);
    let item = |name: &str, cell: &str, d: Duration| Item {
        name: name.to_string(),
        cell: cell.to_string(),
        duration: d,
        share: t.share(d),
    };
    let mut items = vec![item(Phase::Prepare.word(), "-", prepare)];
    for c in cells {
        for &(p, d) in &c.profile.phases {
            if p != Phase::Tests {
                items.push(item(p.word(), &c.cell, d));
            }
        }
        for test in &c.profile.tests {
            items.push(item(&test.name, &c.cell, test.duration));
        }
    }
    items.retain(|i| !i.duration.is_zero());
    // Stable: equal costs keep the run's order.
    items.sort_by_key(|i| std::cmp::Reverse(i.duration));
    items.truncate(top);
    items
}

/// The `--profile` table: name, cell, seconds, share.
pub fn table(items: &[Item]) -> String {
    let w_name = items.iter().map(|i| i.name.len()).max().unwrap_or(0).max(4);
    let w_cell = items.iter().map(|i| i.cell.len()).max().unwrap_or(0).max(4);
    let mut out = format!(
        "{:<w_name$}  {:<w_cell$}  {:>8}  {:>6}\n",
        "item", "cell", "seconds", "share"
    );
    for i in items {
        let _ = writeln!(
            out,
            "{:<w_name$}  {:<w_cell$}  {:>8.2}  {:>5.1}%",
            i.name,
            i.cell,
            i.duration.as_secs_f64(),
            100.0 * i.share
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    /// A console whose lines arrive at the given times (ms since spawn).
    fn console(lines: &[(u64, &str)]) -> (Vec<u8>, Arrivals) {
        let mut bytes = Vec::new();
        let mut at = Arrivals::default();
        for (t, l) in lines {
            let line = format!("{l}\n");
            at.record(line.len(), ms(*t));
            bytes.extend_from_slice(line.as_bytes());
        }
        (bytes, at)
    }

    fn results(times: &[u64]) -> Arrivals {
        let mut at = Arrivals::default();
        for t in times {
            at.record(10, ms(*t));
        }
        at
    }

    #[test]
    fn arrivals_map_each_byte_to_its_read_and_merge_close_reads() {
        let mut a = Arrivals::default();
        a.record(5, ms(10));
        a.record(5, Duration::from_micros(10_500)); // within the grain
        a.record(5, ms(20));
        assert_eq!(a.at(0), Some(ms(10)));
        assert_eq!(a.at(7), Some(ms(10)));
        assert_eq!(a.at(10), Some(ms(20)));
        assert_eq!(a.at(15), None);
        assert_eq!((a.first(), a.last()), (Some(ms(10)), Some(ms(20))));
    }

    #[test]
    fn a_whole_boot_splits_into_its_phases_and_tests() {
        let (bytes, at) = console(&[
            (400, "[    0.000000] Linux version 7.3.4"),
            (3000, "harness: mounted proc on /proc"),
            (3100, "[    4.28] harness: pseudo filesystems mounted"),
            (3200, "[    4.32] harness: begin 1 topology"),
            (3300, "[    4.42] harness: end 1 topology"),
            (3400, "[    4.43] harness: begin 2 futex-ops"),
            (5400, "[    5.50] harness: end 2 futex-ops"),
        ]);
        let clock = CellClock {
            initramfs: ms(150),
            retried: Duration::ZERO,
            vm: ms(6000),
            wall: ms(6300),
        };
        let p = cell(&clock, &bytes, &at, &results(&[3050, 5450]));
        let phases: Vec<(Phase, u128)> =
            p.phases.iter().map(|(p, d)| (*p, d.as_millis())).collect();
        assert_eq!(
            phases,
            vec![
                (Phase::Initramfs, 150),
                (Phase::Retries, 0),
                (Phase::QemuStart, 400),
                (Phase::Boot, 2600),
                (Phase::GuestInit, 2450 - 2100),
                (Phase::Tests, 2100),
                (Phase::Shutdown, 550),
                (Phase::Harness, 150),
            ]
        );
        let sum: Duration = p.phases.iter().map(|p| p.1).sum();
        assert_eq!(sum, clock.wall);
        assert_eq!(
            p.tests,
            vec![
                TestTime {
                    number: Some(1),
                    name: "topology".into(),
                    duration: ms(100)
                },
                TestTime {
                    number: Some(2),
                    name: "futex-ops".into(),
                    duration: ms(2000)
                },
            ]
        );
    }

    #[test]
    fn a_guest_dead_in_boot_is_all_boot_and_a_test_never_ended_runs_to_the_last_result() {
        let (bytes, at) = console(&[(300, "Linux version"), (900, "Kernel panic - not syncing")]);
        let clock = CellClock {
            vm: ms(1000),
            wall: ms(1000),
            ..CellClock::default()
        };
        let p = cell(&clock, &bytes, &at, &Arrivals::default());
        assert_eq!(p.phase(Phase::QemuStart), ms(300));
        assert_eq!(p.phase(Phase::Boot), ms(700));
        assert_eq!(p.phase(Phase::Shutdown), Duration::ZERO);
        assert!(p.tests.is_empty());

        let (bytes, at) = console(&[
            (100, "x"),
            (200, "harness: begin 1 futex-wake"),
            (250, "BUG: soft lockup"),
        ]);
        let clock = CellClock {
            vm: ms(5000),
            wall: ms(5000),
            ..CellClock::default()
        };
        let p = cell(&clock, &bytes, &at, &results(&[150, 900]));
        assert_eq!(p.tests[0].duration, ms(700));
        assert_eq!(p.phase(Phase::Shutdown), ms(4100));
        let sum: Duration = p.phases.iter().map(|p| p.1).sum();
        assert_eq!(sum, clock.wall);
    }

    #[test]
    fn markers_past_the_console_capture_cut_are_not_timed() {
        let (bytes, at) = console(&[
            (100, "harness: begin 1 flood"),
            (200, "[harness: 999 bytes dropped here: output limit]"),
            (300, "harness: end 1 flood"),
        ]);
        let clock = CellClock {
            vm: ms(1000),
            wall: ms(1000),
            ..CellClock::default()
        };
        let p = cell(&clock, &bytes, &at, &results(&[150, 900]));
        assert_eq!(p.tests[0].duration, ms(800));
    }

    #[test]
    fn no_console_at_all_is_qemu_start() {
        let clock = CellClock {
            vm: ms(2000),
            wall: ms(2100),
            ..CellClock::default()
        };
        let p = cell(&clock, b"", &Arrivals::default(), &Arrivals::default());
        assert_eq!(p.phase(Phase::QemuStart), ms(2000));
        assert_eq!(p.phase(Phase::Harness), ms(100));
    }

    fn profile(phases: &[(Phase, u64)], tests: &[(&str, u64)]) -> CellProfile {
        CellProfile {
            phases: phases.iter().map(|&(p, d)| (p, ms(d))).collect(),
            tests: tests
                .iter()
                .map(|&(n, d)| TestTime {
                    number: None,
                    name: n.into(),
                    duration: ms(d),
                })
                .collect(),
        }
    }

    #[test]
    fn totals_share_the_prepare_and_cell_seconds() {
        let a = profile(&[(Phase::Boot, 3000), (Phase::Tests, 1000)], &[]);
        let b = profile(&[(Phase::Boot, 2000), (Phase::Tests, 2000)], &[]);
        let cells = [
            CellTimes {
                cell: "a".into(),
                wall: ms(4000),
                profile: a,
            },
            CellTimes {
                cell: "b".into(),
                wall: ms(4000),
                profile: b,
            },
        ];
        let t = totals(ms(2000), &cells);
        assert_eq!(t.work, ms(10_000));
        assert_eq!(t.phases[0], (Phase::Prepare, ms(2000)));
        assert_eq!(t.share(ms(5000)), 0.5);
        assert_eq!(
            t.line(),
            "time: prepare 2.0 s (20%), boot 5.0 s (50%), tests 3.0 s (30%)"
        );
        assert_eq!(totals(Duration::ZERO, &[]).share(ms(1)), 0.0);
    }

    #[test]
    fn the_table_lists_the_costliest_items_first_with_their_share() {
        let a = profile(
            &[
                (Phase::Boot, 3000),
                (Phase::Tests, 2500),
                (Phase::Shutdown, 0),
            ],
            &[("futex-wake", 2000), ("topology", 500)],
        );
        let b = profile(&[(Phase::Boot, 2500)], &[("futex-requeue", 1200)]);
        let cells = [
            CellTimes {
                cell: "d73/1n/futex".into(),
                wall: ms(5500),
                profile: a,
            },
            CellTimes {
                cell: "d73/2n/futex".into(),
                wall: ms(3500),
                profile: b,
            },
        ];
        let items = costliest(ms(1000), &cells, 4);
        let names: Vec<(&str, &str)> = items
            .iter()
            .map(|i| (i.name.as_str(), i.cell.as_str()))
            .collect();
        assert_eq!(
            names,
            vec![
                ("boot", "d73/1n/futex"),
                ("boot", "d73/2n/futex"),
                ("futex-wake", "d73/1n/futex"),
                ("futex-requeue", "d73/2n/futex"),
            ]
        );
        assert_eq!(
            table(&items),
            "item           cell           seconds   share\n\
             boot           d73/1n/futex      3.00   30.0%\n\
             boot           d73/2n/futex      2.50   25.0%\n\
             futex-wake     d73/1n/futex      2.00   20.0%\n\
             futex-requeue  d73/2n/futex      1.20   12.0%\n"
        );
    }
}

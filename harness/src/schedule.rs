//! Which planned cells may run at once: the host [`Budget`] and the
//! admission rule the runner asks before starting a cell.
//!
//! Three rules (`-j`):
//! - **`auto`** ([`Admission::Measured`]): a cell starts while the host's
//!   *measured* busy cores (`/proc/stat`, [`crate::hostload`]) and the
//!   running cells' *learned demand* (QEMU CPU seconds per wall second from
//!   earlier runs, [`crate::costs`]) leave room for the cell's own demand.
//!   Idle-heavy cells (waiting on timeouts, sleeping guests) overlap;
//!   CPU-heavy ones do not. While a cell declared `exclusive` runs
//!   (timing-sensitive: upstream's fixed timeouts), the cores are not
//!   overcommitted: it starts, and others start beside it, only while the
//!   load and the demands fit the cores themselves, one cell per core,
//!   one such cell at a time. Under round-robin TCG with filling
//!   ([`Budget::fill`], [`crate::fill`]) it is a count instead: one normal
//!   cell per core and [`crate::fill::FILL`] more at `SCHED_IDLE`; an
//!   `exclusive` cell then needs a normal slot, a core of its own.
//! - **`vcpus`** ([`Admission::Declared`]): the declared vCPUs of running
//!   cells stay within the host's cores (the rule before measurement;
//!   kept for `bench-matrix` to compare against).
//! - **`N`** ([`Admission::Count`]): at most N cells, whatever they need.
//!
//! Every rule keeps memory (guest RAM + [`QEMU_OVERHEAD_MIB`]) within
//! ~75% of MemAvailable, and a cell always starts when nothing runs (a
//! cell bigger than the budget runs alone).

use crate::hostload::CpuMeter;
use crate::qemu::TcgThread;
use std::time::{Duration, Instant};

/// Host memory a QEMU needs beyond the guest's (TCG code buffer, devices).
pub const QEMU_OVERHEAD_MIB: u64 = 256;

/// A cell's demand when nothing was learned: half a core per vCPU, at
/// most the whole host (measured on this project's cells under TCG: a
/// 2-vCPU futex or smoke cell keeps 0.9-1.0 cores busy on average).
pub const DEFAULT_DEMAND_PER_VCPU: f64 = 0.5;

/// How much the measured rule may overcommit the cores. Demands are
/// averages over a cell's life, and its busy phases (boot, race loops)
/// rarely line up with another's, so the sum may exceed the cores a
/// little. Measured on the default matrix, 2 cores (docs/matrix.md): at
/// 1.05 (two cells per core) 1.44 cores busy, 699 s, every cell green; at
/// 1.35 (three per core) 1.70 busy, 622 s, and at 1.15 1.63 busy, 740 s
/// (QEMU CPU 1,004 s -> 1,058 s -> 1,204 s: overcommitted vCPUs spin), and
/// in each such run a guest starved: on 6.17.13 a PI waiter preempted in
/// its spin on the owner did not run again for 21 s (an RCU stall), and
/// cases timed out (docs/findings.md). Again after the guest waits were
/// cut (both green): 1.05, 653 s, 1.42 busy, QEMU CPU 924 s; 1.15, 674 s,
/// 1.65 busy, 1,109 s: the overlap costs more CPU than it saves wall.
pub const OVERCOMMIT: f64 = 1.05;

/// At most this many cells per host core run at once (each has a busy
/// vCPU while it boots).
pub const CELLS_PER_CORE: usize = 2;

/// Under round-robin TCG, the measured rule keeps this many cells more
/// than the cores. Each keeps at most one core busy, and a guest the host
/// deschedules stops whole (no vCPU spins on a sibling), so the extra cell
/// costs little and fills what the others leave idle (boots, sleeps,
/// timeouts). Measured on the default matrix, 2 cores, the same day:
/// 2 cells at once 634 s (1.42 cores busy), 3 cells 584 s (1.73), the
/// measured rule with learned demands 629-640 s (1.52-1.60); 4 cells
/// 697 s (1.88, but 1,307 s of QEMU CPU against 1,013 s: two QEMUs taking
/// turns on a core cost a third more CPU for the same work)
/// (docs/matrix.md, Scheduling).
pub const ROUND_ROBIN_EXTRA: usize = 1;

/// How often the measured rule looks at the host again while cells run.
pub const TICK: Duration = Duration::from_secs(1);

/// The admission rule (default: `auto`, measured).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Admission {
    /// Measured host CPU and learned demand (`-j auto`).
    #[default]
    Measured,
    /// Declared vCPUs within the cores (`-j vcpus`).
    Declared,
    /// A number of cells (`-j N`).
    Count(usize),
}

/// `--tcg-thread`: how TCG maps each guest's vCPUs onto host threads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TcgChoice {
    /// Round-robin (`single`) when cells share the host, else `multi`.
    #[default]
    Auto,
    /// What was asked for.
    Fixed(TcgThread),
}

impl TcgChoice {
    /// `auto`, `multi` or `single` (empty: `auto`).
    pub fn parse(s: &str) -> Result<TcgChoice, String> {
        match s {
            "" | "auto" => Ok(TcgChoice::Auto),
            "multi" => Ok(TcgChoice::Fixed(TcgThread::Multi)),
            "single" => Ok(TcgChoice::Fixed(TcgThread::Single)),
            _ => Err("expected auto, multi or single".into()),
        }
    }

    /// The threading of a run of `cells` cells within `budget`. Cells that
    /// share the host run round-robin: a multi-threaded guest's vCPUs spin
    /// on siblings the host has descheduled (locks, IPIs, TLB shootdowns)
    /// and overlap then costs more CPU than it saves wall time, while a
    /// round-robin guest keeps at most one core and hands its thread on at
    /// every `pause` (docs/matrix.md, Scheduling, has the measurements).
    /// One cell at a time keeps QEMU's default, where vCPUs really run at
    /// once.
    pub fn resolve(self, budget: &Budget, cells: usize) -> TcgThread {
        match self {
            TcgChoice::Fixed(t) => t,
            TcgChoice::Auto => {
                let shared = cells > 1
                    && budget.cores > 1
                    && !matches!(budget.admission, Admission::Count(1));
                if shared {
                    TcgThread::Single
                } else {
                    TcgThread::Multi
                }
            }
        }
    }
}

/// Host resources cells may use at once.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Budget {
    /// The rule.
    pub admission: Admission,
    /// Host cores.
    pub cores: u32,
    /// MiB of all running cells (guest memory + [`QEMU_OVERHEAD_MIB`]).
    pub mem_mib: u64,
    /// Cells run round-robin TCG (one host thread each): the measured rule
    /// then keeps one cell more than the cores ([`ROUND_ROBIN_EXTRA`]) and
    /// counts no cell's demand above one core.
    pub round_robin: bool,
    /// Round-robin cells beyond one per core run at `SCHED_IDLE`
    /// ([`crate::fill`]): the measured rule then keeps
    /// [`crate::fill::FILL`] cells more than the cores, not
    /// [`ROUND_ROBIN_EXTRA`], and an `exclusive` cell needs only a normal
    /// slot (a core of its own), not to run alone.
    pub fill: bool,
}

/// What one cell needs, as the scheduler sees it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Need {
    /// Declared vCPUs.
    pub vcpus: u32,
    /// Guest memory + overhead.
    pub mem_mib: u64,
    /// Host cores it keeps busy on average (learned, else
    /// [`DEFAULT_DEMAND_PER_VCPU`] per vCPU).
    pub demand: f64,
    /// Runs alone.
    pub exclusive: bool,
}

/// What the front door knows of a cell beyond its topology: its learned
/// demand and whether it must run alone (by cell index; a missing entry is
/// the default: nothing learned, not exclusive).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Placement {
    /// Learned demand ([`crate::costs::Cost::demand`]).
    pub demand: Option<f64>,
    /// `exclusive: true` in the matrix.
    pub exclusive: bool,
    /// Expected wall seconds (learned, else the declared cost scaled):
    /// what decides whether the cell may start ahead of a blocked one.
    pub seconds: Option<f64>,
}

impl Need {
    /// A cell's need: `learned` demand if there is one.
    pub fn new(
        vcpus: u32,
        mem_mib: u64,
        learned: Option<f64>,
        exclusive: bool,
        cores: u32,
    ) -> Need {
        let fallback = (vcpus as f64 * DEFAULT_DEMAND_PER_VCPU).min(cores as f64);
        Need {
            vcpus,
            mem_mib,
            demand: learned
                .filter(|d| d.is_finite() && *d > 0.0)
                .unwrap_or(fallback),
            exclusive,
        }
    }
}

impl Budget {
    /// From the host (its cores, ~75% of MemAvailable) and `-j`.
    pub fn from_host(admission: Admission) -> Budget {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as u32;
        let avail_kib = std::fs::read_to_string("/proc/meminfo")
            .ok()
            .and_then(|m| {
                m.lines()
                    .find(|l| l.starts_with("MemAvailable:"))
                    .and_then(|l| l.split_whitespace().nth(1))
                    .and_then(|v| v.parse::<u64>().ok())
            })
            .unwrap_or(2 << 20);
        Budget {
            admission,
            cores,
            mem_mib: avail_kib / 1024 * 3 / 4,
            round_robin: false,
            fill: false,
        }
    }

    /// One cell at a time.
    pub fn serial() -> Budget {
        Budget {
            admission: Admission::Count(1),
            cores: u32::MAX,
            mem_mib: u64::MAX,
            round_robin: false,
            fill: false,
        }
    }

    /// `-j`'s text: `auto`, `vcpus` or a number of cells >= 1.
    pub fn parse_jobs(s: &str) -> Result<Admission, String> {
        match s {
            "auto" => Ok(Admission::Measured),
            "vcpus" => Ok(Admission::Declared),
            n => match n.parse::<usize>() {
                Ok(n) if n > 0 => Ok(Admission::Count(n)),
                _ => Err("expected auto, vcpus or a number of cells >= 1".into()),
            },
        }
    }

    /// A line for the terminal: what the rule is.
    pub fn describe(&self) -> String {
        match self.admission {
            Admission::Measured if self.fill => format!(
                "round-robin TCG, {} normal cells on {} cores + {} at SCHED_IDLE filling what they leave idle, {} MiB",
                self.cores,
                self.cores,
                crate::fill::FILL,
                self.mem_mib
            ),
            Admission::Measured if self.round_robin => format!(
                "round-robin TCG, {} cells on {} cores, {} MiB",
                self.cores as usize + ROUND_ROBIN_EXTRA,
                self.cores,
                self.mem_mib
            ),
            Admission::Measured => format!(
                "measured CPU on {} cores, learned demand, {} MiB",
                self.cores, self.mem_mib
            ),
            Admission::Declared => format!("{} vCPUs, {} MiB", self.cores, self.mem_mib),
            Admission::Count(n) => format!("{n} cells, {} MiB", self.mem_mib),
        }
    }

    /// Whether `cell` may start beside `running`, the host's measured busy
    /// cores being `busy` (`None`: not measurable; the learned demands
    /// alone decide).
    pub fn fits(&self, running: &[Need], busy: Option<f64>, cell: &Need) -> bool {
        if running.is_empty() {
            return true;
        }
        let mem: u64 = running.iter().map(|n| n.mem_mib).sum();
        if mem.saturating_add(cell.mem_mib) > self.mem_mib {
            return false;
        }
        match self.admission {
            Admission::Count(n) => running.len() < n,
            Admission::Declared => {
                let v: u32 = running.iter().map(|n| n.vcpus).sum();
                v.saturating_add(cell.vcpus) <= self.cores
            }
            Admission::Measured if self.fill => {
                // Normal cells never outnumber the cores (crate::fill),
                // so each has a core of its own, and idle ones take only
                // what the normal ones leave. An exclusive cell needs a
                // normal slot: free only while fewer cells than cores run.
                let cores = self.cores as usize;
                if cell.exclusive {
                    running.len() < cores
                } else {
                    running.len() < cores + crate::fill::FILL
                }
            }
            Admission::Measured => {
                // A timing-sensitive cell gets its share of the cores
                // whole: no overcommit, no more cells than cores, never
                // another such cell beside it.
                let beside_exclusive = running.iter().any(|n| n.exclusive);
                if cell.exclusive && beside_exclusive {
                    return false;
                }
                let exclusive = cell.exclusive || beside_exclusive;
                let cores = self.cores as usize;
                if exclusive {
                    if running.len() >= cores {
                        return false;
                    }
                } else if self.round_robin {
                    // One core at most each: a count, whatever the load
                    // says (docs/matrix.md, Scheduling).
                    return running.len() < cores + ROUND_ROBIN_EXTRA;
                } else if running.len() >= CELLS_PER_CORE * cores {
                    return false;
                }
                let overcommit = if exclusive { 1.0 } else { OVERCOMMIT };
                // A round-robin guest never keeps more than one core busy,
                // whatever was learned or assumed per vCPU.
                let most = if self.round_robin { 1.0 } else { f64::MAX };
                let demand = |n: &Need| n.demand.min(most);
                let learned: f64 = running.iter().map(demand).sum();
                let load = learned.max(busy.unwrap_or(0.0));
                load + demand(cell) <= self.cores as f64 * overcommit
            }
        }
    }
}

/// The runner's view of what runs: the needs of started cells and the
/// host meter.
#[derive(Debug)]
pub struct Scheduler {
    budget: Budget,
    running: Vec<Running>,
    meter: Option<CpuMeter>,
}

#[derive(Debug)]
struct Running {
    index: usize,
    need: Need,
    since: Instant,
    seconds: Option<f64>,
}

impl Scheduler {
    /// Nothing running yet.
    pub fn new(budget: Budget) -> Scheduler {
        // Filling is a count: only an ending cell makes room.
        let meter = (budget.admission == Admission::Measured && !budget.fill).then(CpuMeter::new);
        Scheduler {
            budget,
            running: Vec::new(),
            meter,
        }
    }

    /// Whether `need` may start now.
    pub fn admits(&mut self, need: &Need) -> bool {
        let busy = self.meter.as_mut().and_then(|m| m.sample(TICK));
        let running: Vec<Need> = self.running.iter().map(|r| r.need).collect();
        self.budget.fits(&running, busy, need)
    }

    /// Whether a cell expected to take `seconds` may start ahead of the
    /// first waiting cell, which does not fit: only when it is expected to
    /// end before any running cell does, so that it never delays the
    /// waiting one (the longest-first order then holds: left to whatever
    /// fits, the big cells were starved by small ones and ran last, with
    /// little beside them). Unknown durations never jump the queue.
    pub fn backfills(&self, seconds: Option<f64>) -> bool {
        let horizon = self
            .running
            .iter()
            .filter_map(|r| {
                r.seconds
                    .map(|s| (s - r.since.elapsed().as_secs_f64()).max(0.0))
            })
            .min_by(f64::total_cmp);
        matches!((seconds, horizon), (Some(s), Some(h)) if s <= h)
    }

    /// Cell `index` started; it is expected to take `seconds`.
    pub fn start(&mut self, index: usize, need: Need, seconds: Option<f64>) {
        self.running.push(Running {
            index,
            need,
            since: Instant::now(),
            seconds,
        });
    }

    /// Cell `index` ended.
    pub fn finish(&mut self, index: usize) {
        self.running.retain(|r| r.index != index);
    }

    /// How long to wait for a cell to end before asking again (`None`:
    /// only an ending cell changes anything).
    pub fn recheck(&self) -> Option<Duration> {
        (self.meter.is_some() && !self.running.is_empty()).then_some(TICK)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tcg_thread_is_round_robin_only_when_cells_share_the_host() {
        let auto = TcgChoice::parse("auto").unwrap();
        assert_eq!(TcgChoice::parse("").unwrap(), auto);
        let on = |admission, cores, cells| {
            auto.resolve(
                &Budget {
                    admission,
                    cores,
                    mem_mib: 8192,
                    round_robin: false,
                    fill: false,
                },
                cells,
            )
        };
        assert_eq!(on(Admission::Measured, 2, 79), TcgThread::Single);
        assert_eq!(on(Admission::Count(3), 2, 79), TcgThread::Single);
        assert_eq!(on(Admission::Declared, 2, 2), TcgThread::Single);
        // One cell, one cell at a time, or one core: nothing to share.
        assert_eq!(on(Admission::Measured, 2, 1), TcgThread::Multi);
        assert_eq!(on(Admission::Count(1), 2, 79), TcgThread::Multi);
        assert_eq!(on(Admission::Measured, 1, 79), TcgThread::Multi);
        for (word, t) in [("multi", TcgThread::Multi), ("single", TcgThread::Single)] {
            let fixed = TcgChoice::parse(word).unwrap();
            assert_eq!(fixed.resolve(&budget(Admission::Count(1)), 1), t);
            assert_eq!(fixed.resolve(&budget(Admission::Measured), 79), t);
        }
        let bad = TcgChoice::parse("rr").unwrap_err();
        assert!(bad.contains("expected auto, multi or single"), "{bad}");
    }

    fn budget(admission: Admission) -> Budget {
        Budget {
            admission,
            cores: 2,
            mem_mib: 8192,
            round_robin: false,
            fill: false,
        }
    }

    #[test]
    fn round_robin_cells_keep_one_more_than_the_cores() {
        let b = Budget {
            round_robin: true,
            ..budget(Admission::Measured)
        };
        let cell = Need::new(2, 768, Some(0.9), false, 2);
        // Whatever their demand and the load: three on two cores.
        assert!(b.fits(&[cell, cell], Some(2.0), &cell));
        assert!(!b.fits(&[cell, cell, cell], Some(0.1), &cell));
        // An exclusive cell still gets whole cores.
        let alone = Need::new(2, 768, Some(0.9), true, 2);
        assert!(!b.fits(&[alone], Some(0.9), &alone));
        assert!(!b.fits(&[alone, cell], Some(1.0), &cell));
        assert!(b.fits(&[alone], Some(0.5), &Need::new(2, 768, Some(0.4), false, 2)));
        // Beside an exclusive cell, an 18-vCPU guest (9 cores by the
        // per-vCPU default, capped at the host's 2) counts one core.
        let wide = Need::new(18, 768, None, false, 2);
        assert!(b.fits(&[alone], Some(0.5), &wide));
        assert!(!budget(Admission::Measured).fits(&[alone], Some(0.5), &wide));
        // Memory still bounds it.
        let small_mem = Budget { mem_mib: 2000, ..b };
        assert!(!small_mem.fits(&[cell, cell], Some(0.1), &cell));
    }

    #[test]
    fn filling_keeps_two_idle_cells_beside_one_normal_per_core() {
        let b = Budget {
            round_robin: true,
            fill: true,
            ..budget(Admission::Measured)
        };
        let cell = Need::new(2, 768, Some(0.9), false, 2);
        assert!(b.fits(&[cell; 3], Some(2.0), &cell));
        assert!(!b.fits(&[cell; 4], Some(0.1), &cell));
        // An exclusive cell starts only into a normal slot (fewer cells
        // than cores), beside another one too: each has its own core.
        // Idle cells fill beside it.
        let alone = Need::new(2, 768, Some(0.9), true, 2);
        assert!(!b.fits(&[cell, cell], Some(0.5), &alone));
        assert!(b.fits(&[cell], Some(1.9), &alone));
        assert!(b.fits(&[alone], Some(1.9), &alone));
        assert!(!b.fits(&[alone, alone], Some(0.5), &alone));
        assert!(b.fits(&[alone, cell], Some(1.9), &cell));
        assert!(b.fits(&[alone, alone, cell], Some(1.9), &cell));
        assert!(
            b.describe().contains("+ 2 at SCHED_IDLE"),
            "{}",
            b.describe()
        );
        // Only the measured rule fills: -j N is what it says.
        let counted = Budget {
            admission: Admission::Count(3),
            ..b
        };
        assert!(!counted.fits(&[cell; 3], Some(0.1), &cell));
    }

    fn need(vcpus: u32, demand: Option<f64>) -> Need {
        Need::new(vcpus, 768, demand, false, 2)
    }

    #[test]
    fn jobs_text() {
        assert_eq!(Budget::parse_jobs("auto"), Ok(Admission::Measured));
        assert_eq!(Budget::parse_jobs("vcpus"), Ok(Admission::Declared));
        assert_eq!(Budget::parse_jobs("3"), Ok(Admission::Count(3)));
        for bad in ["0", "-1", "two", ""] {
            assert!(Budget::parse_jobs(bad)
                .unwrap_err()
                .contains("expected auto"));
        }
    }

    #[test]
    fn default_demand_is_half_a_core_per_vcpu_within_the_host() {
        assert_eq!(need(2, None).demand, 1.0);
        assert_eq!(need(9, None).demand, 2.0);
        assert_eq!(need(2, Some(0.4)).demand, 0.4);
        assert_eq!(
            need(2, Some(f64::NAN)).demand,
            1.0,
            "a bad figure is not used"
        );
        assert_eq!(need(2, Some(0.0)).demand, 1.0);
    }

    #[test]
    fn measured_rule_overlaps_idle_cells_and_keeps_busy_ones_apart() {
        let b = budget(Admission::Measured);
        let idle = need(2, Some(0.3));
        let busy = need(2, Some(1.6));
        // Anything starts on an empty host, even a cell bigger than it.
        assert!(b.fits(&[], Some(2.0), &need(9, None)));
        // Two idle-heavy cells beside each other; a busy one beside an idle one.
        assert!(b.fits(&[idle], Some(0.3), &idle));
        assert!(b.fits(&[idle], Some(0.3), &need(2, Some(1.5))));
        // Two busy ones: no.
        assert!(!b.fits(&[busy], Some(1.6), &busy));
        // The host measured busier than the cells' average (a burst, or
        // another program): wait.
        assert!(!b.fits(&[idle], Some(1.9), &idle));
        // The measurement lagging behind a start: the learned sum decides.
        assert!(!b.fits(&[busy], Some(0.1), &need(2, Some(0.6))));
        // Averages may overcommit the cores a little (2 x 1.05 here).
        assert!(b.fits(&[busy], Some(1.6), &need(2, Some(0.5))));
        // Never more than two cells per core.
        assert!(b.fits(&[idle; 3], Some(0.9), &need(2, Some(0.01))));
        assert!(!b.fits(&[idle; 4], Some(0.2), &need(2, Some(0.01))));
        // Nothing measured: the learned demand alone.
        assert!(b.fits(&[idle], None, &idle));
        // Two unknown 2-vCPU cells (1.0 each) fit on 2 cores; an unknown
        // 4-vCPU one (2.0) runs alone.
        assert!(b.fits(&[need(2, None)], Some(0.5), &need(2, None)));
        assert!(!b.fits(&[need(2, None)], Some(0.5), &need(4, None)));
    }

    #[test]
    fn an_exclusive_cell_never_runs_on_overcommitted_cores() {
        let b = budget(Admission::Measured);
        let ex = Need::new(18, 768, Some(0.7), true, 2);
        let idle = need(2, Some(0.2));
        let busy = need(4, Some(1.2));
        let busier = need(4, Some(1.4));
        assert!(b.fits(&[], None, &ex));
        // Beside it: what fits the cores themselves (0.7 + 1.2 <= 2).
        assert!(b.fits(&[ex], Some(0.7), &busy));
        assert!(b.fits(&[busy], Some(1.2), &ex));
        // Not what only the overcommit would let in (0.7 + 1.4 <= 2.1).
        assert!(!b.fits(&[ex], Some(0.7), &busier));
        assert!(!b.fits(&[busier], Some(1.4), &ex));
        // Nor a measured load that leaves no room.
        assert!(!b.fits(&[ex], Some(1.9), &idle));
        // One cell per core while it runs, and one such cell at a time.
        assert!(!b.fits(&[ex, idle], Some(0.9), &idle));
        assert!(!b.fits(&[ex], Some(0.7), &Need::new(18, 768, Some(0.2), true, 2)));
    }

    #[test]
    fn memory_bounds_every_rule() {
        for a in [
            Admission::Measured,
            Admission::Declared,
            Admission::Count(4),
        ] {
            let b = Budget {
                mem_mib: 2000,
                ..budget(a)
            };
            let small = Need::new(1, 900, Some(0.1), false, 2);
            let big = Need::new(1, 1200, Some(0.1), false, 2);
            assert!(b.fits(&[small], Some(0.1), &small), "{a:?}");
            assert!(!b.fits(&[small], Some(0.1), &big), "{a:?}");
        }
    }

    #[test]
    fn declared_and_count_rules_are_the_old_ones() {
        let d = budget(Admission::Declared);
        assert!(d.fits(&[need(1, None)], Some(2.0), &need(1, None)));
        assert!(!d.fits(&[need(2, None)], Some(0.0), &need(1, None)));
        let c = budget(Admission::Count(2));
        assert!(c.fits(&[need(9, None)], Some(2.0), &need(9, None)));
        assert!(!c.fits(&[need(1, None), need(1, None)], None, &need(1, None)));
        assert!(!Budget::serial().fits(&[need(1, None)], None, &need(1, None)));
    }

    #[test]
    fn the_scheduler_tracks_what_runs_and_rechecks_only_when_measuring() {
        let mut s = Scheduler::new(budget(Admission::Measured));
        assert_eq!(s.recheck(), None, "nothing runs");
        assert!(s.admits(&need(2, Some(0.1))));
        s.start(3, need(2, Some(0.1)), None);
        assert_eq!(s.recheck(), Some(TICK));
        s.start(4, need(2, Some(1.5)), None);
        assert!(
            !s.admits(&need(2, Some(0.6))),
            "1.6 + 0.6 cores on 2 x 1.05"
        );
        s.finish(3);
        s.finish(4);
        assert!(s.admits(&need(9, None)));
        let s = Scheduler::new(budget(Admission::Count(2)));
        assert_eq!(s.recheck(), None);
        let mut s = Scheduler::new(Budget {
            round_robin: true,
            fill: true,
            ..budget(Admission::Measured)
        });
        s.start(3, need(2, Some(0.1)), None);
        assert_eq!(s.recheck(), None, "filling counts cells");
    }

    #[test]
    fn only_cells_that_end_before_every_running_one_jump_the_queue() {
        let mut s = Scheduler::new(budget(Admission::Count(4)));
        assert!(!s.backfills(Some(1.0)), "nothing runs: no horizon");
        s.start(0, need(2, None), Some(100.0));
        s.start(1, need(2, None), Some(30.0));
        assert!(s.backfills(Some(20.0)));
        assert!(!s.backfills(Some(40.0)), "would outlast cell 1");
        assert!(!s.backfills(None), "unknown duration");
        s.start(2, need(2, None), None);
        assert!(
            s.backfills(Some(20.0)),
            "an unknown running cell adds no horizon"
        );
        s.finish(1);
        assert!(s.backfills(Some(40.0)));
        // A cell past its estimate leaves no room.
        s.start(3, need(2, None), Some(0.0));
        assert!(!s.backfills(Some(0.5)));
    }
}

//! Filling the cores under round-robin TCG, without cells sharing a core
//! as equals.
//!
//! A round-robin guest keeps at most one core busy, and is idle about a
//! third of its wall time (boot waits, sleeps, timeouts). Two such QEMUs
//! taking turns on one core as equals cost a third more CPU for the same
//! work (docs/matrix.md, Scheduling). So the first cells to start, one per
//! core, run normal; [`FILL`] more run at `SCHED_IDLE` ([`Class::Idle`]),
//! on what the normal ones leave idle, and cost them nothing:
//! - when a normal cell ends, the idle cell that started first becomes
//!   normal for good;
//! - an idle cell that waited for a core nearly all of the last
//!   [`STARVE_WINDOW`] runs normal for [`BOOST`], so that no guest goes
//!   near the ~20 s without a CPU where its RCU-stall and soft-lockup
//!   watchdogs fire.
//!
//! The runner fills only where it can promote
//! ([`crate::sched_class::can_promote`]). An `exclusive` cell
//! (timing-sensitive) starts only into a normal slot, so it has a core of
//! its own; idle cells fill beside it, and a starved one's boost is the
//! only time normal cells outnumber the cores (measured: 2 s after 8 s
//! without a core, a few times per idle cell).

use crate::sched_class::{Class, ClassHandle};
use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// Idle-class cells beside the normal ones (one per core). Measured on the
/// default matrix, 2 cores: 2 normal + 2 idle cells 449-517 s at 1.82
/// cores busy and 819-941 s of QEMU CPU, against 584 s, 1.71 and 999 s
/// for 3 equal cells (docs/matrix.md, Scheduling).
pub const FILL: usize = 2;

/// How far back an idle cell's waiting for a core is looked at.
pub const STARVE_WINDOW: Duration = Duration::from_secs(8);

/// Waiting this long within [`STARVE_WINDOW`] (summed over the QEMU's
/// threads, so one busy vCPU thread that never ran counts 8 s) is
/// starving: the cell got under half a second of a core.
pub const STARVED: Duration = Duration::from_millis(7500);

/// How long a starved idle cell runs normal.
pub const BOOST: Duration = Duration::from_secs(2);

/// How often the runner looks at the idle cells.
pub const TICK: Duration = Duration::from_millis(250);

/// The class of each running cell.
#[derive(Debug)]
pub struct Fill {
    cores: usize,
    lanes: Vec<Lane>,
}

#[derive(Debug)]
struct Lane {
    index: usize,
    handle: ClassHandle,
    started: Instant,
    /// Holds a normal slot (for good).
    normal: bool,
    /// Started idle; when it became normal for good.
    idle: Option<(Instant, Option<Instant>)>,
    boost_until: Option<Instant>,
    boosts: u32,
    /// (when, run delay) samples within [`STARVE_WINDOW`].
    delays: VecDeque<(Instant, Duration)>,
    /// The first class change the host refused.
    refused: Option<String>,
}

impl Lane {
    fn set(&mut self, class: Class) {
        if let Err(e) = self.handle.set(class) {
            self.refused.get_or_insert_with(|| e.to_string());
        }
    }
}

impl Fill {
    /// Nothing running, `cores` normal slots.
    pub fn new(cores: usize) -> Fill {
        Fill {
            cores: cores.max(1),
            lanes: Vec::new(),
        }
    }

    /// Cell `index` starts: its QEMU's class, normal while fewer cells
    /// than cores hold a normal slot.
    pub fn start(&mut self, index: usize, now: Instant) -> ClassHandle {
        let normal = self.lanes.iter().filter(|l| l.normal).count() < self.cores;
        let handle = ClassHandle::new(if normal { Class::Normal } else { Class::Idle });
        self.lanes.push(Lane {
            index,
            handle: handle.clone(),
            started: now,
            normal,
            idle: (!normal).then_some((now, None)),
            boost_until: None,
            boosts: 0,
            delays: VecDeque::new(),
            refused: None,
        });
        handle
    }

    /// Cell `index` ended: the idle cell that started first takes its
    /// normal slot. Returns the ended cell's note when it ran idle at all.
    pub fn finish(&mut self, index: usize, now: Instant) -> Option<String> {
        let pos = self.lanes.iter().position(|l| l.index == index)?;
        let lane = self.lanes.remove(pos);
        while self.lanes.iter().filter(|l| l.normal).count() < self.cores {
            let Some(next) = self
                .lanes
                .iter_mut()
                .filter(|l| !l.normal)
                .min_by_key(|l| l.started)
            else {
                break;
            };
            next.normal = true;
            next.boost_until = None;
            next.delays.clear();
            if let Some((_, promoted)) = next.idle.as_mut() {
                *promoted = Some(now);
            }
            next.set(Class::Normal);
        }
        lane.note(now)
    }

    /// Whether a cell runs idle now (the runner then ticks).
    pub fn filling(&self) -> bool {
        self.lanes.iter().any(|l| !l.normal)
    }

    /// The class cell `index` runs in now.
    pub fn class(&self, index: usize) -> Option<Class> {
        let l = self.lanes.iter().find(|l| l.index == index)?;
        Some(l.handle.class())
    }

    /// Looks at the idle cells: one that starved runs normal for
    /// [`BOOST`]; one whose boost is over is idle again. `run_delay` is
    /// [`ClassHandle::run_delay`] (a parameter for the tests).
    pub fn tick(&mut self, now: Instant, run_delay: impl Fn(&ClassHandle) -> Option<Duration>) {
        for lane in self.lanes.iter_mut().filter(|l| !l.normal) {
            if let Some(d) = run_delay(&lane.handle) {
                lane.delays.push_back((now, d));
            }
            while lane
                .delays
                .front()
                .is_some_and(|(t, _)| now.saturating_duration_since(*t) > STARVE_WINDOW)
            {
                lane.delays.pop_front();
            }
            if let Some(until) = lane.boost_until {
                if now >= until {
                    lane.boost_until = None;
                    lane.delays.clear();
                    lane.set(Class::Idle);
                }
                continue;
            }
            let (Some(first), Some(last)) = (lane.delays.front(), lane.delays.back()) else {
                continue;
            };
            let seen = last.0.saturating_duration_since(first.0);
            let waited = last.1.saturating_sub(first.1);
            if seen >= STARVE_WINDOW.mul_f64(0.8) && waited > STARVED {
                lane.boost_until = Some(now + BOOST);
                lane.boosts += 1;
                lane.set(Class::Normal);
            }
        }
    }
}

impl Lane {
    /// What a cell that started idle says in its notes.
    fn note(&self, now: Instant) -> Option<String> {
        let (since, promoted) = self.idle?;
        let idle_for = promoted.unwrap_or(now).saturating_duration_since(since);
        let mut note = format!(
            "host: started at SCHED_IDLE, filling cores the normal cells left idle; {}",
            match promoted {
                Some(_) => format!("normal after {:.1} s", idle_for.as_secs_f64()),
                None => format!("idle to the end ({:.1} s)", idle_for.as_secs_f64()),
            }
        );
        if self.boosts > 0 {
            note.push_str(&format!(
                "; run normal {} time(s) for {} s when it starved",
                self.boosts,
                BOOST.as_secs()
            ));
        }
        if let Some(e) = &self.refused {
            note.push_str(&format!("; the host refused a class change: {e}"));
        }
        Some(note)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(t0: Instant, ms: u64) -> Instant {
        t0 + Duration::from_millis(ms)
    }

    #[test]
    fn one_normal_cell_per_core_and_the_oldest_idle_one_takes_a_free_slot() {
        let t0 = Instant::now();
        let mut f = Fill::new(2);
        let classes: Vec<Class> = (0..4usize)
            .map(|i| f.start(i, at(t0, i as u64)).class())
            .collect();
        assert_eq!(
            classes,
            [Class::Normal, Class::Normal, Class::Idle, Class::Idle]
        );
        assert!(f.filling());
        // A normal cell ends: cell 2 (started before 3) is promoted.
        assert_eq!(f.finish(1, at(t0, 10_000)), None, "it never ran idle");
        assert_eq!(f.class(2), Some(Class::Normal));
        assert_eq!(f.class(3), Some(Class::Idle));
        // An idle cell that ends frees no normal slot.
        let note = f.finish(3, at(t0, 12_003)).unwrap();
        assert!(note.contains("idle to the end (12.0 s)"), "{note}");
        assert_eq!(f.class(0), Some(Class::Normal));
        assert!(!f.filling());
        // A new cell beside two normal ones is idle again.
        assert_eq!(f.start(5, at(t0, 13_000)).class(), Class::Idle);
        let note = f.finish(0, at(t0, 14_000));
        assert_eq!(note, None);
        assert_eq!(f.class(5), Some(Class::Normal));
        let note = f.finish(2, at(t0, 20_002)).unwrap();
        assert!(note.contains("normal after 10.0 s"), "{note}");
        assert_eq!(f.finish(9, at(t0, 20_000)), None, "unknown cell");
    }

    #[test]
    fn fewer_cells_than_cores_are_all_normal() {
        let t0 = Instant::now();
        let mut f = Fill::new(2);
        assert_eq!(f.start(0, t0).class(), Class::Normal);
        assert!(!f.filling());
        // Cores reported as 0 still give one normal slot.
        assert_eq!(Fill::new(0).start(0, t0).class(), Class::Normal);
    }

    /// Run delays as a test's clock says: `waiting` ms of run delay per
    /// 250 ms tick.
    fn starve(f: &mut Fill, t0: Instant, from_ms: u64, to_ms: u64, waiting: u64) {
        let mut ms = from_ms;
        while ms <= to_ms {
            let d = Duration::from_millis(ms.saturating_sub(from_ms) / 250 * waiting);
            f.tick(at(t0, ms), |_| Some(d));
            ms += 250;
        }
    }

    /// One core: cell 0 normal, cell 1 idle.
    fn normal_and_idle(t0: Instant) -> Fill {
        let mut f = Fill::new(1);
        f.start(0, t0);
        f.start(1, t0);
        f
    }

    #[test]
    fn a_starved_idle_cell_runs_normal_for_a_while() {
        let t0 = Instant::now();
        let mut f = normal_and_idle(t0);
        // Waiting 240 of every 250 ms: 7.44 s by 7.75 s, 7.68 s (starved) at 8 s.
        starve(&mut f, t0, 0, 7_750, 240);
        assert_eq!(f.class(1), Some(Class::Idle), "not 8 s seen yet");
        f.tick(at(t0, 8_000), |_| Some(Duration::from_millis(32 * 240)));
        assert_eq!(f.class(1), Some(Class::Normal), "boosted");
        f.tick(at(t0, 9_000), |_| Some(Duration::from_millis(8_000)));
        assert_eq!(f.class(1), Some(Class::Normal));
        f.tick(at(t0, 10_000), |_| Some(Duration::from_millis(8_000)));
        assert_eq!(f.class(1), Some(Class::Idle), "the boost is over");
        // Its history starts again: no boost before another 8 s seen.
        starve(&mut f, t0, 10_250, 16_000, 250);
        assert_eq!(f.class(1), Some(Class::Idle));
        let note = f.finish(1, at(t0, 17_000)).unwrap();
        assert!(note.contains("run normal 1 time(s) for 2 s"), "{note}");
    }

    #[test]
    fn an_idle_cell_that_gets_some_cpu_is_left_idle() {
        let t0 = Instant::now();
        let mut f = normal_and_idle(t0);
        // Waiting 200 of every 250 ms: 6.4 s in 8 s, it ran 1.6 s.
        starve(&mut f, t0, 0, 30_000, 200);
        assert_eq!(f.class(1), Some(Class::Idle));
        // Nothing measurable (no QEMU yet, no schedstats): never boosted.
        let mut g = normal_and_idle(t0);
        for ms in (0..30_000).step_by(250) {
            g.tick(at(t0, ms), |_| None);
        }
        assert_eq!(g.class(1), Some(Class::Idle));
    }

    #[test]
    fn a_boosted_cell_promoted_keeps_normal_for_good() {
        let t0 = Instant::now();
        let mut f = normal_and_idle(t0);
        starve(&mut f, t0, 0, 8_000, 250);
        assert_eq!(f.class(1), Some(Class::Normal));
        f.finish(0, at(t0, 8_500));
        f.tick(at(t0, 20_000), |_| Some(Duration::ZERO));
        assert_eq!(f.class(1), Some(Class::Normal), "no boost to end");
        assert!(!f.filling());
    }
}

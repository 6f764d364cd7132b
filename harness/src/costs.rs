//! Learned cell costs: the wall time and QEMU CPU time of each cell's
//! previous runs, kept beside the matrix report (`<out>/costs.json`). The
//! matrix orders cells longest first by them, `--shard` balances by them
//! when every shard reads the same file (`--costs FILE`), and the
//! scheduler reads a cell's *demand* (CPU seconds per wall second: how
//! many host cores it keeps busy) to decide what may run beside it.
//!
//! The file is a cache: unreadable or malformed means "nothing learned"
//! (with a note), never a failed run; it is written atomically.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// What was learned about one cell.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Cost {
    /// Wall seconds of a run (smoothed over runs).
    pub wall_s: f64,
    /// QEMU CPU seconds of a run (smoothed), if measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_s: Option<f64>,
    /// Runs that went into the figures.
    pub runs: u32,
}

impl Cost {
    /// Host cores the cell keeps busy on average (`None`: no CPU figure).
    pub fn demand(&self) -> Option<f64> {
        let cpu = self.cpu_s?;
        (self.wall_s > 0.0).then(|| cpu / self.wall_s)
    }
}

/// The file's format.
#[derive(Debug, Default, Serialize, Deserialize)]
struct File {
    version: u32,
    cells: BTreeMap<String, Cost>,
}

const VERSION: u32 = 1;
/// Weight of the newest run: recent runs matter more (kernels and cases
/// change), but one slow run under load must not double an estimate.
const NEWEST: f64 = 0.5;

/// Learned costs by cell name.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Costs {
    cells: BTreeMap<String, Cost>,
}

/// The default place: beside the matrix report.
pub fn default_path(out: &Path) -> PathBuf {
    out.join("costs.json")
}

impl Costs {
    /// Reads `path`; a missing file is empty, a bad one is empty with the
    /// reason (for a note).
    pub fn load(path: &Path) -> (Costs, Option<String>) {
        let text = match std::fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return (Costs::default(), None),
            Err(e) => {
                return (
                    Costs::default(),
                    Some(format!("{}: {e}; costs not used", path.display())),
                )
            }
        };
        match serde_json::from_str::<File>(&text) {
            Ok(f) if f.version == VERSION => (Costs { cells: f.cells }, None),
            Ok(f) => (
                Costs::default(),
                Some(format!(
                    "{}: version {} (expected {VERSION}); costs not used",
                    path.display(),
                    f.version
                )),
            ),
            Err(e) => (
                Costs::default(),
                Some(format!("{}: {e}; costs not used", path.display())),
            ),
        }
    }

    /// Writes the costs to `path` (temp file + rename).
    pub fn save(&self, path: &Path) -> std::io::Result<()> {
        let f = File {
            version: VERSION,
            cells: self.cells.clone(),
        };
        let text = serde_json::to_string_pretty(&f).map_err(std::io::Error::other)? + "\n";
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let tmp = path.with_extension("json.tmp");
        std::fs::write(&tmp, text)?;
        std::fs::rename(&tmp, path)
    }

    /// What was learned about `cell`.
    pub fn get(&self, cell: &str) -> Option<&Cost> {
        self.cells.get(cell)
    }

    /// Whether nothing was learned.
    pub fn is_empty(&self) -> bool {
        self.cells.is_empty()
    }

    /// Adds one run of `cell` (smoothed into what was there).
    pub fn record(&mut self, cell: &str, wall: Duration, cpu: Option<Duration>) {
        let (w, c) = (wall.as_secs_f64(), cpu.map(|c| c.as_secs_f64()));
        let mix = |old: f64, new: f64| old * (1.0 - NEWEST) + new * NEWEST;
        let e = self.cells.entry(cell.to_string()).or_insert(Cost {
            wall_s: w,
            cpu_s: c,
            runs: 0,
        });
        if e.runs > 0 {
            e.wall_s = mix(e.wall_s, w);
            e.cpu_s = match (e.cpu_s, c) {
                (Some(o), Some(n)) => Some(mix(o, n)),
                (o, n) => n.or(o),
            };
        }
        e.runs = e.runs.saturating_add(1);
    }

    /// Estimated seconds for each of `cells` (by name): learned, else the
    /// declared cost scaled by the learned/declared ratio of the cells
    /// that have both (so the two kinds of figure can be compared), else
    /// the declared cost itself.
    pub fn estimates(&self, cells: &[(&str, u64)]) -> Vec<f64> {
        let (mut learned, mut declared) = (0.0, 0.0);
        for (name, d) in cells {
            if let Some(c) = self.get(name) {
                learned += c.wall_s;
                declared += *d as f64;
            }
        }
        let scale = if declared > 0.0 {
            learned / declared
        } else {
            1.0
        };
        cells
            .iter()
            .map(|(name, d)| self.get(name).map_or(*d as f64 * scale, |c| c.wall_s))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(x: f64) -> Duration {
        Duration::from_secs_f64(x)
    }

    #[test]
    fn runs_are_smoothed_and_demand_is_cpu_per_wall() {
        let mut c = Costs::default();
        c.record("k/t/futex", s(40.0), Some(s(30.0)));
        assert_eq!(c.get("k/t/futex").unwrap().runs, 1);
        assert_eq!(c.get("k/t/futex").unwrap().demand(), Some(0.75));
        c.record("k/t/futex", s(20.0), Some(s(20.0)));
        let got = *c.get("k/t/futex").unwrap();
        assert_eq!((got.wall_s, got.cpu_s, got.runs), (30.0, Some(25.0), 2));
        // A run without a CPU figure keeps the old one.
        c.record("k/t/futex", s(30.0), None);
        assert_eq!(c.get("k/t/futex").unwrap().cpu_s, Some(25.0));
        c.record("k/t/smoke", s(10.0), None);
        assert_eq!(c.get("k/t/smoke").unwrap().demand(), None);
    }

    #[test]
    fn estimates_scale_declared_costs_to_learned_seconds() {
        let mut c = Costs::default();
        c.record("a", s(60.0), None);
        c.record("b", s(20.0), None);
        // a and b: declared 4 and 4 -> 80 s learned: 10 s per unit.
        let e = c.estimates(&[("a", 4), ("b", 4), ("new", 3)]);
        assert_eq!(e, vec![60.0, 20.0, 30.0]);
        // Nothing learned: the declared costs as they are.
        assert_eq!(
            Costs::default().estimates(&[("x", 2), ("y", 5)]),
            vec![2.0, 5.0]
        );
    }

    #[test]
    fn the_file_round_trips_and_a_bad_one_is_empty_with_a_reason() {
        let d = tempfile::tempdir().unwrap();
        let p = default_path(d.path());
        assert_eq!(Costs::load(&p), (Costs::default(), None), "missing: empty");
        let mut c = Costs::default();
        c.record("k/1n2c/smoke", s(7.5), Some(s(6.0)));
        c.save(&p).unwrap();
        assert_eq!(Costs::load(&p), (c, None));
        assert!(!p.with_extension("json.tmp").exists());

        std::fs::write(&p, "{not json").unwrap();
        let (c, why) = Costs::load(&p);
        assert!(c.is_empty());
        assert!(why.unwrap().contains("costs not used"));
        std::fs::write(&p, r#"{"version": 9, "cells": {}}"#).unwrap();
        assert!(Costs::load(&p).1.unwrap().contains("version 9"));
    }
}

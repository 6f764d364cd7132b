//! Which cells of a [`Matrix`] this invocation runs: name filters, the
//! cells to rerun, and a deterministic shard (greedy longest-processing-
//! time on [`Matrix::cost`]).

use super::{glob, Matrix};
use crate::costs::Costs;
use std::collections::BTreeSet;

/// Cell filters from the command line (globs; comma-separated lists allowed).
#[derive(Debug, Clone, Default)]
pub struct Filters {
    /// Kernel name globs.
    pub kernel: Vec<String>,
    /// Topology name globs.
    pub topology: Vec<String>,
    /// Suite name globs.
    pub suite: Vec<String>,
    /// Only these cell names (`--rerun-failed`).
    pub only: Option<BTreeSet<String>>,
}

/// Indices into `m.cells` that pass the filters, in matrix order.
pub fn select(m: &Matrix, f: &Filters) -> Vec<usize> {
    m.cells
        .iter()
        .enumerate()
        .filter(|(_, c)| {
            glob::any(&f.kernel, &m.kernels[c.kernel].name)
                && glob::any(&f.topology, &m.topologies[c.topology].name)
                && glob::any(&f.suite, &m.suites[c.suite].name)
                && f.only.as_ref().is_none_or(|o| o.contains(&c.name))
        })
        .map(|(i, _)| i)
        .collect()
}

/// `I/N` with 1 <= I <= N (`--shard`'s value, parsed by clap at the edge).
pub fn parse_shard(s: &str) -> Result<(usize, usize), String> {
    let bad = || "expected I/N with 1 <= I <= N, e.g. 2/4".to_string();
    let (i, n) = s.split_once('/').ok_or_else(bad)?;
    let (i, n): (usize, usize) = (
        i.trim().parse().map_err(|_| bad())?,
        n.trim().parse().map_err(|_| bad())?,
    );
    if i == 0 || n == 0 || i > n {
        return Err(bad());
    }
    Ok((i, n))
}

/// Splits `cells` into `n` shards by their declared [`Matrix::cost`]:
/// see [`shards_by`].
pub fn shards(m: &Matrix, cells: &[usize], n: usize) -> Vec<Vec<usize>> {
    shards_by(m, cells, n, &Costs::default())
}

/// Splits `cells` into `n` shards: cells by estimated seconds
/// ([`Costs::estimates`]: learned, else declared cost scaled), largest
/// first (ties by name), each to the shard with the least so far (ties:
/// lowest index). Each shard keeps matrix order. Deterministic for the
/// same `costs` (so every shard of a CI run must read the same file).
pub fn shards_by(m: &Matrix, cells: &[usize], n: usize, costs: &Costs) -> Vec<Vec<usize>> {
    let n = n.max(1);
    let est = estimates(m, cells, costs);
    let mut order: Vec<usize> = (0..cells.len()).collect();
    order.sort_by(|&a, &b| {
        est[b]
            .total_cmp(&est[a])
            .then_with(|| m.cells[cells[a]].name.cmp(&m.cells[cells[b]].name))
    });
    let mut load = vec![0f64; n];
    let mut out = vec![Vec::new(); n];
    for i in order {
        let k = (0..n)
            .min_by(|&x, &y| load[x].total_cmp(&load[y]).then(x.cmp(&y)))
            .unwrap_or(0);
        load[k] += est[i];
        out[k].push(cells[i]);
    }
    for s in &mut out {
        s.sort_unstable();
    }
    out
}

/// Estimated seconds of each of `cells` (see [`Costs::estimates`]).
pub fn estimates(m: &Matrix, cells: &[usize], costs: &Costs) -> Vec<f64> {
    let named: Vec<(&str, u64)> = cells
        .iter()
        .map(|&c| (m.cells[c].name.as_str(), m.cost(&m.cells[c])))
        .collect();
    costs.estimates(&named)
}

/// The `--list --json` document: every selected cell with its shard, and
/// per shard the `--shard` argument and cell names (for a CI job matrix).
pub fn list_json(m: &Matrix, cells: &[usize], n: usize) -> serde_json::Value {
    list_json_by(m, cells, n, &Costs::default())
}

/// [`list_json`] with shards balanced by `costs` ([`shards_by`]).
pub fn list_json_by(m: &Matrix, cells: &[usize], n: usize, costs: &Costs) -> serde_json::Value {
    let sh = shards_by(m, cells, n, costs);
    let shard_of = |c: usize| sh.iter().position(|s| s.contains(&c)).map_or(0, |i| i + 1);
    let cell_json = |&c: &usize| {
        let cell = &m.cells[c];
        let k = &m.kernels[cell.kernel];
        let t = &m.topologies[cell.topology];
        serde_json::json!({
            "name": cell.name,
            "kernel": k.name,
            "kernel_spec": k.spec_text,
            "arch": k.arch.name(),
            "expect": k.expect.encode(),
            "topology": t.name,
            "vcpus": t.topology.cpus(),
            "mem_mib": t.topology.mem_mib(),
            "suite": m.suites[cell.suite].name,
            "cost": m.cost(cell),
            "shard": format!("{}/{n}", shard_of(c)),
            "shares": cell.shares.iter().map(|s| s.to_string()).collect::<Vec<_>>(),
            "artifacts": cell.artifacts,
        })
    };
    serde_json::json!({
        "matrix": m.path.display().to_string(),
        "shards": sh.iter().enumerate().map(|(i, s)| serde_json::json!({
            "shard": format!("{}/{n}", i + 1),
            "cost": s.iter().map(|&c| m.cost(&m.cells[c])).sum::<u64>(),
            "cells": s.iter().map(|&c| m.cells[c].name.clone()).collect::<Vec<_>>(),
        })).collect::<Vec<_>>(),
        "cells": cells.iter().map(cell_json).collect::<Vec<_>>(),
    })
}

/// A cell's shares for `--list`: `HOST:GUEST:ro|rw`, and `no artifacts`
/// when its artifacts share is off; empty for the default.
pub fn shares_text(cell: &super::Cell) -> String {
    let mut v: Vec<String> = cell.shares.iter().map(|s| s.to_string()).collect();
    if !cell.artifacts {
        v.push("no artifacts".into());
    }
    v.join(", ")
}

/// The `--list` table for humans (a `shares` column when a cell has any
/// besides the default artifacts share).
pub fn list_text(m: &Matrix, cells: &[usize], n: usize) -> String {
    list_shard_text(m, cells, n, None, &Costs::default())
}

/// [`list_text`] with only the cells of shard `only` (1-based) listed,
/// their shard numbers as in the whole listing.
pub fn list_shard_text(
    m: &Matrix,
    cells: &[usize],
    n: usize,
    only: Option<usize>,
    costs: &Costs,
) -> String {
    let sh = shards_by(m, cells, n, costs);
    let listed: Vec<usize> = match only {
        Some(i) => cells
            .iter()
            .copied()
            .filter(|c| sh.get(i - 1).is_some_and(|s| s.contains(c)))
            .collect(),
        None => cells.to_vec(),
    };
    let cells = &listed[..];
    let with_shares = cells.iter().any(|&c| !shares_text(&m.cells[c]).is_empty());
    let mut out = String::new();
    let w = cells
        .iter()
        .map(|&c| m.cells[c].name.len())
        .max()
        .unwrap_or(4)
        .max(4);
    let ew = if with_shares {
        cells
            .iter()
            .map(|&c| m.kernels[m.cells[c].kernel].expect.encode().len())
            .max()
            .unwrap_or(6)
            .max(6)
    } else {
        0
    };
    let head = format!(
        "{:<w$}  {:>5}  {:>7}  {:>4}  {:>5}  {:<ew$}",
        "cell", "vcpus", "mem", "cost", "shard", "expect"
    );
    if with_shares {
        out.push_str(&format!("{head}  shares\n"));
    } else {
        out.push_str(&format!("{}\n", head.trim_end()));
    }
    for &c in cells {
        let cell = &m.cells[c];
        let t = &m.topologies[cell.topology].topology;
        let shard = sh.iter().position(|s| s.contains(&c)).map_or(0, |i| i + 1);
        let line = format!(
            "{:<w$}  {:>5}  {:>6}M  {:>4}  {:>5}  {:<ew$}  {}",
            cell.name,
            t.cpus(),
            t.mem_mib(),
            m.cost(cell),
            format!("{shard}/{n}"),
            m.kernels[cell.kernel].expect.encode(),
            shares_text(cell)
        );
        out.push_str(line.trim_end());
        out.push('\n');
    }
    match only {
        Some(i) => out.push_str(&format!("{} cells (shard {i}/{n})\n", cells.len())),
        None => out.push_str(&format!("{} cells\n", cells.len())),
    }
    out
}

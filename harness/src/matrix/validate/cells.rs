//! `cells:`: the product of kernels x topologies x the chosen suites,
//! less `exclude:`, plus `include:`, each cell with the top-level settings.

use super::{rule_matches, Axes, Ctx};
use crate::host::AccelChoice;
use crate::matrix::locate;
use crate::matrix::model::Cell;
use crate::matrix::schema::RawCells;
use crate::matrix::MatrixError;
use crate::share::ShareSpec;

/// What every cell starts with before `overrides:`.
pub(in crate::matrix) struct CellDefaults {
    /// The top-level `shares:`.
    pub(in crate::matrix) shares: Vec<ShareSpec>,
    /// The top-level `artifacts:` (default true).
    pub(in crate::matrix) artifacts: bool,
}

/// A cell its kernel's architecture cannot run: one kselftest suite or
/// an offline node on arm64. Named with the kernel, topology and suite,
/// and how to leave it out.
fn refuse_on_arch(
    cx: &Ctx,
    k: &crate::matrix::model::Kernel,
    t: &crate::matrix::model::NamedTopology,
    s: &crate::matrix::model::Suite,
) -> Result<(), MatrixError> {
    let why = crate::planner::arch_topology_refusal(k.arch, &t.topology);
    match why {
        Some(why) => Err(cx.err(
            locate::section(cx.text, "cells"),
            format!(
                "cell {}/{}/{}: kernel {:?} is {}: {why}; leave the cell out (cells.exclude)",
                k.name, t.name, s.name, k.name, k.arch
            ),
        )),
        None => Ok(()),
    }
}

/// Validates `cells:` and expands it; `default_product` are the suites of
/// the product when `cells.suites` is not given. No cell at all is an error.
pub(in crate::matrix) fn cells(
    cx: &Ctx,
    raw: &RawCells,
    axes: &Axes,
    default_product: &[usize],
    defaults: &CellDefaults,
) -> Result<Vec<Cell>, MatrixError> {
    let chosen = product_suites(cx, raw, axes, default_product)?;
    for (key, rules) in [("exclude", &raw.exclude), ("include", &raw.include)] {
        for (i, r) in rules.iter().enumerate() {
            if let Some((what, p, known)) = axes.unmatched(r) {
                return Err(cx.err(
                    locate::nth(cx.text, "cells", Some(key), i),
                    format!(
                        "cells.{key}[{i}]: {what} {p:?} matches no {what} (known: {})",
                        known.join(", ")
                    ),
                ));
            }
        }
    }
    let mut cells = Vec::new();
    for (ki, k) in axes.kernels.iter().enumerate() {
        for (ti, t) in axes.topologies.iter().enumerate() {
            for (si, s) in axes.suites.iter().enumerate() {
                let (kn, tn, sn) = (&k.name, &t.name, &s.name);
                let in_product = chosen.contains(&si)
                    && !raw.exclude.iter().any(|r| rule_matches(r, kn, tn, sn));
                let included = raw.include.iter().any(|r| rule_matches(r, kn, tn, sn));
                if in_product || included {
                    refuse_on_arch(cx, k, t, s)?;
                    cells.push(Cell {
                        name: format!("{kn}/{tn}/{sn}"),
                        kernel: ki,
                        topology: ti,
                        suite: si,
                        accel: AccelChoice::Auto,
                        timeout_scale: 1.0,
                        cmdline: vec![],
                        shares: defaults.shares.clone(),
                        artifacts: defaults.artifacts,
                        qemu_args: vec![],
                    });
                }
            }
        }
    }
    if cells.is_empty() {
        return Err(cx.err(
            locate::section(cx.text, "cells"),
            "the matrix has no cells (every combination is excluded)".into(),
        ));
    }
    Ok(cells)
}

/// Indices of `cells.suites` (each must name a suite), else the default.
fn product_suites(
    cx: &Ctx,
    raw: &RawCells,
    axes: &Axes,
    default_product: &[usize],
) -> Result<Vec<usize>, MatrixError> {
    let Some(names) = &raw.suites else {
        return Ok(default_product.to_vec());
    };
    let mut v = Vec::new();
    for n in names {
        let Some(i) = axes.suites.iter().position(|s| &s.name == n) else {
            return Err(cx.err(
                locate::section(cx.text, "cells"),
                format!(
                    "cells.suites: unknown suite {n:?}; expected one of {}",
                    axes.suites
                        .iter()
                        .map(|s| s.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            ));
        };
        v.push(i);
    }
    Ok(v)
}

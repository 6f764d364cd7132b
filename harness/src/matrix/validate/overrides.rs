//! `overrides:`: per-cell settings applied in order to the cells their
//! globs match (later entries win; every key replaces, none adds).

use super::shares::share_list;
use super::{rule_matches, Axes, Ctx};
use crate::host::AccelChoice;
use crate::matrix::locate;
use crate::matrix::model::Cell;
use crate::matrix::schema::{RawOverride, RawRule};
use crate::matrix::MatrixError;

/// Validates `overrides:` and applies them to `cells`, in order.
pub(in crate::matrix) fn overrides(
    cx: &Ctx,
    raw: &[RawOverride],
    axes: &Axes,
    mut cells: Vec<Cell>,
) -> Result<Vec<Cell>, MatrixError> {
    for (i, o) in raw.iter().enumerate() {
        let pos = locate::nth(cx.text, "overrides", None, i);
        let accel = match o.accel.as_deref() {
            None => None,
            Some("auto") => Some(AccelChoice::Auto),
            Some("kvm") => Some(AccelChoice::Kvm),
            Some("tcg") => Some(AccelChoice::Tcg),
            Some(other) => {
                return Err(cx.err(
                    pos,
                    format!("overrides[{i}]: accel {other:?}: expected auto, kvm or tcg"),
                ))
            }
        };
        if let Some(s) = o.timeout_scale {
            if !(s.is_finite() && s > 0.0 && s <= 100.0) {
                return Err(cx.err(
                    pos,
                    format!("overrides[{i}]: timeout_scale {s}: expected a number in (0, 100]"),
                ));
            }
        }
        let o_shares = match &o.shares {
            Some(list) => Some(share_list(
                cx,
                list,
                &format!("overrides[{i}].shares"),
                pos,
                locate::nth(cx.text, "overrides", None, i + 1).map(|(line, _)| line),
            )?),
            None => None,
        };
        if let Some(a) = o
            .qemu_args
            .as_ref()
            .and_then(|a| a.iter().find(|w| w.is_empty()))
        {
            return Err(cx.err(
                pos,
                format!("overrides[{i}]: qemu_args: {a:?}: an empty word"),
            ));
        }
        let rule = RawRule {
            kernel: o.kernel.clone(),
            topology: o.topology.clone(),
            suite: o.suite.clone(),
        };
        if let Some((what, p, known)) = axes.unmatched(&rule) {
            return Err(cx.err(
                pos,
                format!(
                    "overrides[{i}]: {what} {p:?} matches no {what} (known: {})",
                    known.join(", ")
                ),
            ));
        }
        for c in &mut cells {
            let (kn, tn, sn) = (
                &axes.kernels[c.kernel].name,
                &axes.topologies[c.topology].name,
                &axes.suites[c.suite].name,
            );
            if !rule_matches(&rule, kn, tn, sn) {
                continue;
            }
            if let Some(a) = accel {
                c.accel = a;
            }
            if let Some(s) = o.timeout_scale {
                c.timeout_scale = s;
            }
            if let Some(cmd) = &o.cmdline {
                c.cmdline = cmd.split_whitespace().map(String::from).collect();
            }
            // Replaced, not added to: like every override key, and `[]`
            // can then take the top-level shares away.
            if let Some(s) = &o_shares {
                c.shares = s.clone();
            }
            if let Some(a) = o.artifacts {
                c.artifacts = a;
            }
            if let Some(q) = &o.qemu_args {
                c.qemu_args = q.clone();
            }
        }
    }
    Ok(cells)
}

//! `shares:` lists (top level and per override): share syntax and one
//! share per guest path. Whether a host directory exists is the run's
//! business (`ShareSpec::resolve`), so `--list` works before it does.

use super::Ctx;
use crate::matrix::locate::{self, Pos};
use crate::matrix::MatrixError;
use crate::share::ShareSpec;

/// Validates the top-level `shares:`, every cell's unless overridden.
pub(in crate::matrix) fn shares(cx: &Ctx, list: &[String]) -> Result<Vec<ShareSpec>, MatrixError> {
    share_list(cx, list, "shares", locate::section(cx.text, "shares"), None)
}

/// A `shares:` list (`what` names it in messages; `at` is where the list
/// starts and `until` the line it ends before, for positions). Relative
/// host paths are taken from the matrix file's directory.
pub(super) fn share_list(
    cx: &Ctx,
    list: &[String],
    what: &str,
    at: Option<Pos>,
    until: Option<usize>,
) -> Result<Vec<ShareSpec>, MatrixError> {
    let mut out: Vec<ShareSpec> = Vec::new();
    for (j, item) in list.iter().enumerate() {
        let pos = || {
            // Equal items before this one are earlier occurrences.
            let occurrence = list[..j].iter().filter(|o| *o == item).count();
            at.and_then(|(line, _)| locate::scalar(cx.text, line, until, item, occurrence))
                .or(at)
        };
        let mut spec =
            ShareSpec::parse(item).map_err(|e| cx.err(pos(), format!("{what}[{j}]: {e}")))?;
        if spec.host.is_relative() {
            spec.host = cx.dir().join(&spec.host);
        }
        if let Some(prev) = out.iter().find(|s| s.guest == spec.guest) {
            return Err(cx.err(
                pos(),
                format!(
                    "{what}[{j}]: guest path {} is also used by {}; expected one share per guest path",
                    spec.guest,
                    prev.host.display()
                ),
            ));
        }
        out.push(spec);
    }
    Ok(out)
}

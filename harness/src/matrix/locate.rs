//! Finds where a validated item sits in the YAML text, so that validation
//! errors (which serde cannot place) still point at a line and column.
//! Block-style YAML as `matrix.yaml` is written; `None` when not found.
//! Not a YAML parser's spans: those place a list entry at its content,
//! not at its `- ` (ARCHITECTURE.md, "Not a dependency").

/// 1-based line and column.
pub type Pos = (usize, usize);

fn strip_item(line: &str) -> (usize, &str) {
    let indent = line.len() - line.trim_start().len();
    let t = line.trim_start();
    match t.strip_prefix("- ") {
        Some(rest) => {
            let extra = t.len() - rest.trim_start().len();
            (indent + extra, rest.trim_start())
        }
        None => (indent, t),
    }
}

fn unquote(v: &str) -> &str {
    let v = v.split(" #").next().unwrap_or(v).trim();
    v.trim_matches(|c| c == '"' || c == '\'')
}

/// The top-level `section:` key.
pub fn section(text: &str, section: &str) -> Option<Pos> {
    text.lines()
        .position(|l| l.starts_with(&format!("{section}:")))
        .map(|i| (i + 1, 1))
}

/// The `name: item` entry of the list under `section`, and optionally a
/// `field:` key of that entry (the first occurrence after the name, before
/// the next entry of the same list).
pub fn item(text: &str, sect: &str, item: &str, field: Option<&str>) -> Option<Pos> {
    let lines: Vec<&str> = text.lines().collect();
    let start = section(text, sect)?.0; // 1-based line of the section = index of the next
    let mut found: Option<(usize, usize)> = None; // (index, column of `name`)
    for (i, l) in lines.iter().enumerate().skip(start) {
        if top_level(l) {
            break;
        }
        let (col, t) = strip_item(l);
        if let Some(v) = t.strip_prefix("name:") {
            if unquote(v) == item {
                found = Some((i, col));
                break;
            }
        }
        // Flow style: `- {name: x, ...}`.
        if let Some(p) = l.find("name:") {
            if l[p + 5..].split([',', '}']).next().map(unquote) == Some(item) && l.contains('{') {
                found = Some((i, p));
                break;
            }
        }
    }
    let (idx, col) = found?;
    let Some(field) = field else {
        return Some((idx + 1, col + 1));
    };
    let key = format!("{field}:");
    for (i, l) in lines.iter().enumerate().skip(idx) {
        if i > idx {
            let (c, t) = strip_item(l);
            let top = !l.is_empty() && !l.starts_with(' ') && !l.starts_with('-');
            if top || (t.starts_with("name:") && c <= col) {
                break;
            }
        }
        if let Some(p) = l.find(&key) {
            let before = l[..p].chars().last();
            if before.is_none_or(|b| " {,-".contains(b)) {
                return Some((i + 1, p + 1));
            }
        }
    }
    Some((idx + 1, col + 1))
}

/// The `index`-th entry (0-based) of the list under `section.key` (e.g.
/// `cells.exclude`), or of the top-level list `section` when `key` is `None`.
pub fn nth(text: &str, sect: &str, key: Option<&str>, index: usize) -> Option<Pos> {
    let lines: Vec<&str> = text.lines().collect();
    let mut i = section(text, sect)?.0;
    if let Some(key) = key {
        let k = format!("{key}:");
        i += lines[i..]
            .iter()
            .position(|l| l.trim_start().starts_with(&k))?
            + 1;
    }
    entry_from(&lines, i, index)
}

/// The `index`-th entry (0-based) of the block list under the key on
/// line `key_line` (1-based), such as one suite's `known_failures:`.
pub fn nth_under(text: &str, key_line: usize, index: usize) -> Option<Pos> {
    let lines: Vec<&str> = text.lines().collect();
    entry_from(&lines, key_line, index)
}

/// The `field:` key of the list entry at `entry` (the `- ` of a block
/// entry or the `{` of a flow one), before the entry's block ends.
pub fn field_in(text: &str, entry: Pos, field: &str) -> Option<Pos> {
    let key = format!("{field}:");
    let (line, col) = entry;
    for (i, l) in text.lines().enumerate().skip(line - 1) {
        let indent = l.len() - l.trim_start().len();
        if i + 1 > line && !l.trim().is_empty() && indent < col {
            break;
        }
        if i + 1 > line && indent + 1 == col && l.trim_start().starts_with('-') {
            break; // the next entry
        }
        let code = l.split(" #").next().unwrap_or(l);
        if let Some(p) = code.find(&key) {
            let before = code[..p].chars().last();
            if before.is_none_or(|b| " {,-".contains(b)) {
                return Some((i + 1, p + 1));
            }
        }
    }
    None
}

/// From line index `i` (0-based) on: the `index`-th `- ` entry of the
/// first list found, until the list's block ends.
fn entry_from(lines: &[&str], i: usize, index: usize) -> Option<Pos> {
    let mut n = 0;
    let mut dash_col = None;
    for (j, l) in lines.iter().enumerate().skip(i) {
        if top_level(l) {
            break;
        }
        let t = l.trim_start();
        let c = l.len() - t.len();
        if t.starts_with("- ") || t == "-" {
            match dash_col {
                None => dash_col = Some(c),
                Some(d) if c < d => break,
                Some(d) if c > d => continue,
                _ => {}
            }
            if n == index {
                return Some((j + 1, c + 1));
            }
            n += 1;
        } else if dash_col.is_some_and(|d| c < d && !t.is_empty() && !t.starts_with('#')) {
            break;
        }
    }
    None
}

/// Whether a line starts a new top-level key (ends every block).
fn top_level(l: &str) -> bool {
    !l.is_empty() && !l.starts_with(' ') && !l.starts_with('-') && !l.starts_with('#')
}

/// The `occurrence`-th (0-based) place where `value` stands as a whole
/// scalar (plain or quoted, block or flow style) from line `from` (1-based)
/// on, before line `to` and before the next top-level key. For values
/// serde cannot place, such as the items of a `shares:` list.
pub fn scalar(
    text: &str,
    from: usize,
    to: Option<usize>,
    value: &str,
    occurrence: usize,
) -> Option<Pos> {
    if value.is_empty() {
        return None;
    }
    let mut n = 0;
    for (i, l) in text.lines().enumerate().skip(from.saturating_sub(1)) {
        if to.is_some_and(|t| i + 1 >= t) || (i + 1 > from && top_level(l)) {
            break;
        }
        let code = l.split(" #").next().unwrap_or(l);
        let mut start = 0;
        while let Some(p) = code[start..].find(value).map(|p| p + start) {
            let before = code[..p].chars().last();
            let after = code[p + value.len()..].chars().next();
            if before.is_none_or(|c| " \t[,\"'".contains(c))
                && after.is_none_or(|c| " \t],\"'".contains(c))
            {
                if n == occurrence {
                    return Some((i + 1, p + 1));
                }
                n += 1;
            }
            start = p + value.len();
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    const Y: &str = "kernels:\n  - name: a\n    spec: debian:7.3\n  - name: b\n    spec: x\n    features: {numa: true}\ncells:\n  exclude:\n    - kernel: a\n    - {kernel: b}\n";

    #[test]
    fn finds_items_fields_and_entries() {
        assert_eq!(item(Y, "kernels", "a", None), Some((2, 5)));
        assert_eq!(item(Y, "kernels", "b", Some("spec")), Some((5, 5)));
        assert_eq!(item(Y, "kernels", "a", Some("features")), Some((2, 5)));
        assert_eq!(item(Y, "kernels", "b", Some("numa")), Some((6, 16)));
        assert_eq!(nth(Y, "cells", Some("exclude"), 1), Some((10, 5)));
        assert_eq!(nth(Y, "kernels", None, 1), Some((4, 3)));
        assert_eq!(item(Y, "kernels", "zz", None), None);
    }

    #[test]
    fn finds_the_fields_of_one_entry_of_a_nested_list() {
        let y = "suites:\n  - name: a\n    known_failures:\n      - case: x\n        reason: r\n      - case: y\n        message: \"m*\"\n        kernel: [k1, k2]\n  - name: b\n";
        let key = item(y, "suites", "a", Some("known_failures")).unwrap();
        assert_eq!(key, (3, 5));
        let second = nth_under(y, key.0, 1).unwrap();
        assert_eq!(second, (6, 7));
        assert_eq!(field_in(y, second, "message"), Some((7, 9)));
        assert_eq!(field_in(y, second, "kernel"), Some((8, 9)));
        // Not from the entry before or after.
        let first = nth_under(y, key.0, 0).unwrap();
        assert_eq!(field_in(y, first, "message"), None);
        assert_eq!(nth_under(y, key.0, 2), None);
        assert_eq!(scalar(y, second.0, None, "k2", 0), Some((8, 22)));
    }

    #[test]
    fn finds_scalars_in_block_and_flow_lists() {
        let y = "shares:\n  - a:/m/a\n  - \"b\"\n  - a:/m/a # again\noverrides:\n  - {shares: [x, 'a:/m/a']}\n";
        assert_eq!(scalar(y, 1, None, "a:/m/a", 0), Some((2, 5)));
        assert_eq!(scalar(y, 1, None, "b", 0), Some((3, 6)));
        assert_eq!(scalar(y, 1, None, "a:/m/a", 1), Some((4, 5)));
        // Not past the next top-level key, not inside another scalar.
        assert_eq!(scalar(y, 1, None, "a:/m/a", 2), None);
        assert_eq!(scalar(y, 1, None, "a", 0), None);
        assert_eq!(scalar(y, 6, None, "x", 0), Some((6, 15)));
        assert_eq!(scalar(y, 6, None, "a:/m/a", 0), Some((6, 19)));
        assert_eq!(scalar(y, 6, Some(6), "x", 0), None);
    }
}

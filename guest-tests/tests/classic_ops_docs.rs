//! The classic-operation binaries against their documentation: each one's
//! `//!` case list is exactly what `--list` prints, and section 8 of
//! `docs/futex-abi.md` cites every case of them and no case they lack (no
//! table row without a case). Quick tier, no futex call.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

const BINARIES: &[&str] = &[
    "futex-ops",
    "futex-wake",
    "futex-requeue",
    "futex-pi",
    "futex-robust",
];

fn binary_path(name: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_BIN_EXE_futex-ops"))
        .parent()
        .expect("a directory")
        .join(name)
}

/// The cases `binary --list` prints.
fn listed(binary: &str) -> Vec<String> {
    let o = Command::new(binary_path(binary))
        .arg("--list")
        .output()
        .unwrap();
    assert!(o.status.success(), "{binary} --list: {:?}", o.status);
    String::from_utf8(o.stdout)
        .unwrap()
        .lines()
        .map(String::from)
        .collect()
}

/// The `//! - \`case\`: ...` names of a binary's module doc, and the N of
/// its `//! Cases (N):` line.
fn documented(binary: &str) -> (Vec<String>, usize) {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("src/bin/{binary}.rs"));
    let text = std::fs::read_to_string(src).unwrap();
    let names = text
        .lines()
        .filter_map(|l| l.strip_prefix("//! - `"))
        .filter_map(|l| l.split_once('`'))
        .map(|(n, _)| n.to_string())
        .collect();
    let count = text
        .lines()
        .find_map(|l| l.strip_prefix("//! Cases ("))
        .and_then(|l| l.split_once(')'))
        .and_then(|(n, _)| n.parse().ok())
        .unwrap_or_else(|| panic!("{binary}: no `//! Cases (N):` line"));
    (names, count)
}

/// `binary/case` citations of the classic-operation binaries in section 8.
fn cited() -> BTreeSet<String> {
    let page = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/futex-abi.md");
    let page = std::fs::read_to_string(page).unwrap();
    let section = page
        .split_once("\n## 8. The classic operations")
        .expect("section 8")
        .1;
    let section = section.split("\n## ").next().unwrap();
    section
        .split('`')
        .filter(|t| {
            t.split_once('/')
                .is_some_and(|(b, c)| BINARIES.contains(&b) && !c.is_empty())
        })
        .map(String::from)
        .collect()
}

#[test]
fn case_lists_docs_and_binaries_agree() {
    let cited = cited();
    let mut all = BTreeSet::new();
    for b in BINARIES {
        assert!(
            guest_tests::binaries::futex().any(|f| f == *b),
            "{b} is not a futex binary of the registry"
        );
        let cases = listed(b);
        let (doc, count) = documented(b);
        assert_eq!(doc, cases, "{b}: the `//!` list against --list");
        assert_eq!(count, cases.len(), "{b}: `Cases ({count}):`");
        all.extend(cases.iter().map(|c| format!("{b}/{c}")));
    }
    let undocumented: Vec<_> = all.difference(&cited).collect();
    let unknown: Vec<_> = cited.difference(&all).collect();
    assert!(
        undocumented.is_empty() && unknown.is_empty(),
        "docs/futex-abi.md section 8: cases without a row {undocumented:?}; rows citing no case {unknown:?}"
    );
}

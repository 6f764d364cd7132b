//! Citations of the futex ABI page: every file of the repository that names
//! it names it by its path, `docs/futex-abi.md` (the page lives in the
//! repository, nothing may point at a copy elsewhere), and every section
//! number it cites ("section 4", "sections 1, 2 and 4", "section 7 of ...")
//! is a `## N.` heading of the page. Quick tier.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// The page, by its path from the repository root.
const PAGE: &str = "docs/futex-abi.md";

/// The page's file name; a mention of it must be preceded by `docs/`.
/// (Built from [`PAGE`] so this file holds no bare mention itself.)
fn name() -> &'static str {
    PAGE.strip_prefix("docs/").unwrap()
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .into()
}

/// Every file under `dir` but build output and git's own.
fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        let base = p.file_name().unwrap().to_str().unwrap_or("");
        if p.is_dir() {
            if base != "target" && base != ".git" {
                files(&p, out);
            }
        } else if p.is_file() {
            out.push(p);
        }
    }
}

/// The numbers of the page's `## N.` headings, in order.
fn sections(page: &str) -> Vec<u32> {
    page.lines()
        .filter_map(|l| l.strip_prefix("## "))
        .filter_map(|h| h.split_once('.'))
        .filter_map(|(n, _)| n.parse().ok())
        .collect()
}

#[derive(Debug, PartialEq)]
enum Tok {
    Word(String),
    Num(u32),
    /// `,` or `&`: continues a list of numbers.
    Comma,
    /// Punctuation that ends a sentence or a parenthesis.
    Stop,
}

/// Comment leaders removed at the start of each line, so a citation
/// wrapped over two comment lines still reads as one.
fn strip_leaders(text: &str) -> String {
    text.lines()
        .map(|l| {
            let t = l.trim_start();
            ["//!", "///", "//", "#", "*"]
                .iter()
                .find_map(|p| t.strip_prefix(p))
                .unwrap_or(t)
        })
        .collect::<Vec<_>>()
        .join(" ")
}

fn tokens(text: &str) -> Vec<Tok> {
    let mut out = Vec::new();
    let mut word = String::new();
    let flush = |word: &mut String, out: &mut Vec<Tok>| {
        if !word.is_empty() {
            out.push(match word.parse() {
                Ok(n) if word.bytes().all(|b| b.is_ascii_digit()) => Tok::Num(n),
                _ => Tok::Word(word.to_lowercase()),
            });
            word.clear();
        }
    };
    for c in strip_leaders(text).chars() {
        match c {
            c if c.is_alphanumeric() || c == '§' || c == '-' || c == '_' => word.push(c),
            ',' | '&' => {
                flush(&mut word, &mut out);
                out.push(Tok::Comma);
            }
            '.' | ';' | ':' | '(' | ')' | '[' | ']' | '!' | '?' => {
                flush(&mut word, &mut out);
                out.push(Tok::Stop);
            }
            // Whitespace, backticks, quotes: separators only.
            _ => flush(&mut word, &mut out),
        }
    }
    flush(&mut word, &mut out);
    out
}

fn is_word(t: Option<&Tok>, words: &[&str]) -> bool {
    matches!(t, Some(Tok::Word(w)) if words.contains(&w.as_str()))
}

const SECTION: &[&str] = &["section", "sections", "§"];

/// A list of numbers from `ts[start]` on: `N`, `N, M and K`, `N or M`.
/// Returns them and the index just after the last one.
fn number_list(ts: &[Tok], start: usize) -> (Vec<u32>, usize) {
    let mut nums = Vec::new();
    let mut i = start;
    while let Some(Tok::Num(n)) = ts.get(i) {
        nums.push(*n);
        let mut j = i + 1;
        while matches!(ts.get(j), Some(Tok::Comma)) || is_word(ts.get(j), &["and", "or"]) {
            j += 1;
        }
        if !matches!(ts.get(j), Some(Tok::Num(_))) {
            return (nums, i + 1);
        }
        i = j;
    }
    (nums, i)
}

/// `section N`, `sections N, M and K` at the start of `ts`.
fn numbers_after_section(ts: &[Tok]) -> Vec<u32> {
    if is_word(ts.first(), SECTION) {
        number_list(ts, 1).0
    } else {
        Vec::new()
    }
}

/// `section N of` / `sections N and M in` read backwards from just before
/// the path (`rev` is the text before it, tokens reversed).
fn numbers_before(rev: &[Tok]) -> Vec<u32> {
    if !is_word(rev.first(), &["of", "in"]) {
        return Vec::new();
    }
    let (nums, end) = number_list(rev, 1);
    if is_word(rev.get(end), SECTION) {
        nums
    } else {
        Vec::new()
    }
}

/// A problem with one mention of the page: `(line, what)`.
type Problem = (usize, String);

/// Checks every mention of the page in `text` against the page's sections.
fn check_text(text: &str, have: &BTreeSet<u32>) -> Vec<Problem> {
    let mut problems = Vec::new();
    let name = name();
    for (at, _) in text.match_indices(name) {
        let line = text[..at].matches('\n').count() + 1;
        if !text[..at].ends_with("docs/") {
            problems.push((line, format!("cites {name} without its path, {PAGE}")));
            continue;
        }
        let start = at - "docs/".len();
        let after = &text[at + name.len()..];
        let after = &after[..after
            .char_indices()
            .nth(200)
            .map_or(after.len(), |(i, _)| i)];
        let before = &text[..start];
        let from = before.char_indices().rev().nth(200).map_or(0, |(i, _)| i);
        let mut rev = tokens(&before[from..]);
        rev.reverse();
        for n in numbers_after_section(&tokens(after))
            .into_iter()
            .chain(numbers_before(&rev))
        {
            if !have.contains(&n) {
                problems.push((
                    line,
                    format!("cites section {n}, which {PAGE} does not have"),
                ));
            }
        }
    }
    problems
}

#[test]
fn every_citation_of_the_futex_abi_page_names_its_path_and_an_existing_section() {
    let root = root();
    let page = std::fs::read_to_string(root.join(PAGE)).expect("the page exists");
    let numbered = sections(&page);
    assert_eq!(
        numbered,
        (1..=numbered.len() as u32).collect::<Vec<_>>(),
        "{PAGE}: the `## N.` headings are numbered 1, 2, 3, ... in order"
    );
    let have: BTreeSet<u32> = numbered.into_iter().collect();
    let mut all = Vec::new();
    files(&root, &mut all);
    let mut problems = Vec::new();
    for f in all {
        // Binary files cannot cite anything.
        let Ok(text) = std::fs::read_to_string(&f) else {
            continue;
        };
        let rel = f.strip_prefix(&root).unwrap().display().to_string();
        for (line, what) in check_text(&text, &have) {
            problems.push(format!("{rel}:{line}: {what}"));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// `@` in an example stands for the page's path.
fn cited(example: &str) -> Vec<Problem> {
    let have: BTreeSet<u32> = (1..=7).collect();
    check_text(&example.replace('@', PAGE), &have)
}

#[test]
fn citation_forms_are_read_across_comment_lines() {
    assert!(cited("x (`@` section 3).").is_empty());
    assert!(cited("//! handling (@ sections\n//! 1, 2 and 4). Every").is_empty());
    assert!(cited("# Features (@ section 4).").is_empty());
    assert!(cited("see section 7 of `@`").is_empty());
    assert!(cited("see @, and the 2 others").is_empty());
    assert!(cited("the version table of `@`; 9 rows").is_empty());

    let one = |e: &str| {
        let p = cited(e);
        assert_eq!(p.len(), 1, "{e}: {p:?}");
        p[0].clone()
    };
    assert_eq!(
        one("a\n(@ section 8)").1,
        format!("cites section 8, which {PAGE} does not have")
    );
    assert_eq!(one("//! (`@`\n//! sections 2, 9 and 4)").0, 1);
    assert_eq!(one("see sections 9 and 1 in @").0, 1);
    assert!(one(&format!("see {} section 4", name()))
        .1
        .contains("without its path"));
    assert_eq!(one(&format!("a\nb {}", name())).0, 2);
}

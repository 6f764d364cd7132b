//! KTAP parser (`Documentation/dev-tools/ktap.rst`). Never fails: returns
//! what it understood plus a list of problems. Guest output is untrusted.
//!
//! Nesting is by indentation: any line indented deeper than the current
//! document opens a nested document (2 spaces per level in KTAP, 4 in older
//! KUnit output; both work). A nested document belongs to the result line
//! that follows it at the parent's indentation. Diagnostic lines belong to
//! the result line that follows them at their level; those after a
//! document's last result go to the parent's next result line, or, at the
//! top level, to [`Document::diagnostics`].

use std::borrow::Cow;

/// Deepest nesting kept; deeper lines become diagnostics of the deepest level.
pub const MAX_DEPTH: usize = 16;
/// Lines read at most; the rest of the stream is ignored.
pub const MAX_LINES: usize = 200_000;
/// Bytes kept of one line; the rest of the line is dropped.
pub const MAX_LINE_BYTES: usize = 4096;
/// Problems listed at most; one final entry counts the others.
pub const MAX_PROBLEMS: usize = 100;

/// A KTAP directive after `#` on a result line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Directive {
    /// `# SKIP reason`
    Skip(String),
    /// `# TODO reason`
    Todo(String),
    /// `# XFAIL reason`
    Xfail(String),
    /// `# TIMEOUT reason`
    Timeout(String),
    /// `# ERROR reason`
    Error(String),
}

impl Directive {
    /// The keyword as KTAP spells it (`SKIP`, `TODO`, ...).
    pub fn keyword(&self) -> &'static str {
        match self {
            Directive::Skip(_) => "SKIP",
            Directive::Todo(_) => "TODO",
            Directive::Xfail(_) => "XFAIL",
            Directive::Timeout(_) => "TIMEOUT",
            Directive::Error(_) => "ERROR",
        }
    }

    /// The text after the keyword (may be empty).
    pub fn reason(&self) -> &str {
        match self {
            Directive::Skip(r)
            | Directive::Todo(r)
            | Directive::Xfail(r)
            | Directive::Timeout(r)
            | Directive::Error(r) => r,
        }
    }
}

/// The result on a test line, or `Incomplete` when the stream ended first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TestResult {
    /// `ok`
    Ok,
    /// `not ok`
    NotOk,
    /// Subtest lines were seen but never the result line (stream truncated).
    Incomplete,
}

/// One test (and its subtests).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TestNode {
    /// Number on the result line.
    pub number: u64,
    /// Name on the result line (or from `# Subtest:` when incomplete).
    pub name: String,
    /// ok / not ok / incomplete.
    pub result: TestResult,
    /// Directive, if any.
    pub directive: Option<Directive>,
    /// Diagnostic lines that belong to this test.
    pub diagnostics: Vec<String>,
    /// Nested tests.
    pub subtests: Vec<TestNode>,
    /// Plan of the nested document, if it had one.
    pub subplan: Option<u64>,
}

/// A parsed document.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Document {
    /// `1..N`.
    pub plan: Option<u64>,
    /// Top-level tests.
    pub tests: Vec<TestNode>,
    /// Diagnostics not attached to any test.
    pub diagnostics: Vec<String>,
    /// What was wrong with the input (line numbers are 1-based).
    pub problems: Vec<String>,
}

impl TestNode {
    /// This test's diagnostic lines, then its subtests', depth first.
    pub fn all_diagnostics(&self) -> Vec<&str> {
        let mut out: Vec<&str> = self.diagnostics.iter().map(String::as_str).collect();
        for sub in &self.subtests {
            out.extend(sub.all_diagnostics());
        }
        out
    }
}

impl Document {
    /// Every diagnostic line: the unattached ones, then each test's
    /// ([`TestNode::all_diagnostics`]).
    pub fn all_diagnostics(&self) -> Vec<&str> {
        let mut out: Vec<&str> = self.diagnostics.iter().map(String::as_str).collect();
        for t in &self.tests {
            out.extend(t.all_diagnostics());
        }
        out
    }
}

/// Parses a KTAP stream.
pub fn parse(input: &[u8]) -> Document {
    let mut p = Parser::default();
    let mut line_no = 0;
    // A final newline ends the last line; it does not start another.
    let input = input.strip_suffix(b"\n").unwrap_or(input);
    for raw in input.split(|&b| b == b'\n') {
        line_no += 1;
        if line_no > MAX_LINES {
            p.problem(format!(
                "line {line_no}: more than {MAX_LINES} lines; the rest was ignored"
            ));
            break;
        }
        let text = p.decode(line_no, raw);
        p.line(line_no, &text);
    }
    p.finish(line_no)
}

/// One open document: the top level or a nested one.
#[derive(Default)]
struct Level {
    /// Columns of indentation of this document's lines.
    indent: usize,
    /// Line where it started (for problems).
    start: usize,
    /// From `# Subtest: name`.
    name: Option<String>,
    version_seen: bool,
    plan: Option<u64>,
    tests: Vec<TestNode>,
    /// Diagnostics waiting for the next result line.
    pending: Vec<String>,
    /// A nested document that has ended and waits for its result line here.
    child: Option<Closed>,
}

/// A nested document whose lines have ended.
struct Closed {
    name: Option<String>,
    plan: Option<u64>,
    tests: Vec<TestNode>,
}

impl Level {
    fn next_number(&self) -> u64 {
        self.tests.last().map_or(1, |t| t.number.saturating_add(1))
    }

    fn label(&self) -> String {
        match &self.name {
            Some(n) => format!("`{n}`"),
            None => format!("the subtest starting at line {}", self.start),
        }
    }
}

#[derive(Default)]
struct Parser {
    stack: Vec<Level>,
    problems: Vec<String>,
    dropped_problems: usize,
    depth_reported: bool,
}

/// A parsed `ok`/`not ok` line.
struct ResultLine<'a> {
    ok: bool,
    /// `None` when absent, `Some(None)` when it does not fit in u64.
    number: Option<Option<u64>>,
    name: &'a str,
    directive: Option<Directive>,
    /// Text after `#` that is not a directive.
    comment: Option<String>,
}

impl Parser {
    fn problem(&mut self, msg: String) {
        if self.problems.len() < MAX_PROBLEMS {
            self.problems.push(msg);
        } else {
            self.dropped_problems += 1;
        }
    }

    /// Bytes of one line to text: bounded, lossy, without control characters.
    fn decode(&mut self, line_no: usize, raw: &[u8]) -> String {
        // The serial line may deliver `\r\n` (or `\r\r\n`).
        let mut raw = raw;
        while let [rest @ .., b'\r'] = raw {
            raw = rest;
        }
        if raw.len() > MAX_LINE_BYTES {
            self.problem(format!(
                "line {line_no}: {} bytes long; kept the first {MAX_LINE_BYTES}",
                raw.len()
            ));
            raw = &raw[..MAX_LINE_BYTES];
        }
        let text = String::from_utf8_lossy(raw);
        if let Cow::Owned(_) = text {
            self.problem(format!("line {line_no}: invalid UTF-8"));
        }
        if text.chars().any(|c| c.is_control() && c != '\t') {
            self.problem(format!("line {line_no}: control characters"));
            text.chars()
                .map(|c| {
                    if c.is_control() && c != '\t' {
                        '\u{FFFD}'
                    } else {
                        c
                    }
                })
                .collect()
        } else {
            text.into_owned()
        }
    }

    fn line(&mut self, line_no: usize, text: &str) {
        let text = text.trim_end();
        let content = text.trim_start();
        if content.is_empty() {
            return;
        }
        let indent = text.len() - text.trim_start_matches(' ').len();
        if self.stack.is_empty() {
            self.stack.push(Level {
                indent,
                start: line_no,
                ..Level::default()
            });
        }
        while self.stack.len() > 1 && indent < self.top().indent {
            self.close_top(line_no, false);
        }
        if indent < self.stack[0].indent {
            // The first line was indented more than later ones: be lenient.
            self.stack[0].indent = indent;
        }
        if indent > self.top().indent {
            if self.stack.len() >= MAX_DEPTH {
                if !self.depth_reported {
                    self.depth_reported = true;
                    self.problem(format!(
                        "line {line_no}: nesting deeper than {MAX_DEPTH} levels; kept as diagnostics"
                    ));
                }
                self.top().pending.push(content.to_string());
                return;
            }
            self.finish_child(line_no, false);
            self.stack.push(Level {
                indent,
                start: line_no,
                ..Level::default()
            });
        }
        self.content(line_no, content);
    }

    fn top(&mut self) -> &mut Level {
        self.stack
            .last_mut()
            .expect("the stack is never empty here")
    }

    /// One line at the current level's indentation.
    fn content(&mut self, line_no: usize, content: &str) {
        let is_root = self.stack.len() == 1;
        let first = {
            let top = self.top();
            !top.version_seen && top.plan.is_none() && top.tests.is_empty()
        };
        if let Some(version) = parse_version(content) {
            if first {
                self.top().version_seen = true;
                if !matches!(version, ("KTAP", "1") | ("TAP", "13" | "14")) {
                    self.problem(format!(
                        "line {line_no}: unknown version `{} version {}`",
                        version.0, version.1
                    ));
                }
            } else {
                self.problem(format!("line {line_no}: unexpected version line"));
            }
            return;
        }
        if is_root && first && self.top().pending.is_empty() {
            self.problem(format!(
                "line {line_no}: the stream does not start with a version line"
            ));
        }
        if let Some(plan) = parse_plan(content) {
            match plan {
                Some(_) if self.top().plan.is_some() => {
                    self.problem(format!("line {line_no}: second plan line"));
                }
                Some(n) => self.top().plan = Some(n),
                None => self.problem(format!("line {line_no}: plan count out of range")),
            }
            return;
        }
        if let Some(r) = parse_result(content) {
            self.result(line_no, r);
            return;
        }
        if let Some(diag) = content.strip_prefix('#') {
            let diag = diag.strip_prefix(' ').unwrap_or(diag);
            let top = self.top();
            if let Some(name) = strip_prefix_ci(diag.trim_start(), "Subtest:") {
                if top.name.is_none() && top.tests.is_empty() {
                    top.name = Some(name.trim().to_string());
                    return;
                }
            }
            top.pending.push(diag.to_string());
            return;
        }
        // Not KTAP (a program's stray output, `Bail out!`, console noise):
        // keep it where a human reading the test's diagnostics will see it.
        self.problem(format!(
            "line {line_no}: not a KTAP line: {}",
            snippet(content)
        ));
        self.top().pending.push(content.to_string());
    }

    fn result(&mut self, line_no: usize, r: ResultLine<'_>) {
        let expected = self.top().next_number();
        let number = match r.number {
            None => expected,
            Some(Some(n)) => {
                if n != expected {
                    self.problem(format!(
                        "line {line_no}: test number {n} where {expected} was expected"
                    ));
                }
                n
            }
            Some(None) => {
                self.problem(format!("line {line_no}: test number out of range"));
                expected
            }
        };
        let top = self.top();
        let mut node = TestNode {
            number,
            name: r.name.to_string(),
            result: if r.ok {
                TestResult::Ok
            } else {
                TestResult::NotOk
            },
            directive: r.directive,
            diagnostics: std::mem::take(&mut top.pending),
            subtests: Vec::new(),
            subplan: None,
        };
        if let Some(child) = top.child.take() {
            node.subtests = child.tests;
            node.subplan = child.plan;
            if node.name.is_empty() {
                node.name = child.name.unwrap_or_default();
            }
        }
        node.diagnostics.extend(r.comment);
        top.tests.push(node);
    }

    /// Ends the innermost nested document; it waits for its result line
    /// in the parent. `eof`: the stream ended inside it.
    fn close_top(&mut self, line_no: usize, eof: bool) {
        let Some(mut level) = self.stack.pop() else {
            return;
        };
        // A grandchild still waiting for its result line never gets one.
        self.finish_child_of(&mut level, line_no, eof);
        if let (false, Some(plan)) = (eof, level.plan) {
            if plan != level.tests.len() as u64 {
                self.problem(format!(
                    "line {}: {} planned 1..{plan} but has {} results",
                    level.start,
                    level.label(),
                    level.tests.len()
                ));
            }
        }
        let Some(mut parent) = self.stack.pop() else {
            return;
        };
        self.finish_child_of(&mut parent, line_no, false);
        // Trailing diagnostics of the nested document come before anything
        // the parent prints before the result line.
        parent.pending.extend(level.pending);
        parent.child = Some(Closed {
            name: level.name,
            plan: level.plan,
            tests: level.tests,
        });
        self.stack.push(parent);
    }

    /// The current level's ended child gets no result line.
    fn finish_child(&mut self, line_no: usize, eof: bool) {
        if let Some(mut top) = self.stack.pop() {
            self.finish_child_of(&mut top, line_no, eof);
            self.stack.push(top);
        }
    }

    /// A nested document of `level` that never got its result line becomes
    /// an incomplete test, with the diagnostics printed since it ended.
    fn finish_child_of(&mut self, level: &mut Level, line_no: usize, eof: bool) {
        let Some(child) = level.child.take() else {
            return;
        };
        let node = TestNode {
            number: level.next_number(),
            name: child.name.unwrap_or_default(),
            result: TestResult::Incomplete,
            directive: None,
            diagnostics: std::mem::take(&mut level.pending),
            subtests: child.tests,
            subplan: child.plan,
        };
        let what = if node.name.is_empty() {
            format!("subtest {}", node.number)
        } else {
            format!("`{}`", node.name)
        };
        level.tests.push(node);
        if eof {
            self.problem(format!(
                "line {line_no}: the stream ended before the result line of {what}"
            ));
        } else {
            self.problem(format!("line {line_no}: no result line for {what}"));
        }
    }

    fn finish(mut self, last_line: usize) -> Document {
        if self.stack.is_empty() {
            self.problem("no KTAP output".to_string());
            return self.into_document(Level::default());
        }
        while self.stack.len() > 1 {
            self.close_top(last_line, true);
            self.finish_child(last_line, true);
        }
        self.finish_child(last_line, true);
        let root = self.stack.pop().expect("the root level");
        if let Some(plan) = root.plan {
            if plan != root.tests.len() as u64 {
                self.problem(format!(
                    "plan 1..{plan} but {} top-level results",
                    root.tests.len()
                ));
            }
        }
        self.into_document(root)
    }

    fn into_document(mut self, root: Level) -> Document {
        if self.dropped_problems > 0 {
            self.problems.push(format!(
                "{} more problems not listed",
                self.dropped_problems
            ));
        }
        Document {
            plan: root.plan,
            tests: root.tests,
            diagnostics: root.pending,
            problems: self.problems,
        }
    }
}

/// `KTAP version 1` / `TAP version 13` -> (`KTAP`, `1`).
fn parse_version(content: &str) -> Option<(&'static str, &str)> {
    if let Some(v) = content.strip_prefix("KTAP version ") {
        Some(("KTAP", v.trim()))
    } else {
        content
            .strip_prefix("TAP version ")
            .map(|v| ("TAP", v.trim()))
    }
}

/// `1..N` (optionally followed by a comment) -> `Some(Some(N))`;
/// `Some(None)` when N does not fit in u64.
fn parse_plan(content: &str) -> Option<Option<u64>> {
    let rest = content.strip_prefix("1..")?;
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    let after = &rest[digits..];
    if digits == 0 || !(after.is_empty() || after.starts_with([' ', '\t', '#'])) {
        return None;
    }
    Some(rest[..digits].parse().ok())
}

fn parse_result(content: &str) -> Option<ResultLine<'_>> {
    let (ok, rest) = if let Some(r) = content.strip_prefix("not ok") {
        (false, r)
    } else {
        (true, content.strip_prefix("ok")?)
    };
    if !(rest.is_empty() || rest.starts_with([' ', '\t'])) {
        return None;
    }
    let rest = rest.trim_start();
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    let number = (digits > 0).then(|| rest[..digits].parse().ok());
    let rest = rest[digits..].trim_start();
    // TAP allows `ok 1 - name`.
    let rest = match rest.strip_prefix('-') {
        Some(r) if r.is_empty() || r.starts_with(' ') => r.trim_start(),
        _ => rest,
    };
    let (name, tail) = match rest.split_once('#') {
        Some((name, tail)) => (name.trim(), Some(tail.trim())),
        None => (rest.trim(), None),
    };
    let (directive, comment) = match tail {
        None => (None, None),
        Some(tail) => match parse_directive(tail) {
            Some(d) => (Some(d), None),
            None if tail.is_empty() => (None, None),
            None => (None, Some(tail.to_string())),
        },
    };
    Some(ResultLine {
        ok,
        number,
        name,
        directive,
        comment,
    })
}

fn parse_directive(tail: &str) -> Option<Directive> {
    let (word, reason) = match tail.split_once(char::is_whitespace) {
        Some((w, r)) => (w, r.trim().to_string()),
        None => (tail, String::new()),
    };
    let word = word.to_ascii_uppercase();
    Some(match word.as_str() {
        "SKIP" | "SKIPPED" => Directive::Skip(reason),
        "TODO" => Directive::Todo(reason),
        "XFAIL" => Directive::Xfail(reason),
        "TIMEOUT" => Directive::Timeout(reason),
        "ERROR" => Directive::Error(reason),
        _ => return None,
    })
}

fn strip_prefix_ci<'a>(s: &'a str, prefix: &str) -> Option<&'a str> {
    let head = s.get(..prefix.len())?;
    head.eq_ignore_ascii_case(prefix)
        .then(|| &s[prefix.len()..])
}

/// The start of a line, for problem messages.
fn snippet(s: &str) -> String {
    const MAX: usize = 60;
    match s.char_indices().nth(MAX) {
        Some((i, _)) => format!("{}...", &s[..i]),
        None => s.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fmt::Write;

    /// A compact rendering of a document: one line per test, diagnostics
    /// under it, then leftover diagnostics and problems.
    fn summary(doc: &Document) -> String {
        fn node(out: &mut String, t: &TestNode, depth: usize) {
            let pad = "  ".repeat(depth);
            let result = match t.result {
                TestResult::Ok => "ok",
                TestResult::NotOk => "not ok",
                TestResult::Incomplete => "incomplete",
            };
            let mut line = format!("{pad}{result} {} {}", t.number, t.name);
            if let Some(d) = &t.directive {
                let _ = write!(line, " # {} {}", d.keyword(), d.reason());
            }
            if let Some(p) = t.subplan {
                let _ = write!(line, " [1..{p}]");
            }
            let _ = writeln!(out, "{}", line.trim_end());
            for d in &t.diagnostics {
                let _ = writeln!(out, "{pad}  # {d}");
            }
            for s in &t.subtests {
                node(out, s, depth + 1);
            }
        }
        let mut out = String::new();
        if let Some(p) = doc.plan {
            let _ = writeln!(out, "1..{p}");
        }
        for t in &doc.tests {
            node(&mut out, t, 0);
        }
        for d in &doc.diagnostics {
            let _ = writeln!(out, "# {d}");
        }
        for p in &doc.problems {
            let _ = writeln!(out, "! {p}");
        }
        out
    }

    #[track_caller]
    fn check(input: &str, expected: &str) {
        let got = summary(&parse(input.as_bytes()));
        let expected = unindent(expected);
        assert_eq!(
            got, expected,
            "\n--- input:\n{input}\n--- got:\n{got}\n--- expected:\n{expected}"
        );
    }

    /// Lets the tables indent their expected text like the code around them.
    fn unindent(s: &str) -> String {
        let lines: Vec<&str> = s.lines().skip_while(|l| l.trim().is_empty()).collect();
        let indent = lines
            .iter()
            .filter(|l| !l.trim().is_empty())
            .map(|l| l.len() - l.trim_start().len())
            .min()
            .unwrap_or(0);
        let mut out = String::new();
        for l in lines {
            if l.trim().is_empty() {
                continue;
            }
            out.push_str(&l[indent..]);
            out.push('\n');
        }
        out
    }

    const EXAMPLE: &str = "\
KTAP version 1
1..2
  KTAP version 1
  # Subtest: smoke
  1..2
  ok 1 uname
  # expected 2 got 3
  not ok 2 futex_basic
not ok 1 smoke
  KTAP version 1
  # Subtest: topology
  1..1
  ok 1 nodes # SKIP only one node
ok 2 topology # SKIP reason
";

    #[test]
    fn table() {
        let cases: &[(&str, &str, &str)] = &[
            (
                "the example from the brief",
                EXAMPLE,
                "
                1..2
                not ok 1 smoke [1..2]
                  ok 1 uname
                  not ok 2 futex_basic
                    # expected 2 got 3
                ok 2 topology # SKIP reason [1..1]
                  ok 1 nodes # SKIP only one node
                ",
            ),
            (
                "CRLF line endings",
                "KTAP version 1\r\n1..1\r\nok 1 a # skip why\r\n",
                "
                1..1
                ok 1 a # SKIP why
                ",
            ),
            (
                "directives, any case, TAP dash, missing numbers, comments",
                "TAP version 13\n1..6\nok 1 - a # todo later\nnot ok b # XFAIL known\n\
                 not ok 3 c # Timeout 30s\nnot ok 4 d # error crashed\nok 5 e # took 3 ms\nok\n",
                "
                1..6
                ok 1 a # TODO later
                not ok 2 b # XFAIL known
                not ok 3 c # TIMEOUT 30s
                not ok 4 d # ERROR crashed
                ok 5 e
                  # took 3 ms
                ok 6
                ",
            ),
            (
                "diagnostics after the last result go to the document",
                "KTAP version 1\n1..1\n# before\nok 1 a\n# after\n",
                "
                1..1
                ok 1 a
                  # before
                # after
                ",
            ),
            (
                "trailing diagnostics of a subtest and init's note go to the parent result",
                "KTAP version 1\n1..1\n  KTAP version 1\n  # Subtest: t\n  1..1\n  ok 1 x\n  \
                 # Totals: pass:1\n# t: killed by signal 11\nnot ok 1 t\n",
                "
                1..1
                not ok 1 t [1..1]
                  # Totals: pass:1
                  # t: killed by signal 11
                  ok 1 x
                ",
            ),
            (
                "truncated inside a nested test: every open level is incomplete",
                "KTAP version 1\n1..2\n  KTAP version 1\n  # Subtest: smoke\n  1..3\n  ok 1 uname\n    \
                 KTAP version 1\n    # Subtest: deep\n    1..2\n    ok 1 one\n    # waiting",
                "
                1..2
                incomplete 1 smoke [1..3]
                  ok 1 uname
                  incomplete 2 deep [1..2]
                    # waiting
                    ok 1 one
                ! line 11: the stream ended before the result line of `deep`
                ! line 11: the stream ended before the result line of `smoke`
                ! plan 1..2 but 1 top-level results
                ",
            ),
            (
                "truncated after a subtest ended but before its result line",
                "KTAP version 1\n1..1\n  KTAP version 1\n  # Subtest: s\n  1..1\n  ok 1 x\n# s: timed out\n",
                "
                1..1
                incomplete 1 s [1..1]
                  # s: timed out
                  ok 1 x
                ! line 7: the stream ended before the result line of `s`
                ",
            ),
            (
                "a subtest with no KTAP at all (a binary that printed none)",
                "KTAP version 1\n1..1\n  # Subtest: raw\n  # hello from a program\n  \
                 # that prints no KTAP\nnot ok 1 raw\n",
                "
                1..1
                not ok 1 raw
                  # hello from a program
                  # that prints no KTAP
                ",
            ),
            (
                "four-space indentation (older KUnit)",
                "KTAP version 1\n1..1\n    KTAP version 1\n    # Subtest: k\n    1..1\n    ok 1 x\nok 1 k\n",
                "
                1..1
                ok 1 k [1..1]
                  ok 1 x
                ",
            ),
            (
                "plan mismatch, duplicate and out-of-order numbers",
                "KTAP version 1\n1..2\nok 1 a\nok 1 b\nok 5 c\n",
                "
                1..2
                ok 1 a
                ok 1 b
                ok 5 c
                ! line 4: test number 1 where 2 was expected
                ! line 5: test number 5 where 2 was expected
                ! plan 1..2 but 3 top-level results
                ",
            ),
            (
                "nested plan mismatch",
                "KTAP version 1\n1..1\n  KTAP version 1\n  # Subtest: s\n  1..3\n  ok 1 x\nok 1 s\n",
                "
                1..1
                ok 1 s [1..3]
                  ok 1 x
                ! line 3: `s` planned 1..3 but has 1 results
                ",
            ),
            (
                "absurd numbers",
                "KTAP version 1\n1..99999999999999999999\nok 99999999999999999999 big\n",
                "
                ok 1 big
                ! line 2: plan count out of range
                ! line 3: test number out of range
                ",
            ),
            (
                "garbage lines become diagnostics",
                "KTAP version 1\n1..1\nhello world\nokay then\nok 1 a\n",
                "
                1..1
                ok 1 a
                  # hello world
                  # okay then
                ! line 3: not a KTAP line: hello world
                ! line 4: not a KTAP line: okay then
                ",
            ),
            (
                "no version line, version line in the wrong place, unknown version",
                "1..1\nKTAP version 1\nok 1 a\n  KTAP version 7\n  ok 1 b\nok 2 c\n",
                "
                1..1
                ok 1 a
                ok 2 c
                  ok 1 b
                ! line 1: the stream does not start with a version line
                ! line 2: unexpected version line
                ! line 4: unknown version `KTAP version 7`
                ! plan 1..1 but 2 top-level results
                ",
            ),
            (
                "two nested documents without a result line between them",
                "KTAP version 1\n1..2\n  # Subtest: a\n  ok 1 x\n# between\n  # Subtest: b\n  ok 1 y\nok 2 b\n",
                "
                1..2
                incomplete 1 a
                  # between
                  ok 1 x
                ok 2 b
                  ok 1 y
                ! line 6: no result line for `a`
                ",
            ),
            ("empty input", "", "! no KTAP output"),
            ("only blank lines", "\n\r\n  \n", "! no KTAP output"),
        ];
        for (what, input, expected) in cases {
            eprintln!("case: {what}");
            check(input, expected);
        }
    }

    #[test]
    fn kselftest_output_nested_by_guest_init() {
        check(
            include_str!("../tests/fixtures/ktap/kselftest-futex.ktap"),
            "
            1..2
            not ok 1 futex_requeue [1..2]
              # FAILED: 1 / 2 tests passed.
              # Totals: pass:1 fail:1 xfail:0 xpass:0 skip:0 error:0
              # futex_requeue: exit status 1
              ok 1 global.requeue_single
                # Starting 2 tests from 1 test cases.
                #  RUN           global.requeue_single ...
                #            OK  global.requeue_single
              not ok 2 global.requeue_multiple
                #  RUN           global.requeue_multiple ...
                # futex_requeue.c:101:requeue_multiple:Expected res (9) == 10 (10)
                # requeue_multiple: Test failed
                #          FAIL  global.requeue_multiple
            ok 2 futex_priv_hash [1..1]
              # PASSED: 1 / 1 tests passed.
              # Totals: pass:0 fail:0 xfail:0 xpass:0 skip:1 error:0
              ok 1 global.priv_hash # SKIP Not enough CPUs (4 <= 16)
                # Starting 1 tests from 1 test cases.
                #  RUN           global.priv_hash ...
                #      SKIP      Not enough CPUs (4 <= 16)
                #            OK  global.priv_hash
            ",
        );
    }

    #[test]
    fn invalid_utf8_control_characters_and_long_lines() {
        let mut input = b"KTAP version 1\n1..2\nok 1 caf\xe9\nok 2 \x1b[31mred\x1b[0m\n".to_vec();
        input.extend_from_slice(b"# ");
        input.extend(std::iter::repeat_n(b'x', 5000));
        input.push(b'\n');
        let doc = parse(&input);
        assert_eq!(doc.tests[0].name, "caf\u{FFFD}");
        assert_eq!(doc.tests[1].name, "\u{FFFD}[31mred\u{FFFD}[0m");
        assert_eq!(doc.diagnostics[0].len(), MAX_LINE_BYTES - 2);
        assert_eq!(
            doc.problems,
            [
                "line 3: invalid UTF-8",
                "line 4: control characters",
                "line 5: 5002 bytes long; kept the first 4096",
            ]
        );
    }

    #[test]
    fn pathological_depth_is_capped() {
        let mut input = String::from("KTAP version 1\n1..1\n");
        for depth in 1..40 {
            let _ = writeln!(input, "{}KTAP version 1", "  ".repeat(depth));
        }
        let doc = parse(input.as_bytes());
        let mut depth = 0;
        let mut t = &doc.tests[0];
        while let Some(s) = t.subtests.first() {
            t = s;
            depth += 1;
        }
        assert_eq!(depth, MAX_DEPTH - 2);
        assert!(doc.problems[0].contains("nesting deeper than 16 levels"));
    }

    #[test]
    fn line_and_problem_counts_are_bounded() {
        let input = "x\n".repeat(MAX_LINES + 10);
        let doc = parse(input.as_bytes());
        assert_eq!(doc.problems.len(), MAX_PROBLEMS + 1);
        assert_eq!(
            doc.problems.last().unwrap(),
            // Line 1 has two problems, each other line one, plus the cut.
            &format!("{} more problems not listed", MAX_LINES + 2 - MAX_PROBLEMS)
        );
        assert_eq!(doc.diagnostics.len(), MAX_LINES);
    }

    proptest::proptest! {
        #[test]
        fn never_panics_on_bytes(input in proptest::collection::vec(proptest::num::u8::ANY, 0..2048)) {
            let _ = parse(&input);
        }

        #[test]
        fn never_panics_on_ktap_like_lines(lines in proptest::collection::vec(
            "( {0,9})(KTAP version 1|TAP version 13|1\\.\\.[0-9]{1,22}|(not )?ok( [0-9]{1,22})?( [a-z#]{0,6})?( # (SKIP|todo|xfail|x) ?[a-z]{0,3})?|# Subtest: [a-z]{0,3}|# [a-z]{0,4}|[^\n]{0,6})",
            0..60,
        )) {
            let doc = parse(lines.join("\n").as_bytes());
            proptest::prop_assert!(doc.problems.len() <= MAX_PROBLEMS + 1);
        }
    }
}

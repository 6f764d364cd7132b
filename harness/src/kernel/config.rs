//! Kernel configuration: fragments (`CONFIG_X=y`, `# CONFIG_X is not set`),
//! merging them over a generated `.config`, and the check that every
//! required option survived `make olddefconfig`, with the reason when one
//! did not: the symbol's `depends on` lines from the tree's Kconfig files,
//! evaluated against the final `.config`, naming the unmet terms.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

/// One `CONFIG_` assignment: symbol (without `CONFIG_`) and value (`n` for
/// "is not set").
pub type Assignment = (String, String);

/// A syntax error in a fragment.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file}:{line}: {message}")]
pub struct FragmentError {
    /// The fragment's name.
    pub file: String,
    /// 1-based line.
    pub line: usize,
    /// What is wrong.
    pub message: String,
}

/// Parses a fragment or a `.config`: assignments in file order.
pub fn parse_fragment(file: &str, text: &str) -> Result<Vec<Assignment>, FragmentError> {
    let mut out = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = raw.trim();
        let err = |message: String| FragmentError {
            file: file.to_string(),
            line: i + 1,
            message,
        };
        if line.is_empty() {
            continue;
        }
        if let Some(rest) = line.strip_prefix('#') {
            let rest = rest.trim();
            if let Some(sym) = rest
                .strip_prefix("CONFIG_")
                .and_then(|r| r.strip_suffix(" is not set"))
            {
                if !valid_symbol(sym) {
                    return Err(err(format!("bad symbol {sym:?}")));
                }
                out.push((sym.to_string(), "n".to_string()));
            }
            continue;
        }
        let Some((k, v)) = line.split_once('=') else {
            return Err(err(format!(
                "expected CONFIG_NAME=value or '# CONFIG_NAME is not set', got {line:?}"
            )));
        };
        let Some(sym) = k.trim().strip_prefix("CONFIG_") else {
            return Err(err(format!("{k:?} does not start with CONFIG_")));
        };
        if !valid_symbol(sym) {
            return Err(err(format!("bad symbol {sym:?}")));
        }
        let v = v.trim();
        if v.is_empty() {
            return Err(err(format!("CONFIG_{sym} has no value")));
        }
        out.push((sym.to_string(), v.to_string()));
    }
    Ok(out)
}

fn valid_symbol(s: &str) -> bool {
    !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// The result of merging fragments in order.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Merged {
    /// Final assignments, in first-seen order.
    pub assignments: Vec<Assignment>,
    /// `fragment: CONFIG_X=a overrides CONFIG_X=b from other` notes.
    pub overrides: Vec<String>,
}

/// Merges fragments `(name, text)` in order: a later value wins (noted).
pub fn merge(fragments: &[(&str, &str)]) -> Result<Merged, FragmentError> {
    let mut order: Vec<String> = Vec::new();
    let mut vals: BTreeMap<String, (String, String)> = BTreeMap::new();
    let mut overrides = Vec::new();
    for (name, text) in fragments {
        for (sym, val) in parse_fragment(name, text)? {
            match vals.get(&sym) {
                Some((old, from)) if *old != val => overrides.push(format!(
                    "{name}: CONFIG_{sym}={val} overrides CONFIG_{sym}={old} from {from}"
                )),
                Some(_) => {}
                None => order.push(sym.clone()),
            }
            vals.insert(sym, (val, name.to_string()));
        }
    }
    Ok(Merged {
        assignments: order
            .into_iter()
            .map(|s| {
                let v = vals[&s].0.clone();
                (s, v)
            })
            .collect(),
        overrides,
    })
}

/// Renders one assignment as a `.config` line.
pub fn render(sym: &str, val: &str) -> String {
    if val == "n" {
        format!("# CONFIG_{sym} is not set")
    } else {
        format!("CONFIG_{sym}={val}")
    }
}

/// `config` (a `.config`) with `merged` applied: lines of the same symbols
/// replaced in place, new ones appended.
pub fn apply(config: &str, merged: &[Assignment]) -> String {
    let want: BTreeMap<&str, &str> = merged
        .iter()
        .map(|(s, v)| (s.as_str(), v.as_str()))
        .collect();
    let mut seen = std::collections::BTreeSet::new();
    let mut out = String::new();
    for line in config.lines() {
        let sym = line_symbol(line);
        match sym.and_then(|s| want.get_key_value(s)) {
            Some((s, v)) => {
                if seen.insert(*s) {
                    out.push_str(&render(s, v));
                    out.push('\n');
                }
            }
            None => {
                out.push_str(line);
                out.push('\n');
            }
        }
    }
    for (s, v) in merged {
        if !seen.contains(s.as_str()) {
            out.push_str(&render(s, v));
            out.push('\n');
        }
    }
    out
}

fn line_symbol(line: &str) -> Option<&str> {
    let l = line.trim();
    if let Some(r) = l.strip_prefix("# CONFIG_") {
        return r.strip_suffix(" is not set");
    }
    l.strip_prefix("CONFIG_")?.split_once('=').map(|(s, _)| s)
}

/// A `.config` as symbol → value (`n` for not set; absent means n too).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Values(pub BTreeMap<String, String>);

impl Values {
    /// Parses a `.config` (bad lines are ignored: the file is make's).
    pub fn parse(text: &str) -> Values {
        let mut m = BTreeMap::new();
        for line in text.lines() {
            if let Ok(mut a) = parse_fragment(".config", line) {
                if let Some((s, v)) = a.pop() {
                    m.insert(s, v);
                }
            }
        }
        Values(m)
    }

    /// The value of `sym` (`n` when absent).
    pub fn get(&self, sym: &str) -> &str {
        self.0.get(sym).map(String::as_str).unwrap_or("n")
    }
}

/// A requirement that did not hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unmet {
    /// The symbol.
    pub symbol: String,
    /// What was required.
    pub wanted: String,
    /// What `.config` has.
    pub got: String,
    /// Why, from Kconfig (empty when not looked up).
    pub why: Option<Explanation>,
}

impl fmt::Display for Unmet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "CONFIG_{} must be {} but is {} after olddefconfig",
            self.symbol, self.wanted, self.got
        )?;
        if let Some(why) = &self.why {
            write!(f, "; {why}")?;
        }
        Ok(())
    }
}

/// Checks `(symbol, value)` requirements against `values`.
pub fn check(values: &Values, required: &[(String, String)]) -> Vec<Unmet> {
    required
        .iter()
        .filter(|(s, v)| !same_value(values.get(s), v))
        .map(|(s, v)| Unmet {
            symbol: s.clone(),
            wanted: v.clone(),
            got: values.get(s).to_string(),
            why: None,
        })
        .collect()
}

fn same_value(a: &str, b: &str) -> bool {
    a == b || a.trim_matches('"') == b.trim_matches('"')
}

/// What Kconfig says about a symbol.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Explanation {
    /// Where it is defined (`file:line`); empty: no such symbol in this tree.
    pub defined_at: Vec<String>,
    /// Its `depends on` lines (as written, joined continuation lines).
    pub depends: Vec<String>,
    /// The `&&` terms of those lines that are false in `.config`, with values.
    pub unmet: Vec<String>,
    /// Enclosing `if EXPR` blocks of the definitions that are false in
    /// `.config` (`EXPR (SYM=n) at file:line`): a hidden dependency that
    /// `depends on` does not show (LKDTM inside `if RUNTIME_TESTING_MENU`).
    pub unmet_if: Vec<String>,
    /// Whether any definition has a prompt (else only `select`/defaults set it).
    pub has_prompt: bool,
    /// `select SYM` sites (`file:line: config OTHER`), when it has no prompt.
    pub selected_by: Vec<String>,
}

impl fmt::Display for Explanation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.defined_at.is_empty() {
            return write!(
                f,
                "no such option in this tree's Kconfig (removed or renamed?)"
            );
        }
        write!(f, "defined at {}", self.defined_at.join(", "))?;
        for d in &self.depends {
            write!(f, "; `depends on {d}`")?;
        }
        if !self.unmet.is_empty() {
            write!(f, "; unmet: {}", self.unmet.join(", "))?;
        }
        for i in &self.unmet_if {
            write!(f, "; inside `if {i}`, which is false")?;
        }
        if !self.has_prompt {
            write!(
                f,
                "; it has no prompt: only `select` or its default sets it"
            )?;
            if !self.selected_by.is_empty() {
                write!(f, " (selected by {})", self.selected_by.join(", "))?;
            }
        }
        Ok(())
    }
}

/// Kconfig files of a tree relevant to x86: every `Kconfig*` except those
/// under other architectures, `tools/`, `Documentation/`, `scripts/`.
pub fn kconfig_files(src: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![src.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in rd.filter_map(|e| e.ok()) {
            let p = e.path();
            let name = e.file_name().to_string_lossy().into_owned();
            let Ok(ft) = e.file_type() else { continue };
            if ft.is_dir() {
                let rel = p.strip_prefix(src).unwrap_or(&p);
                let rel = rel.to_string_lossy();
                let skip = name.starts_with('.')
                    || rel == "tools"
                    || rel == "Documentation"
                    || rel == "scripts"
                    || (rel.starts_with("arch/")
                        && rel.matches('/').count() == 1
                        && rel != "arch/x86");
                if !skip {
                    stack.push(p);
                }
            } else if name.starts_with("Kconfig") {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// Explains from the Kconfig `files` (`(display name, text)`) why `sym`
/// is not as wanted in `values`.
pub fn explain(files: &[(String, String)], sym: &str, values: &Values) -> Explanation {
    let mut ex = Explanation::default();
    for (name, text) in files {
        let lines = join_continuations(text);
        // Open `if` blocks of this file: (line, condition).
        let mut ifs: Vec<(usize, String)> = Vec::new();
        let mut i = 0;
        while i < lines.len() {
            let (lno, ref l) = lines[i];
            let t = l.trim();
            let mut words = t.split_whitespace();
            let kw = words.next().unwrap_or("");
            let arg = words.next().unwrap_or("");
            match kw {
                "if" => ifs.push((lno, t[2..].trim().to_string())),
                "endif" => {
                    ifs.pop();
                }
                _ => {}
            }
            if (kw == "config" || kw == "menuconfig") && arg == sym {
                ex.defined_at.push(format!("{name}:{lno}"));
                for (at, cond) in &ifs {
                    if eval(cond, values) == 0 {
                        let vals = term_symbols(cond)
                            .into_iter()
                            .map(|s| format!("{s}={}", values.get(&s)))
                            .collect::<Vec<_>>();
                        ex.unmet_if
                            .push(format!("{cond} ({}) at {name}:{at}", vals.join(", ")));
                    }
                }
                let mut j = i + 1;
                while j < lines.len() {
                    let body = lines[j].1.trim();
                    let first = body.split_whitespace().next().unwrap_or("");
                    if is_block_keyword(first) && !lines[j].1.starts_with([' ', '\t']) {
                        break;
                    }
                    if is_block_keyword(first) && first != "help" && first != "---help---" {
                        break;
                    }
                    if first == "help" || first == "---help---" {
                        // Skip the help text: until a line indented less.
                        j += 1;
                        while j < lines.len()
                            && (lines[j].1.trim().is_empty()
                                || indent(&lines[j].1) > indent(&lines[i + 1].1))
                        {
                            j += 1;
                        }
                        continue;
                    }
                    if let Some(d) = body.strip_prefix("depends on") {
                        let d = d.trim().to_string();
                        if eval(&d, values) == 0 {
                            for term in split_and(&d) {
                                if eval(&term, values) == 0 {
                                    let vals = term_symbols(&term)
                                        .into_iter()
                                        .map(|s| format!("{s}={}", values.get(&s)))
                                        .collect::<Vec<_>>();
                                    ex.unmet.push(if vals.is_empty() {
                                        term
                                    } else {
                                        format!("{term} ({})", vals.join(", "))
                                    });
                                }
                            }
                        }
                        ex.depends.push(d);
                    }
                    if is_prompt(body) {
                        ex.has_prompt = true;
                    }
                    j += 1;
                }
                i = j;
                continue;
            }
            i += 1;
        }
    }
    if !ex.defined_at.is_empty() && !ex.has_prompt {
        for (name, text) in files {
            let mut current = String::new();
            for (lno, l) in join_continuations(text) {
                let t = l.trim();
                let mut w = t.split_whitespace();
                match (w.next(), w.next()) {
                    (Some("config" | "menuconfig"), Some(s)) => current = s.to_string(),
                    (Some("select"), Some(s)) if s == sym => {
                        ex.selected_by.push(format!("{current} ({name}:{lno})"));
                    }
                    _ => {}
                }
            }
        }
        ex.selected_by.truncate(8);
    }
    ex
}

fn indent(l: &str) -> usize {
    l.chars()
        .take_while(|c| c.is_whitespace())
        .map(|c| if c == '\t' { 8 } else { 1 })
        .sum()
}

fn is_block_keyword(w: &str) -> bool {
    matches!(
        w,
        "config"
            | "menuconfig"
            | "choice"
            | "endchoice"
            | "menu"
            | "endmenu"
            | "if"
            | "endif"
            | "comment"
            | "source"
            | "rsource"
            | "osource"
            | "mainmenu"
    )
}

fn is_prompt(body: &str) -> bool {
    let mut w = body.split_whitespace();
    match w.next() {
        Some("prompt") => true,
        Some("bool" | "tristate" | "int" | "hex" | "string") => {
            w.next().is_some_and(|n| n.starts_with('"'))
        }
        _ => false,
    }
}

/// Lines with `\` continuations joined, with their 1-based first line.
fn join_continuations(text: &str) -> Vec<(usize, String)> {
    let mut out: Vec<(usize, String)> = Vec::new();
    let mut pending: Option<(usize, String)> = None;
    for (i, l) in text.lines().enumerate() {
        let (start, mut acc) = pending.take().unwrap_or((i + 1, String::new()));
        if let Some(head) = l.strip_suffix('\\') {
            acc.push_str(head);
            acc.push(' ');
            pending = Some((start, acc));
        } else {
            acc.push_str(l);
            out.push((start, acc));
        }
    }
    if let Some(p) = pending {
        out.push(p);
    }
    out
}

/// Top-level `&&` terms of a Kconfig expression.
pub fn split_and(expr: &str) -> Vec<String> {
    let mut terms = Vec::new();
    let mut depth = 0i32;
    let mut cur = String::new();
    let chars: Vec<char> = expr.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            '&' if depth == 0 && chars.get(i + 1) == Some(&'&') => {
                terms.push(cur.trim().to_string());
                cur.clear();
                i += 2;
                continue;
            }
            _ => {}
        }
        cur.push(c);
        i += 1;
    }
    if !cur.trim().is_empty() {
        terms.push(cur.trim().to_string());
    }
    terms
}

fn term_symbols(expr: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for t in tokenize(expr) {
        if let Tok::Sym(s) = t {
            if !matches!(s.as_str(), "y" | "m" | "n")
                && !s.starts_with('"')
                && !s.chars().all(|c| c.is_ascii_digit())
                && !out.contains(&s)
            {
                out.push(s);
            }
        }
    }
    out
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Sym(String),
    Op(&'static str),
}

fn tokenize(s: &str) -> Vec<Tok> {
    let c: Vec<char> = s.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < c.len() {
        let two: String = c[i..(i + 2).min(c.len())].iter().collect();
        match two.as_str() {
            "&&" | "||" | "!=" | "<=" | ">=" => {
                out.push(Tok::Op(match two.as_str() {
                    "&&" => "&&",
                    "||" => "||",
                    "!=" => "!=",
                    "<=" => "<=",
                    _ => ">=",
                }));
                i += 2;
                continue;
            }
            _ => {}
        }
        match c[i] {
            ' ' | '\t' => i += 1,
            '!' => {
                out.push(Tok::Op("!"));
                i += 1
            }
            '(' => {
                out.push(Tok::Op("("));
                i += 1
            }
            ')' => {
                out.push(Tok::Op(")"));
                i += 1
            }
            '=' => {
                out.push(Tok::Op("="));
                i += 1
            }
            '<' => {
                out.push(Tok::Op("<"));
                i += 1
            }
            '>' => {
                out.push(Tok::Op(">"));
                i += 1
            }
            '"' => {
                let mut j = i + 1;
                while j < c.len() && c[j] != '"' {
                    j += 1;
                }
                out.push(Tok::Sym(c[i..(j + 1).min(c.len())].iter().collect()));
                i = j + 1;
            }
            '#' => break,
            _ => {
                let mut j = i;
                while j < c.len()
                    && !matches!(
                        c[j],
                        ' ' | '\t' | '!' | '(' | ')' | '=' | '<' | '>' | '&' | '|' | '"'
                    )
                {
                    j += 1;
                }
                if j == i {
                    j += 1;
                }
                out.push(Tok::Sym(c[i..j].iter().collect()));
                i = j;
            }
        }
    }
    out
}

/// Evaluates a Kconfig expression to a tristate (0 n, 1 m, 2 y) against
/// `values`. Unknown input evaluates conservatively as written; it never
/// panics.
pub fn eval(expr: &str, values: &Values) -> u8 {
    let toks = tokenize(expr);
    let mut p = Parser {
        toks: &toks,
        pos: 0,
        values,
    };
    p.or()
}

struct Parser<'a> {
    toks: &'a [Tok],
    pos: usize,
    values: &'a Values,
}

impl Parser<'_> {
    fn peek(&self) -> Option<&Tok> {
        self.toks.get(self.pos)
    }
    fn or(&mut self) -> u8 {
        let mut v = self.and();
        while self.peek() == Some(&Tok::Op("||")) {
            self.pos += 1;
            v = v.max(self.and());
        }
        v
    }
    fn and(&mut self) -> u8 {
        let mut v = self.not();
        while self.peek() == Some(&Tok::Op("&&")) {
            self.pos += 1;
            v = v.min(self.not());
        }
        v
    }
    fn not(&mut self) -> u8 {
        if self.peek() == Some(&Tok::Op("!")) {
            self.pos += 1;
            return 2 - self.not();
        }
        self.primary()
    }
    fn primary(&mut self) -> u8 {
        match self.toks.get(self.pos).cloned() {
            Some(Tok::Op("(")) => {
                self.pos += 1;
                let v = self.or();
                if self.peek() == Some(&Tok::Op(")")) {
                    self.pos += 1;
                }
                v
            }
            Some(Tok::Sym(a)) => {
                self.pos += 1;
                if let Some(Tok::Op(op @ ("=" | "!=" | "<" | ">" | "<=" | ">="))) =
                    self.peek().cloned()
                {
                    self.pos += 1;
                    let b = match self.toks.get(self.pos).cloned() {
                        Some(Tok::Sym(b)) => {
                            self.pos += 1;
                            b
                        }
                        _ => String::new(),
                    };
                    let (x, y) = (self.string_value(&a), self.string_value(&b));
                    let ord = match (x.parse::<i64>(), y.parse::<i64>()) {
                        (Ok(i), Ok(j)) => i.cmp(&j),
                        _ => x.cmp(&y),
                    };
                    let r = match op {
                        "=" => ord.is_eq(),
                        "!=" => !ord.is_eq(),
                        "<" => ord.is_lt(),
                        ">" => ord.is_gt(),
                        "<=" => ord.is_le(),
                        _ => ord.is_ge(),
                    };
                    return if r { 2 } else { 0 };
                }
                tristate(&self.string_value(&a))
            }
            _ => {
                self.pos += 1;
                0
            }
        }
    }
    fn string_value(&self, s: &str) -> String {
        match s {
            "y" | "m" | "n" => s.to_string(),
            _ if s.starts_with('"') => s.trim_matches('"').to_string(),
            _ if s.chars().all(|c| c.is_ascii_digit() || c == '-') => s.to_string(),
            _ if s.starts_with("0x") => s.to_string(),
            _ => self.values.get(s).trim_matches('"').to_string(),
        }
    }
}

fn tristate(v: &str) -> u8 {
    match v {
        "y" => 2,
        "m" => 1,
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fragments_parse_and_merge() {
        let a = "# comment\nCONFIG_A=y\n# CONFIG_B is not set\nCONFIG_S=\"x y\"\n";
        let b = "CONFIG_B=y\nCONFIG_A=y\nCONFIG_N=4\n";
        let m = merge(&[("a", a), ("b", b)]).unwrap();
        assert_eq!(
            m.assignments,
            vec![
                ("A".into(), "y".into()),
                ("B".into(), "y".into()),
                ("S".into(), "\"x y\"".into()),
                ("N".into(), "4".into())
            ]
        );
        assert_eq!(m.overrides, ["b: CONFIG_B=y overrides CONFIG_B=n from a"]);
        let e = parse_fragment("f", "CONFIG_A=y\nFOO=y\n").unwrap_err();
        assert_eq!((e.file.as_str(), e.line), ("f", 2));
        assert!(parse_fragment("f", "CONFIG_A\n").is_err());
        assert!(parse_fragment("f", "CONFIG_A=\n").is_err());
    }

    #[test]
    fn apply_replaces_and_appends() {
        let cfg = "CONFIG_A=y\n# CONFIG_B is not set\n# comment\nCONFIG_C=m\n";
        let out = apply(
            cfg,
            &[
                ("B".into(), "y".into()),
                ("A".into(), "n".into()),
                ("D".into(), "2".into()),
            ],
        );
        assert_eq!(
            out,
            "# CONFIG_A is not set\nCONFIG_B=y\n# comment\nCONFIG_C=m\nCONFIG_D=2\n"
        );
    }

    #[test]
    fn expressions() {
        let v = Values::parse("CONFIG_A=y\nCONFIG_M=m\nCONFIG_N=4\nCONFIG_S=\"abc\"\n");
        assert_eq!(eval("A", &v), 2);
        assert_eq!(eval("A && M", &v), 1);
        assert_eq!(eval("A && !B", &v), 2);
        assert_eq!(eval("B || (A && M)", &v), 1);
        assert_eq!(eval("N >= 2 && N < 8", &v), 2);
        assert_eq!(eval("S = \"abc\"", &v), 2);
        assert_eq!(eval("M != n", &v), 2);
        assert_eq!(eval("B = y", &v), 0);
        assert_eq!(eval("", &v), 0);
        assert_eq!(eval("((((", &v), 0);
        assert_eq!(split_and("A && (B || C) && !D"), ["A", "(B || C)", "!D"]);
    }

    #[test]
    fn names_an_enclosing_if_that_is_false() {
        // lib/Kconfig.debug of 7.3: LKDTM's own dependency is met, the
        // menu around it is not (what tinyconfig does).
        let kconfig = "menuconfig RUNTIME_TESTING_MENU\n\tbool \"Runtime Testing\"\n\tdefault y\n\nif RUNTIME_TESTING_MENU\n\nconfig TEST_X\n\ttristate \"x\"\n\nendif # RUNTIME_TESTING_MENU\n\nif DEBUG_FS\nconfig LKDTM\n\ttristate \"Linux Kernel Dump Test Tool Module\"\n\tdepends on DEBUG_FS\nendif\n";
        // LKDTM is in two `if`s here: only the false one is named.
        let kconfig = kconfig.replace("endif # RUNTIME_TESTING_MENU\n\n", "");
        let files = vec![("lib/Kconfig.debug".to_string(), kconfig)];
        let v = Values::parse("CONFIG_DEBUG_FS=y\n");
        let ex = explain(&files, "LKDTM", &v);
        assert!(ex.unmet.is_empty(), "{ex:?}");
        assert_eq!(
            ex.unmet_if,
            ["RUNTIME_TESTING_MENU (RUNTIME_TESTING_MENU=n) at lib/Kconfig.debug:5"]
        );
        let msg = ex.to_string();
        assert!(
            msg.contains("inside `if RUNTIME_TESTING_MENU (RUNTIME_TESTING_MENU=n) at lib/Kconfig.debug:5`, which is false"),
            "{msg}"
        );
        // After its endif, TEST_X-like symbols are not inside it.
        let ex = explain(
            &files,
            "TEST_X",
            &Values::parse("CONFIG_RUNTIME_TESTING_MENU=y\n"),
        );
        assert!(ex.unmet_if.is_empty(), "{ex:?}");
    }

    #[test]
    fn explains_a_dropped_option() {
        let kconfig = "config X86_64_ACPI_NUMA\n\tdef_bool y\n\tprompt \"ACPI NUMA detection\"\n\tdepends on X86_64 && NUMA && ACPI && PCI\n\tselect ACPI_NUMA\n\thelp\n\t  Enable ACPI SRAT based node topology detection.\n\nconfig ACPI_NUMA\n\tbool\n\tdepends on NUMA\n\nconfig OTHER\n\tbool \"x\"\n\tselect ACPI_NUMA if \\\n\t\tPCI\n";
        let files = vec![("arch/x86/Kconfig".to_string(), kconfig.to_string())];
        let v = Values::parse("CONFIG_X86_64=y\nCONFIG_NUMA=y\nCONFIG_ACPI=y\n");
        let req = vec![
            ("X86_64_ACPI_NUMA".to_string(), "y".to_string()),
            ("ACPI".to_string(), "y".to_string()),
        ];
        let mut unmet = check(&v, &req);
        assert_eq!(unmet.len(), 1);
        unmet[0].why = Some(explain(&files, "X86_64_ACPI_NUMA", &v));
        let msg = unmet[0].to_string();
        assert!(
            msg.contains("CONFIG_X86_64_ACPI_NUMA must be y but is n"),
            "{msg}"
        );
        assert!(msg.contains("arch/x86/Kconfig:1"), "{msg}");
        assert!(
            msg.contains("`depends on X86_64 && NUMA && ACPI && PCI`"),
            "{msg}"
        );
        assert!(msg.contains("unmet: PCI (PCI=n)"), "{msg}");
        let e = explain(&files, "ACPI_NUMA", &Values::default());
        assert!(!e.has_prompt);
        assert_eq!(e.unmet, ["NUMA (NUMA=n)"]);
        assert_eq!(e.selected_by.len(), 2, "{e:?}");
        let gone = explain(&files, "PROC_SYSCTL", &v);
        assert!(gone.to_string().contains("no such option"));
    }
}

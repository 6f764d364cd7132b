//! A small KTAP emitter (`Documentation/dev-tools/ktap.rst`) for test binaries.
//!
//! A binary prints one KTAP document on stdout: the version line, a plan, one
//! result line per test, `#` diagnostics. The guest init nests each binary's
//! document as a subtest of its own top-level document.

use std::io::Write;

/// The result of one test case.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The case passed.
    Pass,
    /// The case failed; the string says what was expected and what happened.
    Fail(String),
    /// The case did not run; the string says why (printed as `# SKIP reason`).
    Skip(String),
}

impl Outcome {
    /// `Pass` if `cond`, else `Fail(msg())`.
    pub fn check(cond: bool, msg: impl FnOnce() -> String) -> Outcome {
        if cond {
            Outcome::Pass
        } else {
            Outcome::Fail(msg())
        }
    }
}

/// A failure message becomes a failing outcome, so a case body returning
/// [`Check`] can use `?` on the many helpers that fail with a `String`.
impl From<String> for Outcome {
    fn from(why: String) -> Outcome {
        Outcome::Fail(why)
    }
}

impl From<&str> for Outcome {
    fn from(why: &str) -> Outcome {
        Outcome::Fail(why.to_string())
    }
}

/// A case body's result, the one assertion vocabulary of the guest tests:
/// `Err` carries the failing (or skipping) outcome.
pub type Check = Result<(), Outcome>;

/// Turns a [`Check`] into the case's outcome.
pub fn done(c: Check) -> Outcome {
    match c {
        Ok(()) => Outcome::Pass,
        Err(o) => o,
    }
}

/// A failing outcome.
pub fn fail(msg: impl Into<String>) -> Outcome {
    Outcome::Fail(msg.into())
}

/// A skip outcome.
pub fn skip(msg: impl Into<String>) -> Outcome {
    Outcome::Skip(msg.into())
}

/// Writes one KTAP document to a writer (stdout by default).
pub struct Ktap<W: Write> {
    out: W,
    next: u64,
    indent: usize,
}

impl Ktap<std::io::Stdout> {
    /// A document on stdout; prints the version line and the plan.
    pub fn stdout(plan: usize) -> Self {
        Self::new(std::io::stdout(), plan, 0)
    }
}

impl<W: Write> Ktap<W> {
    /// Starts a document (`KTAP version 1` and `1..plan`) indented by `indent` levels.
    pub fn new(out: W, plan: usize, indent: usize) -> Self {
        let mut k = Ktap {
            out,
            next: 1,
            indent,
        };
        k.line("KTAP version 1");
        k.line(&format!("1..{plan}"));
        k
    }

    fn line(&mut self, s: &str) {
        let pad = "  ".repeat(self.indent);
        // A test binary cannot do anything useful if stdout is gone; ignore.
        let _ = writeln!(self.out, "{pad}{s}");
        let _ = self.out.flush();
    }

    /// A `# ` diagnostic line (one per input line).
    pub fn diag(&mut self, msg: &str) {
        for l in msg.lines() {
            self.line(&format!("# {}", sanitize(l)));
        }
    }

    /// Reports the next test case; returns whether it counts as a success.
    pub fn result(&mut self, name: &str, outcome: &Outcome) -> bool {
        let n = self.next;
        self.next += 1;
        let name = sanitize_name(name);
        match outcome {
            Outcome::Pass => {
                self.line(&format!("ok {n} {name}"));
                true
            }
            Outcome::Skip(why) => {
                self.line(&format!("ok {n} {name} # SKIP {}", sanitize(why)));
                true
            }
            Outcome::Fail(why) => {
                self.diag(why);
                self.line(&format!("not ok {n} {name}"));
                false
            }
        }
    }

    /// Number of results written so far.
    pub fn count(&self) -> u64 {
        self.next - 1
    }
}

/// Test names may not contain `#` (it starts a directive) or newlines.
pub fn sanitize_name(name: &str) -> String {
    name.chars()
        .map(|c| if c == '#' || c.is_control() { '_' } else { c })
        .collect()
}

fn sanitize(s: &str) -> String {
    s.chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn emits_version_plan_results_and_directives() {
        let mut buf = Vec::new();
        {
            let mut k = Ktap::new(&mut buf, 3, 1);
            assert!(k.result("a", &Outcome::Pass));
            assert!(k.result("b#c", &Outcome::Skip("no NUMA".into())));
            assert!(!k.result("d", &Outcome::Fail("want 1\ngot 2".into())));
            assert_eq!(k.count(), 3);
        }
        let s = String::from_utf8(buf).unwrap();
        assert_eq!(
            s,
            "  KTAP version 1\n  1..3\n  ok 1 a\n  ok 2 b_c # SKIP no NUMA\n  # want 1\n  # got 2\n  not ok 3 d\n"
        );
    }
}

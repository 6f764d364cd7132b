//! The cases a suite has, as far as the harness knows before it boots
//! ([`SuiteCases`]): what checks `--test` and a known failure's `case:`
//! against the suite, so that a glob that selects nothing is an error
//! naming what exists, not a green run of nothing.

use crate::suite::{self, Binary, SuiteTest};

/// The cases a suite really has, as far as the harness knows before it
/// boots: each test's cases where its binary lists them (the futex
/// binaries' `--list`, the upstream selftests' catalog), and the cases
/// the verdict itself makes of any test (`<exit>`, `<incomplete>`,
/// `<plan>`, `kernel-<kind>`).
pub struct SuiteCases {
    /// Test name -> its cases (`None`: the binary lists none).
    tests: Vec<(String, Option<Vec<String>>)>,
}

/// Cases the verdict makes of a test, beside its own (and
/// `kernel-<kind>` for each [`crate::console::ReportKind`]).
const VERDICT_CASES: &[&str] = &["<exit>", "<incomplete>", "<plan>"];

impl SuiteCases {
    /// The cases of built-in suite `name` (the upstream selftests'
    /// catalog for a kselftest suite).
    pub fn builtin(name: &str) -> SuiteCases {
        if crate::kselftest::is_kselftest_suite(name) {
            let mut tests = vec![("topology".to_string(), None)];
            for (program, cases) in crate::kselftest::CASES {
                tests.push((
                    program.to_string(),
                    Some(cases.iter().map(|c| c.to_string()).collect()),
                ));
            }
            return SuiteCases { tests };
        }
        SuiteCases::tests(&suite::builtin(name, None).unwrap_or_default())
    }

    /// The cases of a suite made of `tests`.
    pub fn tests(tests: &[SuiteTest]) -> SuiteCases {
        let listed = |bin: &str| {
            crate::guestbin::cases(bin).map(|c| c.iter().map(|s| s.to_string()).collect())
        };
        let mut out = vec![("topology".to_string(), None)];
        for t in tests {
            let cases = match &t.binary {
                Binary::Builtin(bin) => listed(bin),
                _ => None,
            };
            out.push((t.name.clone(), cases));
        }
        SuiteCases { tests: out }
    }

    /// The same cases and those of `tests` (user binaries) after them.
    pub fn with_tests(mut self, tests: &[SuiteTest]) -> SuiteCases {
        let more = SuiteCases::tests(tests);
        self.tests.extend(more.tests.into_iter().skip(1));
        self
    }

    /// The names of its tests (binaries), the topology check first.
    pub fn test_names(&self) -> impl Iterator<Item = &str> {
        self.tests.iter().map(|(t, _)| t.as_str())
    }

    /// Whether glob `case` names at least one case the suite has: a
    /// listed case, a case the verdict makes, or (for a binary that lists
    /// none) the test itself or anything under its name.
    pub fn has(&self, case: &str) -> bool {
        let m = |name: &str| crate::glob::matches(case, name);
        self.tests.iter().any(|(test, cases)| {
            let verdict = VERDICT_CASES
                .iter()
                .map(|v| v.to_string())
                .chain(
                    crate::console::ReportKind::ALL
                        .iter()
                        .map(|k| format!("kernel-{}", k.name())),
                )
                .any(|v| m(&format!("{test}/{v}")));
            verdict
                || match cases {
                    Some(cases) => cases.iter().any(|c| m(&format!("{test}/{c}"))),
                    // A binary that lists nothing may print no KTAP
                    // either: then it is one case, named as the test.
                    None => case.starts_with(&format!("{test}/")) || m(test),
                }
        }) || ["vm", "ktap"].iter().any(|n| m(n))
            || crate::console::ReportKind::ALL
                .iter()
                .any(|k| m(&format!("boot/kernel-{}", k.name())))
    }

    /// A few case names, for an error: of the test the glob names, if it
    /// names one, else of every test.
    pub fn examples(&self, case: &str) -> String {
        let mut names: Vec<String> = Vec::new();
        let first = case.split('/').next().unwrap_or(case);
        let named = self.tests.iter().any(|(t, _)| t == first);
        for (test, cases) in self.tests.iter().filter(|(t, _)| !named || t == first) {
            match cases {
                Some(c) => names.extend(c.iter().take(2).map(|c| format!("{test}/{c}"))),
                None => names.push(format!("{test}/...")),
            }
        }
        if named {
            if let Some((_, Some(c))) = self.tests.iter().find(|(t, _)| t == first) {
                names = c.iter().map(|c| format!("{first}/{c}")).collect();
            }
        }
        let more = names.len() > 8;
        names.truncate(8);
        format!("{}{}", names.join(", "), if more { ", ..." } else { "" })
    }
}

/// The `binary/case` glob that `glob` means in suite `suite`: `--test`
/// takes `binary/case` everywhere, and `suite/binary/case` too (bisect's
/// form) when the first part names the suite and the rest selects cases
/// of it while the whole does not.
pub fn in_suite(glob: &str, suite: &str, cases: &SuiteCases) -> String {
    match glob.strip_prefix(suite).and_then(|r| r.strip_prefix('/')) {
        Some(rest) if !rest.is_empty() && !cases.has(glob) && cases.has(rest) => rest.to_string(),
        _ => glob.to_string(),
    }
}

/// Checks `--test GLOB` against the suites of a run (name and cases): a
/// glob that globset can parse and that names at least one case of one
/// of them. The error names what exists (nextest's `--no-tests=fail`).
pub fn check_selection(glob: &str, suites: &[(String, SuiteCases)]) -> Result<(), String> {
    crate::glob::check(glob).map_err(|why| format!("--test {glob:?}: {why}"))?;
    if suites
        .iter()
        .any(|(name, c)| c.has(&in_suite(glob, name, c)))
    {
        return Ok(());
    }
    let first = glob.split('/').next().unwrap_or(glob);
    let mut text = format!("--test {glob:?} selects no case");
    for (name, cases) in suites {
        let binaries: Vec<&str> = cases.test_names().collect();
        text.push_str(&format!(
            "; suite {name} has {}; cases such as {}",
            binaries.join(", "),
            cases.examples(glob)
        ));
    }
    let is_suite = crate::suite::SUITES.contains(&first) && !suites.iter().any(|(s, _)| s == first);
    if is_suite && glob.contains('/') {
        text.push_str(&format!(
            " (suite {first} is not in this run: select it with --suite {first})"
        ));
    }
    Err(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn futex() -> Vec<(String, SuiteCases)> {
        vec![("futex".to_string(), SuiteCases::builtin("futex"))]
    }

    #[test]
    fn a_glob_that_selects_a_case_passes_and_one_that_selects_none_names_what_exists() {
        for ok in [
            "futex-prctl/*",
            "*",
            "topology/*",
            "futex-numa/*node*",
            "futex-prctl/<exit>",
        ] {
            assert_eq!(check_selection(ok, &futex()), Ok(()), "{ok}");
        }
        let e = check_selection("nosuch/*", &futex()).unwrap_err();
        assert!(
            e.starts_with(
                "--test \"nosuch/*\" selects no case; suite futex has topology, futex-prctl"
            ),
            "{e}"
        );
        assert!(
            e.contains("cases such as topology/..., futex-prctl/get-fresh-is-0"),
            "{e}"
        );
        // bisect's suite/binary/case is the same selection.
        assert_eq!(check_selection("futex/futex-prctl/*", &futex()), Ok(()));
        assert_eq!(
            in_suite("futex/futex-prctl/*", "futex", &futex()[0].1),
            "futex-prctl/*"
        );
        assert_eq!(
            in_suite("futex-prctl/*", "futex", &futex()[0].1),
            "futex-prctl/*"
        );
        // The suite named is not the run's.
        let smoke = vec![("smoke".to_string(), SuiteCases::builtin("smoke"))];
        let e = check_selection("futex/futex-prctl/*", &smoke).unwrap_err();
        assert!(
            e.ends_with("(suite futex is not in this run: select it with --suite futex)"),
            "{e}"
        );
        let e = check_selection("futex-prctl/[", &futex()).unwrap_err();
        assert!(
            e.starts_with("--test \"futex-prctl/[\": unclosed character class"),
            "{e}"
        );
        // kselftest suites: the upstream catalog.
        let k = vec![(
            "kselftest-futex".to_string(),
            SuiteCases::builtin("kselftest-futex"),
        )];
        assert_eq!(check_selection("futex_priv_hash/*", &k), Ok(()));
        assert!(check_selection("futex-prctl/*", &k).is_err());
    }
}

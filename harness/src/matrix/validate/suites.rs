//! `suites:`: built-in suites by name or explicit tests, weights and
//! known failures, plus the implicit built-ins nobody declared.

use super::{check_name, Ctx, Declared};
use crate::matrix::locate::{self, Pos};
use crate::matrix::model::{parse_duration, Kernel, Suite, SuiteKind};
use crate::matrix::schema::{RawKnownFailure, RawSuite, RawTest};
use crate::matrix::MatrixError;
use crate::result::KnownFailure;
use crate::suite::{self, Binary, SuiteTest};
use std::path::PathBuf;
use std::time::Duration;

/// Built-in suites usable without a `suites:` entry.
const IMPLICIT_SUITES: &[&str] = &["smoke", "futex"];

/// The validated `suites:` section.
pub(in crate::matrix) struct Suites {
    /// Declared suites in file order, then the implicit built-ins not
    /// declared.
    pub(in crate::matrix) all: Vec<Suite>,
    /// Indices into `all` of the product's suites when `cells.suites` is
    /// not given: every declared suite, or the implicit ones when none is.
    pub(in crate::matrix) default_product: Vec<usize>,
}

/// Validates the `suites:` list (names unique) and adds the implicit ones;
/// `kernels` are the validated kernels known-failure globs must name.
pub(in crate::matrix) fn suites(
    cx: &Ctx,
    raw: Vec<RawSuite>,
    kernels: &[Kernel],
) -> Result<Suites, MatrixError> {
    let mut suites = Vec::new();
    let mut declared = Declared::new("suites", "suite");
    let declared_any = !raw.is_empty();
    for s in raw {
        declared.add(cx, &s.name)?;
        suites.push(declared_suite(cx, s, kernels)?);
    }
    let declared = suites.len();
    for b in IMPLICIT_SUITES {
        if !suites.iter().any(|s| s.name == *b) {
            let weight = suite::builtin(b, None).map(|t| t.len()).unwrap_or(1) as u32;
            suites.push(Suite {
                name: b.to_string(),
                kind: SuiteKind::Builtin(b.to_string()),
                weight,
                exclusive: false,
                known_failures: Vec::new(),
            });
        }
    }
    let default_product = if declared_any {
        (0..declared).collect()
    } else {
        (0..suites.len()).collect()
    };
    Ok(Suites {
        all: suites,
        default_product,
    })
}

fn declared_suite(cx: &Ctx, s: RawSuite, kernels: &[Kernel]) -> Result<Suite, MatrixError> {
    let kind = match (s.builtin, s.tests) {
        (Some(b), None) => {
            // kselftest suites are built per kernel when the matrix runs.
            let known = crate::kselftest::is_kselftest_suite(&b);
            suite::builtin(&b, None)
                .map(|_| ())
                .or_else(|e| if known { Ok(()) } else { Err(e) })
                .map_err(|e| {
                    cx.at_item(
                        "suites",
                        &s.name,
                        Some("builtin"),
                        format!("suite {:?}: {e}", s.name),
                    )
                })?;
            SuiteKind::Builtin(b)
        }
        (None, Some(tests)) => SuiteKind::Custom(custom_tests(cx, &s.name, tests)?),
        _ => {
            return Err(cx.at_item(
                "suites",
                &s.name,
                None,
                format!(
                    "suite {:?}: expected exactly one of builtin: or tests:",
                    s.name
                ),
            ))
        }
    };
    let weight = s.weight.unwrap_or(match &kind {
        SuiteKind::Builtin(b) => suite::builtin(b, None).map(|t| t.len()).unwrap_or(1) as u32,
        SuiteKind::Custom(t) => t.len() as u32,
    });
    let catalog = Catalog::of(&kind);
    let known_failures = known_failures(cx, &s.name, s.known_failures, kernels, &catalog)?;
    Ok(Suite {
        name: s.name,
        kind,
        weight,
        exclusive: s.exclusive,
        known_failures,
    })
}

/// The `tests:` of suite `name`: at least one, test names unique.
fn custom_tests(cx: &Ctx, name: &str, tests: Vec<RawTest>) -> Result<Vec<SuiteTest>, MatrixError> {
    let mut out = Vec::new();
    for t in tests {
        let test = custom_test(cx, name, t)?;
        if out.iter().any(|o: &SuiteTest| o.name == test.name) || test.name == "topology" {
            return Err(cx.at_item(
                "suites",
                name,
                Some("tests"),
                format!(
                    "suite {:?}: test name {:?} is used twice (give one a name:)",
                    name, test.name
                ),
            ));
        }
        out.push(test);
    }
    if out.is_empty() {
        return Err(cx.at_item(
            "suites",
            name,
            Some("tests"),
            format!("suite {:?}: tests: expected at least one test", name),
        ));
    }
    Ok(out)
}

fn custom_test(cx: &Ctx, name: &str, t: RawTest) -> Result<SuiteTest, MatrixError> {
    let timeout = match &t.timeout {
        None => Duration::from_secs(120),
        Some(x) => parse_duration(x).ok_or_else(|| {
            cx.at_item(
                "suites",
                name,
                Some("timeout"),
                format!(
                    "suite {:?}: timeout {x:?}: expected a duration such as 60s, 10m or 1h",
                    name
                ),
            )
        })?,
    };
    let test = if t.bin.contains('/') {
        let mut u = suite::user_binary(PathBuf::from(&t.bin), timeout).map_err(|e| {
            cx.at_item(
                "suites",
                name,
                Some("bin"),
                format!("suite {:?}: {e}", name),
            )
        })?;
        u.args = t.args;
        u
    } else {
        let Some(b) = guest_tests::binaries::tests().find(|b| *b == t.bin) else {
            return Err(cx.at_item(
                "suites",
                name,
                Some("bin"),
                format!(
                    "suite {:?}: unknown guest binary {:?}; expected one of {} or a path to a static binary",
                    name,
                    t.bin,
                    guest_tests::binaries::tests().collect::<Vec<_>>().join(", ")
                ),
            ));
        };
        SuiteTest {
            name: t.bin.clone(),
            binary: Binary::Builtin(b),
            args: t.args,
            timeout,
        }
    };
    Ok(match t.name {
        Some(n) => {
            check_name("test", &n).map_err(|m| cx.at_item("suites", name, Some("name"), m))?;
            SuiteTest { name: n, ..test }
        }
        None => test,
    })
}

/// The cases a suite really has, as far as the harness knows before it
/// boots: each test's cases where its binary lists them (the futex
/// binaries' `--list`, the upstream selftests' catalog), and the cases
/// the verdict itself makes of any test (`<exit>`, `<incomplete>`,
/// `<plan>`, `kernel-<kind>`).
struct Catalog {
    /// Test name -> its cases (`None`: the binary lists none).
    tests: Vec<(String, Option<Vec<String>>)>,
}

/// Cases the verdict makes of a test, beside its own (and
/// `kernel-<kind>` for each [`crate::console::ReportKind`]).
const VERDICT_CASES: &[&str] = &["<exit>", "<incomplete>", "<plan>"];

impl Catalog {
    fn of(kind: &SuiteKind) -> Catalog {
        let listed = |bin: &str| {
            crate::guestbin::cases(bin).map(|c| c.iter().map(|s| s.to_string()).collect())
        };
        let mut tests = vec![("topology".to_string(), None)];
        match kind {
            SuiteKind::Builtin(b) if crate::kselftest::is_kselftest_suite(b) => {
                for (program, cases) in crate::kselftest::CASES {
                    tests.push((
                        program.to_string(),
                        Some(cases.iter().map(|c| c.to_string()).collect()),
                    ));
                }
            }
            SuiteKind::Builtin(b) => {
                for t in suite::builtin(b, None).unwrap_or_default() {
                    let cases = match &t.binary {
                        Binary::Builtin(bin) => listed(bin),
                        _ => None,
                    };
                    tests.push((t.name, cases));
                }
            }
            SuiteKind::Custom(ts) => {
                for t in ts {
                    let cases = match &t.binary {
                        Binary::Builtin(bin) => listed(bin),
                        _ => None,
                    };
                    tests.push((t.name.clone(), cases));
                }
            }
        }
        Catalog { tests }
    }

    /// Whether glob `case` names at least one case the suite has: a
    /// listed case, a case the verdict makes, or (for a binary that lists
    /// none) the test itself or anything under its name.
    fn has(&self, case: &str) -> bool {
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
    fn examples(&self, case: &str) -> String {
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

/// `known_failures:` of suite `name`. Each entry names one failure
/// exactly: `case:` a glob naming cases the suite has, `message:` a glob
/// over the failure's one-line message, `kernel:` at least one glob that
/// names a declared kernel, `reason:`; `accel:` `tcg` or `kvm` if given.
/// The entry keeps its position, its identity in every report.
fn known_failures(
    cx: &Ctx,
    name: &str,
    raw: Vec<RawKnownFailure>,
    kernels: &[Kernel],
    catalog: &Catalog,
) -> Result<Vec<KnownFailure>, MatrixError> {
    let key = locate::item(cx.text, "suites", name, Some("known_failures"));
    let mut known_failures = Vec::new();
    for (i, k) in raw.into_iter().enumerate() {
        let entry = key.and_then(|(line, _)| locate::nth_under(cx.text, line, i));
        let at_field = |field: &str| entry.and_then(|e| locate::field_in(cx.text, e, field));
        let err = |pos: Option<Pos>, what: String| {
            cx.err(
                pos.or(entry),
                format!("suite {name:?}: known_failures[{i}]: {what}"),
            )
        };
        if let Some(a) = k.accel.as_deref().filter(|a| !["tcg", "kvm"].contains(a)) {
            return Err(cx.err(
                at_field("accel").or(entry),
                format!("suite {name:?}: known_failures accel {a:?}: expected tcg or kvm"),
            ));
        }
        crate::glob::check(&k.case)
            .map_err(|why| err(at_field("case"), format!("case {:?}: {why}", k.case)))?;
        if !catalog.has(&k.case) {
            return Err(err(
                at_field("case"),
                format!(
                    "case {:?} names no case of this suite (it has e.g. {})",
                    k.case,
                    catalog.examples(&k.case)
                ),
            ));
        }
        if k.reason.trim().is_empty() {
            return Err(err(
                at_field("reason"),
                "reason: expected why the failure is accepted".into(),
            ));
        }
        let Some(message) = k.message else {
            return Err(err(
                entry,
                "expected message: (a glob over the exact failure message it accepts; any other failure of the case stays a failure)".into(),
            ));
        };
        let why = if message.trim().is_empty() || message.chars().all(|c| c == '*') {
            Err("it matches any failure".to_string())
        } else {
            crate::glob::check(&message)
        };
        if let Err(why) = why {
            return Err(err(
                at_field("message"),
                format!(
                    "message {message:?}: {why}; expected a glob over the exact failure message"
                ),
            ));
        }
        let Some(globs) = k.kernel.filter(|g| !g.is_empty()) else {
            return Err(err(
                at_field("kernel").or(entry),
                "expected kernel: with at least one glob naming the declared kernels it is seen on"
                    .into(),
            ));
        };
        for g in &globs {
            let at = entry.and_then(|(line, _)| locate::scalar(cx.text, line, None, g, 0));
            crate::glob::check(g).map_err(|why| err(at, format!("kernel {g:?}: {why}")))?;
            if !kernels.iter().any(|kn| crate::glob::matches(g, &kn.name)) {
                let known: Vec<&str> = kernels.iter().map(|kn| kn.name.as_str()).collect();
                return Err(err(
                    at.or(at_field("kernel")),
                    format!(
                        "kernel {g:?} matches no kernel (known: {})",
                        known.join(", ")
                    ),
                ));
            }
        }
        let at = match entry {
            Some((line, column)) => format!("{}:{line}:{column}", cx.path.display()),
            None => format!("{}: suite {name}, known_failures[{i}]", cx.path.display()),
        };
        known_failures.push(KnownFailure {
            case: k.case,
            reason: k.reason,
            accel: k.accel,
            message,
            kernels: globs,
            suite: name.to_string(),
            at,
        });
    }
    Ok(known_failures)
}

//! `suites:`: built-in suites by name or explicit tests, weights and
//! known failures, plus the implicit built-ins nobody declared.

use super::{check_name, Ctx, Declared};
use crate::matrix::model::{parse_duration, Suite, SuiteKind};
use crate::matrix::schema::{RawKnownFailure, RawSuite, RawTest};
use crate::matrix::MatrixError;
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

/// Validates the `suites:` list (names unique) and adds the implicit ones.
pub(in crate::matrix) fn suites(cx: &Ctx, raw: Vec<RawSuite>) -> Result<Suites, MatrixError> {
    let mut suites = Vec::new();
    let mut declared = Declared::new("suites", "suite");
    let declared_any = !raw.is_empty();
    for s in raw {
        declared.add(cx, &s.name)?;
        suites.push(declared_suite(cx, s)?);
    }
    let declared = suites.len();
    for b in IMPLICIT_SUITES {
        if !suites.iter().any(|s| s.name == *b) {
            let weight = suite::builtin(b, None).map(|t| t.len()).unwrap_or(1) as u32;
            suites.push(Suite {
                name: b.to_string(),
                kind: SuiteKind::Builtin(b.to_string()),
                weight,
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

fn declared_suite(cx: &Ctx, s: RawSuite) -> Result<Suite, MatrixError> {
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
    let known_failures = known_failures(cx, &s.name, s.known_failures)?;
    Ok(Suite {
        name: s.name,
        kind,
        weight,
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

/// `known_failures:` of suite `name` as (case glob, reason, accel).
fn known_failures(
    cx: &Ctx,
    name: &str,
    raw: Vec<RawKnownFailure>,
) -> Result<Vec<(String, String, Option<String>)>, MatrixError> {
    let mut known_failures = Vec::new();
    for k in raw {
        if let Some(a) = k.accel.as_deref().filter(|a| !["tcg", "kvm"].contains(a)) {
            return Err(cx.at_item(
                "suites",
                name,
                Some("accel"),
                format!(
                    "suite {:?}: known_failures accel {a:?}: expected tcg or kvm",
                    name
                ),
            ));
        }
        known_failures.push((k.case, k.reason, k.accel));
    }
    Ok(known_failures)
}

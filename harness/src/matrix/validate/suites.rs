//! `suites:`: built-in suites by name or explicit tests, weights and
//! known failures, plus the implicit built-ins nobody declared.

use super::{check_name, Ctx, Declared};
use crate::cases::SuiteCases;
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
    let catalog = match &kind {
        SuiteKind::Builtin(b) => SuiteCases::builtin(b),
        SuiteKind::Custom(ts) => SuiteCases::tests(ts),
    };
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

/// `known_failures:` of suite `name`. Each entry names one failure
/// exactly: `case:` a glob naming cases the suite has, `message:` a glob
/// over the failure's one-line message, `kernel:` at least one glob that
/// names a declared kernel, `reason:`; `accel:` `tcg` or `kvm` if given;
/// `intermittent:` (how often it was seen) for a failure of some runs only.
/// The entry keeps its position, its identity in every report.
fn known_failures(
    cx: &Ctx,
    name: &str,
    raw: Vec<RawKnownFailure>,
    kernels: &[Kernel],
    catalog: &SuiteCases,
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
        if k.intermittent
            .as_deref()
            .is_some_and(|i| i.trim().is_empty())
        {
            return Err(err(
                at_field("intermittent"),
                "intermittent: expected how often the failure was seen (e.g. \"2 of 6 full tiers\")".into(),
            ));
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
            intermittent: k.intermittent,
        });
    }
    Ok(known_failures)
}

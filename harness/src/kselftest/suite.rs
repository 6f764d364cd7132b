//! What the suite runs: the programs of a build in the order and with the
//! arguments of the tree's `run.sh`, then the other `TEST_GEN_PROGS`, as
//! [`SuiteTest`]s; and [`resolve_suite`], which hands out either these or
//! a built-in suite.

use super::build::{prepare, Build};
use super::source::source_spec;
use super::{is_kselftest_suite, KselftestError, Options};
use crate::kernel::cache::Cache;
use crate::suite::{Binary, SuiteTest};
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// `TEST_GEN_PROGS` that are manual tools, not tests: built, never run.
pub const MANUAL_TOOLS: &[(&str, &str)] = &[(
    "futex_numa",
    "a manual stress/benchmark tool (getopt options, no KTAP), not in run.sh",
)];

/// In-guest timeout of one upstream program (scaled by `--timeout-scale`).
pub const PROGRAM_TIMEOUT: Duration = Duration::from_secs(300);

/// One upstream program to run, with the arguments run.sh gives it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Program {
    /// Program (and KTAP test) name, e.g. `futex_wait`.
    pub name: String,
    /// Arguments.
    pub args: Vec<String>,
}

impl Build {
    /// The suite's tests: one per program, with run.sh's arguments.
    pub fn tests(&self) -> Vec<SuiteTest> {
        self.manifest
            .programs
            .iter()
            .map(|p| SuiteTest {
                name: p.name.clone(),
                binary: Binary::External {
                    file: format!("ksft-{}", p.name),
                    path: self.dir.join(&p.name),
                },
                args: p.args.clone(),
                timeout: PROGRAM_TIMEOUT,
            })
            .collect()
    }
}

/// Resolves any suite: the kselftest ones are built (or taken from the
/// cache) from `source`, or from Debian's source of `kernel_version`; the
/// others are [`crate::suite::builtin`]. A build's progress goes to `say`.
pub fn resolve_suite(
    suite: &str,
    expect: Option<&str>,
    source: Option<&str>,
    kernel_version: Option<&str>,
    opts: &Options,
    say: &(dyn Fn(&str) + Sync),
) -> Result<Vec<SuiteTest>, KselftestError> {
    if !is_kselftest_suite(suite) {
        return Ok(crate::suite::builtin(suite, expect)?);
    }
    let spec = source_spec(suite, source, kernel_version)?;
    let cache = Cache::from_env()?;
    Ok(prepare(&spec, &cache, opts, say)?.tests())
}

/// The programs to run, in order: run.sh's invocations (with their
/// arguments, shell variables set in run.sh substituted, others empty),
/// then the other built programs the kselftest runner would run as
/// `TEST_GEN_PROGS`, minus [`MANUAL_TOOLS`]. Also returns what is not run.
pub fn programs(run_sh: &str, built: &[String]) -> (Vec<Program>, Vec<(String, String)>) {
    let mut vars: Vec<(String, String)> = Vec::new();
    let mut out: Vec<Program> = Vec::new();
    for line in run_sh.lines() {
        let line = line.trim();
        if line.starts_with('#') {
            continue;
        }
        if let Some((k, v)) = line.split_once('=') {
            if !k.is_empty() && k.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
                vars.push((k.to_string(), v.trim_matches('"').to_string()));
                continue;
            }
        }
        let Some(rest) = line.strip_prefix("./") else {
            continue;
        };
        let mut words = rest.split_whitespace();
        let Some(name) = words.next() else { continue };
        if !built.iter().any(|b| b == name) {
            continue;
        }
        let args = words
            .map(|w| expand(w, &vars))
            .filter(|w| !w.is_empty())
            .collect();
        out.push(Program {
            name: name.to_string(),
            args,
        });
    }
    let mut not_run = Vec::new();
    for b in built {
        if out.iter().any(|p| &p.name == b) {
            continue;
        }
        if let Some((_, why)) = MANUAL_TOOLS.iter().find(|(n, _)| n == b) {
            not_run.push((b.clone(), why.to_string()));
        } else {
            out.push(Program {
                name: b.clone(),
                args: vec![],
            });
        }
    }
    (out, not_run)
}

/// `$VAR` / `${VAR}` words from run.sh's own assignments (unknown: empty).
fn expand(word: &str, vars: &[(String, String)]) -> String {
    let name = word
        .strip_prefix("${")
        .and_then(|w| w.strip_suffix('}'))
        .or_else(|| word.strip_prefix('$'));
    match name {
        Some(n) => vars
            .iter()
            .rev()
            .find(|(k, _)| k == n)
            .map(|(_, v)| expand(v, vars))
            .unwrap_or_default(),
        None => word.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const RUN_SH_73: &str = "#!/bin/sh\n# comment ./not_this\necho\n./futex_requeue_pi\n\necho\n./futex_wait_uninitialized_heap\n./futex_wait_private_mapped_file\n";

    fn names(p: &[Program]) -> Vec<&str> {
        p.iter().map(|p| p.name.as_str()).collect()
    }

    #[test]
    fn run_sh_order_then_other_programs_minus_manual_tools() {
        let built: Vec<String> = [
            "futex_numa",
            "futex_requeue_pi",
            "futex_wait_private_mapped_file",
            "futex_wait_uninitialized_heap",
            "robust_list",
        ]
        .map(String::from)
        .to_vec();
        let (p, not_run) = programs(RUN_SH_73, &built);
        assert_eq!(
            names(&p),
            [
                "futex_requeue_pi",
                "futex_wait_uninitialized_heap",
                "futex_wait_private_mapped_file",
                "robust_list"
            ]
        );
        assert!(p.iter().all(|p| p.args.is_empty()));
        assert_eq!(not_run.len(), 1);
        assert_eq!(not_run[0].0, "futex_numa");
    }

    #[test]
    fn older_run_sh_arguments_are_expanded() {
        let sh = "COLOR=\"\"\nDEFAULT_TIMEOUT=\"-t 5000\"\n./futex_requeue_pi $COLOR\n./futex_requeue_pi_mismatched_ops $COLOR -c\n./futex_wait_timeout ${COLOR} -t 500\n./missing -x\n";
        let built = [
            "futex_requeue_pi",
            "futex_requeue_pi_mismatched_ops",
            "futex_wait_timeout",
        ]
        .map(String::from)
        .to_vec();
        let (p, _) = programs(sh, &built);
        assert_eq!(p[0].args, Vec::<String>::new());
        assert_eq!(p[1].args, ["-c"]);
        assert_eq!(p[2].args, ["-t", "500"]);
        assert_eq!(p.len(), 3, "a program that was not built is not run");
    }
}

//! How a binary ended, and the KTAP lines that say so. Pure.

use crate::ktap::sanitize_name;
use crate::plan::PLAN_PATH;

/// kselftest's "skipped" exit status (`KSFT_SKIP`).
pub const KSFT_SKIP: i32 = 4;

/// How one planned binary ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ending {
    /// It exited with this status.
    Exited(i32),
    /// A signal killed it.
    Signaled {
        /// The signal number.
        signal: i32,
        /// Whether it dumped core.
        core_dumped: bool,
    },
    /// It outlived its `timeout_ms` and its process group was SIGKILLed.
    TimedOut {
        /// The limit it exceeded.
        timeout_ms: u64,
        /// Whether it died after SIGKILL (a task stuck in uninterruptible
        /// sleep does not, and is left behind).
        reaped: bool,
    },
    /// It could not be started (or waited for); the string says why.
    Failed(String),
}

/// The verdict of an [`Ending`] as a top-level KTAP result.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// `ok`.
    Pass,
    /// `ok ... # SKIP`.
    Skip,
    /// `not ok`.
    Fail,
}

impl Ending {
    /// Decodes a `waitpid` status.
    pub fn from_wait_status(status: i32) -> Ending {
        if libc::WIFEXITED(status) {
            Ending::Exited(libc::WEXITSTATUS(status))
        } else if libc::WIFSIGNALED(status) {
            Ending::Signaled {
                signal: libc::WTERMSIG(status),
                core_dumped: libc::WCOREDUMP(status),
            }
        } else {
            Ending::Failed(format!("unexpected wait status {status:#x}"))
        }
    }

    /// The verdict: exit 0 passes, exit [`KSFT_SKIP`] skips, anything else fails.
    pub fn verdict(&self) -> Verdict {
        match self {
            Ending::Exited(0) => Verdict::Pass,
            Ending::Exited(KSFT_SKIP) => Verdict::Skip,
            _ => Verdict::Fail,
        }
    }

    /// A one-line description for logs and diagnostics.
    pub fn describe(&self) -> String {
        match self {
            Ending::Exited(code) => format!("exited with status {code}"),
            Ending::Signaled {
                signal,
                core_dumped,
            } => format!(
                "killed by signal {}{}",
                signal_name(*signal),
                if *core_dumped { " (core dumped)" } else { "" }
            ),
            Ending::TimedOut { timeout_ms, reaped } => format!(
                "timed out after {timeout_ms} ms{}",
                if *reaped {
                    ""
                } else {
                    ", still alive after SIGKILL"
                }
            ),
            Ending::Failed(why) => why.clone(),
        }
    }
}

/// `SIGSEGV`-style name of a signal number (`SIGRTMIN+n` for real-time ones).
pub fn signal_name(sig: i32) -> String {
    let name = match sig {
        libc::SIGHUP => "SIGHUP",
        libc::SIGINT => "SIGINT",
        libc::SIGQUIT => "SIGQUIT",
        libc::SIGILL => "SIGILL",
        libc::SIGTRAP => "SIGTRAP",
        libc::SIGABRT => "SIGABRT",
        libc::SIGBUS => "SIGBUS",
        libc::SIGFPE => "SIGFPE",
        libc::SIGKILL => "SIGKILL",
        libc::SIGUSR1 => "SIGUSR1",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGUSR2 => "SIGUSR2",
        libc::SIGPIPE => "SIGPIPE",
        libc::SIGALRM => "SIGALRM",
        libc::SIGTERM => "SIGTERM",
        libc::SIGSTKFLT => "SIGSTKFLT",
        libc::SIGCHLD => "SIGCHLD",
        libc::SIGCONT => "SIGCONT",
        libc::SIGSTOP => "SIGSTOP",
        libc::SIGTSTP => "SIGTSTP",
        libc::SIGTTIN => "SIGTTIN",
        libc::SIGTTOU => "SIGTTOU",
        libc::SIGURG => "SIGURG",
        libc::SIGXCPU => "SIGXCPU",
        libc::SIGXFSZ => "SIGXFSZ",
        libc::SIGVTALRM => "SIGVTALRM",
        libc::SIGPROF => "SIGPROF",
        libc::SIGWINCH => "SIGWINCH",
        libc::SIGIO => "SIGIO",
        libc::SIGPWR => "SIGPWR",
        libc::SIGSYS => "SIGSYS",
        // The kernel's SIGRTMIN is 32 (glibc reserves 32 and 33 for itself).
        32..=64 => return format!("SIGRTMIN+{}", sig - 32),
        _ => return format!("signal {sig}"),
    };
    name.to_string()
}

/// The lines closing subtest `n`: diagnostics (indented, inside the
/// subtest) followed by the top-level result line.
pub fn result_lines(n: usize, name: &str, ending: &Ending) -> Vec<String> {
    let name = sanitize_name(name);
    match ending {
        Ending::Exited(0) => vec![format!("ok {n} {name}")],
        Ending::Exited(KSFT_SKIP) => {
            vec![format!("ok {n} {name} # SKIP exit status {KSFT_SKIP}")]
        }
        Ending::TimedOut { timeout_ms, reaped } => {
            let mut v = Vec::new();
            if !*reaped {
                v.push(
                    "  # still alive after SIGKILL (uninterruptible sleep?); left behind"
                        .to_string(),
                );
            }
            v.push(format!("not ok {n} {name} # TIMEOUT {timeout_ms} ms"));
            v
        }
        other => vec![
            format!("  # {}", one_line(&other.describe())),
            format!("not ok {n} {name}"),
        ],
    }
}

/// The whole results document when the plan cannot be used.
pub fn bad_plan_doc(error: &str) -> Vec<String> {
    vec![
        "KTAP version 1".to_string(),
        format!("# bad run plan {PLAN_PATH}: {}", one_line(error)),
        "1..0 # ERROR bad run plan".to_string(),
    ]
}

/// The whole results document when the init fails before running the plan.
pub fn init_error_doc(error: &str) -> Vec<String> {
    vec![
        "KTAP version 1".to_string(),
        format!("# guest-init failed: {}", one_line(error)),
        "1..0 # ERROR guest-init failed".to_string(),
    ]
}

/// Totals diagnostic printed after the last result (kselftest style).
pub fn totals_line(verdicts: &[Verdict]) -> String {
    let count = |v: Verdict| verdicts.iter().filter(|&&x| x == v).count();
    format!(
        "# Totals: pass:{} fail:{} skip:{}",
        count(Verdict::Pass),
        count(Verdict::Fail),
        count(Verdict::Skip)
    )
}

/// Joins lines and drops control characters, for text put on one line.
fn one_line(s: &str) -> String {
    s.chars()
        .map(|c| if c == '\n' { ' ' } else { c })
        .filter(|c| !c.is_control())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn result_lines_for_every_ending() {
        let table: &[(Ending, &[&str], Verdict)] = &[
            (Ending::Exited(0), &["ok 3 t"], Verdict::Pass),
            (
                Ending::Exited(4),
                &["ok 3 t # SKIP exit status 4"],
                Verdict::Skip,
            ),
            (
                Ending::Exited(1),
                &["  # exited with status 1", "not ok 3 t"],
                Verdict::Fail,
            ),
            (
                Ending::Signaled {
                    signal: libc::SIGSEGV,
                    core_dumped: false,
                },
                &["  # killed by signal SIGSEGV", "not ok 3 t"],
                Verdict::Fail,
            ),
            (
                Ending::Signaled {
                    signal: libc::SIGABRT,
                    core_dumped: true,
                },
                &["  # killed by signal SIGABRT (core dumped)", "not ok 3 t"],
                Verdict::Fail,
            ),
            (
                Ending::TimedOut {
                    timeout_ms: 1500,
                    reaped: true,
                },
                &["not ok 3 t # TIMEOUT 1500 ms"],
                Verdict::Fail,
            ),
            (
                Ending::TimedOut {
                    timeout_ms: 10,
                    reaped: false,
                },
                &[
                    "  # still alive after SIGKILL (uninterruptible sleep?); left behind",
                    "not ok 3 t # TIMEOUT 10 ms",
                ],
                Verdict::Fail,
            ),
            (
                Ending::Failed("cannot run /x:\nNo such file".into()),
                &["  # cannot run /x: No such file", "not ok 3 t"],
                Verdict::Fail,
            ),
        ];
        for (ending, want, verdict) in table {
            assert_eq!(result_lines(3, "t", ending), *want, "{ending:?}");
            assert_eq!(ending.verdict(), *verdict, "{ending:?}");
        }
        assert_eq!(
            result_lines(1, "a#b", &Ending::Exited(0)),
            vec!["ok 1 a_b".to_string()]
        );
    }

    #[test]
    fn wait_statuses_decode() {
        assert_eq!(Ending::from_wait_status(3 << 8), Ending::Exited(3));
        assert_eq!(
            Ending::from_wait_status(libc::SIGKILL),
            Ending::Signaled {
                signal: libc::SIGKILL,
                core_dumped: false
            }
        );
        assert_eq!(
            Ending::from_wait_status(libc::SIGSEGV | 0x80),
            Ending::Signaled {
                signal: libc::SIGSEGV,
                core_dumped: true
            }
        );
    }

    #[test]
    fn signal_names() {
        assert_eq!(signal_name(9), "SIGKILL");
        assert_eq!(signal_name(11), "SIGSEGV");
        assert_eq!(signal_name(31), "SIGSYS");
        assert_eq!(signal_name(34), "SIGRTMIN+2");
        assert_eq!(signal_name(99), "signal 99");
    }

    #[test]
    fn bad_plan_and_totals() {
        assert_eq!(
            bad_plan_doc("expected value\nat line 1"),
            vec![
                "KTAP version 1",
                "# bad run plan /harness/plan.json: expected value at line 1",
                "1..0 # ERROR bad run plan",
            ]
        );
        assert_eq!(
            init_error_doc("mount /sys: EPERM"),
            vec![
                "KTAP version 1",
                "# guest-init failed: mount /sys: EPERM",
                "1..0 # ERROR guest-init failed",
            ]
        );
        assert_eq!(
            totals_line(&[Verdict::Pass, Verdict::Fail, Verdict::Pass]),
            "# Totals: pass:2 fail:1 skip:0"
        );
    }
}

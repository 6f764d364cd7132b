//! A test process that outlived its SIGKILL (a task in uninterruptible
//! sleep, or spinning in the kernel): what `/proc` says it is doing
//! (state, `wchan`, kernel stack), bounded and sanitised like any guest
//! text, as diagnostic lines of its subtest. Reading is the only I/O; the
//! rest is pure.

use super::lines::sanitize_line;
use std::io::Read;

/// Bytes of `/proc/<pid>/stat` and `/proc/<pid>/wchan` read.
const SMALL_READ: u64 = 1024;
/// Bytes of `/proc/<pid>/stack` read.
const STACK_BYTES: u64 = 4096;
/// Kernel stack frames kept.
pub const STACK_LINES: usize = 24;
/// Characters kept of one frame or of the `wchan` symbol.
const FIELD_CHARS: usize = 200;

/// What `/proc` said about a process still alive after SIGKILL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stuck {
    /// Its pid: never waited for again (the next binary's child is waited
    /// for by its own pid, so the two cannot be confused).
    pub pid: i32,
    /// The state letter of `/proc/<pid>/stat` (`D`: uninterruptible
    /// sleep), if readable.
    pub state: Option<char>,
    /// `/proc/<pid>/wchan` (the kernel function it sleeps in), if readable
    /// and not `0`.
    pub wchan: Option<String>,
    /// `/proc/<pid>/stack`, one frame a line (needs `CONFIG_STACKTRACE`
    /// and root), at most [`STACK_LINES`].
    pub stack: Vec<String>,
}

impl Stuck {
    /// Reads what `/proc` has on `pid` (whatever is unreadable stays empty).
    pub fn read(pid: i32) -> Stuck {
        let file = |name: &str, limit: u64| read_bounded(&format!("/proc/{pid}/{name}"), limit);
        Stuck::from_proc(
            pid,
            file("stat", SMALL_READ).as_deref(),
            file("wchan", SMALL_READ).as_deref(),
            file("stack", STACK_BYTES).as_deref(),
        )
    }

    /// Decodes the contents of `/proc/<pid>/{stat,wchan,stack}`.
    pub fn from_proc(
        pid: i32,
        stat: Option<&[u8]>,
        wchan: Option<&[u8]>,
        stack: Option<&[u8]>,
    ) -> Stuck {
        let wchan = wchan
            .map(|w| field(w.split(|&b| b == b'\n').next().unwrap_or_default()))
            .filter(|w| !w.is_empty() && w != "0");
        let stack = stack
            .unwrap_or_default()
            .split(|&b| b == b'\n')
            .map(field)
            .filter(|l| !l.is_empty())
            .take(STACK_LINES)
            .collect();
        Stuck {
            pid,
            state: stat.and_then(stat_state),
            wchan,
            stack,
        }
    }

    /// Whether it sleeps uninterruptibly (`D`), the usual reason SIGKILL
    /// does not end a task.
    pub fn in_d_state(&self) -> bool {
        self.state == Some('D')
    }

    /// The diagnostic lines of its subtest (indented, `  # ...`): what it
    /// is doing, then its kernel stack.
    pub fn lines(&self) -> Vec<String> {
        let what = match self.state {
            Some('D') => "stuck in D state after SIGKILL".to_string(),
            Some(s) => format!("still alive after SIGKILL (state {s})"),
            None => "still alive after SIGKILL (state unreadable)".to_string(),
        };
        let wchan = match &self.wchan {
            Some(w) => format!("wchan {w}"),
            None => "wchan unreadable".to_string(),
        };
        let mut v = vec![format!(
            "  # {what}: pid {}, {wchan}; left behind, the plan goes on",
            self.pid
        )];
        if !self.stack.is_empty() {
            v.push(format!("  # kernel stack of pid {}:", self.pid));
            v.extend(self.stack.iter().map(|l| format!("  #   {l}")));
        }
        v
    }
}

/// The state letter of a `/proc/<pid>/stat` line: the first field after
/// the last `)` (the command name may hold spaces and parentheses).
fn stat_state(stat: &[u8]) -> Option<char> {
    let close = stat.iter().rposition(|&b| b == b')')?;
    stat[close + 1..]
        .iter()
        .find(|b| !b.is_ascii_whitespace())
        .filter(|b| b.is_ascii_alphabetic())
        .map(|&b| char::from(b))
}

/// One line, sanitised, trimmed and cut at [`FIELD_CHARS`].
fn field(raw: &[u8]) -> String {
    sanitize_line(raw)
        .trim()
        .chars()
        .take(FIELD_CHARS)
        .collect()
}

/// At most `limit` bytes of a file; `None` when it cannot be read (a
/// `/proc` file of a process that just died, or a kernel without it).
fn read_bounded(path: &str, limit: u64) -> Option<Vec<u8>> {
    let mut buf = Vec::new();
    std::fs::File::open(path)
        .ok()?
        .take(limit)
        .read_to_end(&mut buf)
        .ok()?;
    Some(buf)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_d_state_task_is_named_with_its_wchan_and_stack() {
        let stack = b"[<0>] lkdtm_HUNG_TASK+0x1a/0x20\n[<0>] direct_entry+0xd5/0x110\n\
                      [<0>] full_proxy_write+0x54/0x80\n";
        let s = Stuck::from_proc(
            93,
            Some(b"93 (fault (x) y) D 1 93 93 0 -1 4194560 109\n"),
            Some(b"lkdtm_HUNG_TASK"),
            Some(stack),
        );
        assert!(s.in_d_state());
        assert_eq!(
            s.lines(),
            [
                "  # stuck in D state after SIGKILL: pid 93, wchan lkdtm_HUNG_TASK; left behind, the plan goes on",
                "  # kernel stack of pid 93:",
                "  #   [<0>] lkdtm_HUNG_TASK+0x1a/0x20",
                "  #   [<0>] direct_entry+0xd5/0x110",
                "  #   [<0>] full_proxy_write+0x54/0x80",
            ]
        );
    }

    #[test]
    fn unreadable_or_hostile_proc_files_stay_bounded_and_clean() {
        let s = Stuck::from_proc(7, None, Some(b"0"), None);
        assert_eq!(
            s.lines(),
            ["  # still alive after SIGKILL (state unreadable): pid 7, wchan unreadable; left behind, the plan goes on"]
        );
        let mut stack = Vec::new();
        for i in 0..100 {
            stack.extend_from_slice(format!("[<0>] f{i}\x1b[31m\0+0x1/0x2\n").as_bytes());
        }
        stack.extend_from_slice(&[b'x'; 5000]);
        let s = Stuck::from_proc(8, Some(b"8 (spin) R 1"), Some(&[b'w'; 3000]), Some(&stack));
        assert_eq!(s.state, Some('R'));
        assert_eq!(s.wchan.as_deref().map(str::len), Some(FIELD_CHARS));
        assert_eq!(s.stack.len(), STACK_LINES);
        assert_eq!(s.stack[0], "[<0>] f0[31m+0x1/0x2");
        let lines = s.lines();
        assert!(lines[0].starts_with("  # still alive after SIGKILL (state R): pid 8, wchan www"));
        assert!(lines
            .iter()
            .all(|l| l.chars().all(|c| !c.is_control()) && l.len() < 300));
        assert_eq!(stat_state(b"no paren"), None);
        assert_eq!(stat_state(b"1 (a) "), None);
    }

    #[test]
    fn reading_a_live_process() {
        let s = Stuck::read(std::process::id() as i32);
        assert!(matches!(s.state, Some('R' | 'S')), "{s:?}");
        let gone = Stuck::read(i32::MAX);
        assert_eq!((gone.state, gone.wchan, gone.stack.len()), (None, None, 0));
    }
}

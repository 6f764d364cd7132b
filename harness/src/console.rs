//! Console scanner: finds kernel reports (panic, Oops, BUG, WARNING,
//! lockups, hung tasks, KASAN, lockdep) in the serial console log and
//! attributes each to the guest test that was running (from the
//! `harness: begin/end` markers guest-init writes to /dev/kmsg).
//!
//! Matching ignores the `[    1.234567] ` printk timestamps (and a
//! `[    T1]` caller id); excerpts keep them. A report runs from its first
//! line to its end marker (`---[ end trace ... ]---`, `---[ end Kernel
//! panic ...`, KASAN's closing `=====` rule, the `</TASK>` that ends the
//! stack dump of lockup, stall, hung task and lockdep reports), the next
//! report, the next harness marker, or a bound.

use guest_tests::plan::{CASE_BEGIN, CASE_END, KMSG_MARKER};
use std::collections::VecDeque;

/// Lines kept in one report's excerpt.
pub const MAX_EXCERPT_LINES: usize = 60;
/// Bytes kept in one report's excerpt.
pub const MAX_EXCERPT_BYTES: usize = 8 * 1024;
/// Reports kept; the others are only counted (a WARNING storm).
pub const MAX_REPORTS: usize = 100;
/// Lines kept in [`ConsoleScan::tail`].
pub const TAIL_LINES: usize = 50;
/// Bytes kept in [`ConsoleScan::tail`].
pub const MAX_TAIL_BYTES: usize = 8 * 1024;
/// Bytes of one console line looked at.
const MAX_LINE_BYTES: usize = 4096;

/// What kind of kernel report.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ReportKind {
    /// `Kernel panic - not syncing`
    Panic,
    /// `Oops:`
    Oops,
    /// `BUG:` / `kernel BUG at`
    Bug,
    /// `WARNING:` / `------------[ cut here ]`
    Warning,
    /// `watchdog: BUG: soft lockup`
    SoftLockup,
    /// hard LOCKUP
    HardLockup,
    /// `INFO: task ... blocked for more than`
    HungTask,
    /// `BUG: KASAN:`
    Kasan,
    /// `WARNING: possible circular locking dependency` and friends
    Lockdep,
    /// RCU stall
    RcuStall,
}

impl ReportKind {
    /// Every kind.
    pub const ALL: &'static [ReportKind] = &[
        ReportKind::Panic,
        ReportKind::Oops,
        ReportKind::Bug,
        ReportKind::Warning,
        ReportKind::SoftLockup,
        ReportKind::HardLockup,
        ReportKind::HungTask,
        ReportKind::Kasan,
        ReportKind::Lockdep,
        ReportKind::RcuStall,
    ];

    /// A short name for case names and summaries (`panic`, `soft-lockup`, ...).
    pub fn name(self) -> &'static str {
        match self {
            ReportKind::Panic => "panic",
            ReportKind::Oops => "oops",
            ReportKind::Bug => "bug",
            ReportKind::Warning => "warning",
            ReportKind::SoftLockup => "soft-lockup",
            ReportKind::HardLockup => "hard-lockup",
            ReportKind::HungTask => "hung-task",
            ReportKind::Kasan => "kasan",
            ReportKind::Lockdep => "lockdep",
            ReportKind::RcuStall => "rcu-stall",
        }
    }
}

impl ReportKind {
    /// Whether the kernel says a task or a CPU stopped making progress
    /// (hung task, soft or hard lockup, RCU stall) or that it broke inside
    /// itself (Oops, BUG): a sign that the guest may be wedged, which
    /// [`crate::vm`] weighs against the results stream.
    pub fn may_wedge(self) -> bool {
        matches!(
            self,
            ReportKind::HungTask
                | ReportKind::SoftLockup
                | ReportKind::HardLockup
                | ReportKind::RcuStall
                | ReportKind::Oops
                | ReportKind::Bug
        )
    }

    /// Whether the kernel says a CPU is spinning in the kernel (soft or
    /// hard lockup, RCU stall), not a task sleeping: a task that also
    /// outlived its SIGKILL holds that CPU for good.
    pub fn is_cpu_lockup(self) -> bool {
        matches!(
            self,
            ReportKind::SoftLockup | ReportKind::HardLockup | ReportKind::RcuStall
        )
    }
}

/// The kind of report a console line starts, if any (timestamps ignored;
/// a `[ cut here ]` line says no kind yet): for watching the console live.
pub fn report_start(line: &str) -> Option<ReportKind> {
    match classify(strip_timestamp(line).trim_start()) {
        Some(Start::Report(k)) => Some(k),
        Some(Start::CutHere) | None => None,
    }
}

impl std::fmt::Display for ReportKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// One kernel report found on the console.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelReport {
    /// Kind.
    pub kind: ReportKind,
    /// The top-level guest test running when it was printed, if any.
    pub test: Option<String>,
    /// The case of `test` running when it was printed (its KTAP name, from
    /// the `harness: case-begin/case-end` markers a case-based binary
    /// writes), if any: the case the report fails.
    pub case: Option<String>,
    /// Its number in the results stream (`harness: begin <n> ...`): which
    /// iteration of a repeated plan it belongs to.
    pub test_number: Option<usize>,
    /// 1-based console line of the report's first line.
    pub line: usize,
    /// The report's text, bounded.
    pub excerpt: String,
    /// The line that says what happened (`WARNING: CPU: 1 PID: 2 at ...`),
    /// without its timestamp.
    pub title: String,
}

/// Everything the scanner extracts.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConsoleScan {
    /// Reports in order.
    pub reports: Vec<KernelReport>,
    /// The test begun (per markers) and not ended when the log stops.
    pub running_at_end: Option<String>,
    /// "futex hash table entries: N".
    pub futex_hash_entries: Option<u64>,
    /// Reports found beyond [`MAX_REPORTS`], not kept.
    pub omitted_reports: usize,
    /// The last lines of the console, bounded, for failures nothing else explains.
    pub tail: String,
}

/// Scans a console log.
pub fn scan(console: &[u8]) -> ConsoleScan {
    let mut s = Scanner::default();
    let console = console.strip_suffix(b"\n").unwrap_or(console);
    for (i, raw) in console.split(|&b| b == b'\n').enumerate() {
        let mut raw = raw;
        while let [rest @ .., b'\r'] = raw {
            raw = rest;
        }
        let raw = &raw[..raw.len().min(MAX_LINE_BYTES)];
        s.line(i + 1, &String::from_utf8_lossy(raw));
    }
    s.finish()
}

#[derive(Default)]
struct Scanner {
    out: ConsoleScan,
    /// Tests begun and not yet ended, innermost last.
    running: Vec<(Option<usize>, String)>,
    /// The case of the innermost test begun and not yet ended.
    case: Option<String>,
    open: Option<Open>,
    tail: VecDeque<String>,
}

/// A report still collecting lines.
struct Open {
    /// `None` right after `[ cut here ]`, until the next line says what it is.
    kind: Option<ReportKind>,
    line: usize,
    title: String,
    excerpt: String,
    lines: usize,
    test: Option<String>,
    case: Option<String>,
    test_number: Option<usize>,
}

/// What a line starts, if anything.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Start {
    CutHere,
    Report(ReportKind),
}

impl Scanner {
    fn line(&mut self, line_no: usize, line: &str) {
        if self.tail.len() == TAIL_LINES {
            self.tail.pop_front();
        }
        self.tail.push_back(line.to_string());

        let text = strip_timestamp(line).trim_start();
        if let Some(marker) = text.strip_prefix(KMSG_MARKER) {
            // User space is running again: whatever report was open is over.
            self.close();
            self.marker(marker);
            return;
        }
        if self.out.futex_hash_entries.is_none() {
            self.out.futex_hash_entries = futex_hash_entries(text);
        }

        let start = classify(text);
        if let Some(open) = &mut self.open {
            let continues = match (open.kind, start) {
                (_, None) => true,
                // `[ cut here ]` is followed by the line that says what it is.
                (None, Some(Start::Report(k))) if k != ReportKind::Panic => {
                    open.kind = Some(k);
                    open.title = title(text);
                    true
                }
                // `BUG: unable to handle page fault` / `kernel BUG at` go on
                // with `Oops: ...`: one report.
                (Some(ReportKind::Bug), Some(Start::Report(ReportKind::Oops))) => true,
                _ => false,
            };
            if continues {
                open.push(line);
                if open.kind.is_none() && open.lines > 3 {
                    open.kind = Some(ReportKind::Warning);
                }
                if ends(open.kind, text)
                    || open.lines >= MAX_EXCERPT_LINES
                    || open.excerpt.len() >= MAX_EXCERPT_BYTES
                {
                    self.close();
                }
                return;
            }
            self.close();
        }
        let Some(start) = start else {
            return;
        };
        if self.out.reports.len() >= MAX_REPORTS {
            self.out.omitted_reports += 1;
            return;
        }
        let mut open = Open {
            kind: match start {
                Start::CutHere => None,
                Start::Report(k) => Some(k),
            },
            line: line_no,
            title: title(text),
            excerpt: String::new(),
            lines: 0,
            test: self.running.last().map(|r| r.1.clone()),
            case: self.case.clone(),
            test_number: self.running.last().and_then(|r| r.0),
        };
        open.push(line);
        self.open = Some(open);
    }

    /// `begin <n> <name>` / `end <n> <name>` around a binary,
    /// `case-begin <name>` / `case-end <name>` around one of its cases.
    fn marker(&mut self, marker: &str) {
        let mut words = marker.split_whitespace();
        let verb = words.next();
        if verb == Some(CASE_BEGIN) || verb == Some(CASE_END) {
            let name = words.collect::<Vec<_>>().join(" ");
            if verb == Some(CASE_BEGIN) {
                self.case = Some(name);
            } else if self.case.as_deref() == Some(name.as_str()) {
                self.case = None;
            }
            return;
        }
        let number = words.next().and_then(|n| n.parse::<usize>().ok());
        let name = words.collect::<Vec<_>>().join(" ");
        match verb {
            Some("begin") => self.running.push((number, name)),
            Some("end") => {
                if let Some(i) = self.running.iter().rposition(|r| r.1 == name) {
                    self.running.remove(i);
                }
            }
            _ => return,
        }
        // A case belongs to the binary that was running it.
        self.case = None;
    }

    fn close(&mut self) {
        if let Some(open) = self.open.take() {
            self.out.reports.push(KernelReport {
                kind: open.kind.unwrap_or(ReportKind::Warning),
                test: open.test,
                case: open.case,
                test_number: open.test_number,
                line: open.line,
                excerpt: open.excerpt,
                title: open.title,
            });
        }
    }

    fn finish(mut self) -> ConsoleScan {
        self.close();
        self.out.running_at_end = self.running.pop().map(|r| r.1);
        let tail: Vec<String> = self.tail.into_iter().collect();
        self.out.tail = keep_end(&tail.join("\n"), MAX_TAIL_BYTES).to_string();
        self.out
    }
}

impl Open {
    fn push(&mut self, line: &str) {
        let room = MAX_EXCERPT_BYTES.saturating_sub(self.excerpt.len());
        if !self.excerpt.is_empty() {
            self.excerpt.push('\n');
        }
        self.excerpt.push_str(keep_start(line, room));
        self.lines += 1;
    }
}

/// Which report, if any, a line (without timestamp) starts.
fn classify(text: &str) -> Option<Start> {
    use ReportKind::*;
    const LOCKDEP: &[&str] = &[
        "possible circular locking dependency detected",
        "possible recursive locking detected",
        "inconsistent lock state",
        "possible irq lock inversion dependency detected",
        "bad unlock balance detected",
        "suspicious RCU usage",
        "lock held when returning to user space",
        "held lock freed",
    ];
    let kind = if text.starts_with("------------[ cut here ]") {
        return Some(Start::CutHere);
    } else if text.starts_with("Kernel panic - not syncing") {
        Panic
    } else if text.contains("BUG: soft lockup") {
        SoftLockup
    } else if text.contains("detected hard LOCKUP") {
        HardLockup
    } else if text.starts_with("BUG: KASAN:") {
        Kasan
    } else if text.starts_with("INFO: task ") && text.contains(" blocked for more than ") {
        HungTask
    } else if text.starts_with("WARNING: ") && LOCKDEP.iter().any(|p| text.contains(p)) {
        Lockdep
    } else if (text.starts_with("rcu: INFO: ") || text.starts_with("INFO: rcu"))
        && (text.contains("detected stall") || text.contains("self-detected stall"))
    {
        RcuStall
    } else if text.starts_with("Oops: ") || text.starts_with("general protection fault") {
        Oops
    } else if text.starts_with("BUG: ") || text.starts_with("kernel BUG at ") {
        Bug
    } else if text.starts_with("WARNING: ") {
        Warning
    } else {
        return None;
    };
    Some(Start::Report(kind))
}

/// A report's title as the kernel would name its source files in any
/// build: a harness build with ccache hands gcc its sources as
/// `../src/...` (`CCACHE_BASEDIR`, `kernel::build`), which the kernel's
/// own `-fmacro-prefix-map` (an absolute srctree) does not strip, so a
/// WARN says `../src/mm/slub.c:6734`. Dropping that prefix keeps a known
/// failure's message, and a comparison of two runs, the same for builds
/// with and without ccache.
fn title(text: &str) -> String {
    text.replace(" ../src/", " ")
}

/// Whether this line (already in the excerpt) is the last of the report.
fn ends(kind: Option<ReportKind>, text: &str) -> bool {
    use ReportKind::*;
    if text.starts_with("---[ end trace") || text.starts_with("---[ end Kernel panic") {
        return true;
    }
    match kind {
        Some(Kasan) => text.len() >= 20 && text.bytes().all(|b| b == b'='),
        Some(SoftLockup | HardLockup | HungTask | Lockdep | RcuStall) => {
            text.trim_end() == "</TASK>"
        }
        _ => false,
    }
}

/// `[    1.234567] text` -> `text`; also a `[    T1]` caller id after it.
fn strip_timestamp(line: &str) -> &str {
    let mut s = line;
    for _ in 0..2 {
        let Some(rest) = s.strip_prefix('[') else {
            break;
        };
        let Some(close) = rest.find(']') else {
            break;
        };
        let inside = &rest[..close];
        let stamp = !inside.trim().is_empty()
            && inside
                .bytes()
                .all(|b| b == b' ' || b == b'.' || b == b'T' || b == b'C' || b.is_ascii_digit());
        if !stamp {
            break;
        }
        let after = &rest[close + 1..];
        s = after.strip_prefix(' ').unwrap_or(after);
    }
    s
}

/// `futex hash table entries: 1024 (...)` -> 1024.
fn futex_hash_entries(text: &str) -> Option<u64> {
    const KEY: &str = "futex hash table entries: ";
    let at = text.find(KEY)? + KEY.len();
    let rest = &text[at..];
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    rest[..digits].parse().ok()
}

/// The longest prefix of `s` of at most `max` bytes, on a char boundary.
fn keep_start(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// The longest suffix of `s` of at most `max` bytes, on a char boundary.
fn keep_end(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut start = s.len() - max;
    while !s.is_char_boundary(start) {
        start += 1;
    }
    &s[start..]
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fmt::Write;

    /// One line per finding: what the verdict and a human care about.
    fn summary(scan: &ConsoleScan) -> String {
        let mut out = String::new();
        if let Some(n) = scan.futex_hash_entries {
            let _ = writeln!(out, "futex hash table entries: {n}");
        }
        for r in &scan.reports {
            let last = r.excerpt.lines().last().unwrap_or("");
            let _ = writeln!(
                out,
                "{} @{} in {}: {} | {} lines, last: {}",
                r.kind,
                r.line,
                r.test.as_deref().unwrap_or("-"),
                r.title,
                r.excerpt.lines().count(),
                strip_timestamp(last).trim()
            );
        }
        if scan.omitted_reports > 0 {
            let _ = writeln!(out, "omitted: {}", scan.omitted_reports);
        }
        if let Some(t) = &scan.running_at_end {
            let _ = writeln!(out, "running at end: {t}");
        }
        out
    }

    #[track_caller]
    fn check(input: &str, expected: &str) {
        let got = summary(&scan(input.as_bytes()));
        let expected: String = expected
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .map(|l| format!("{l}\n"))
            .collect();
        assert_eq!(
            got, expected,
            "\n--- got:\n{got}\n--- expected:\n{expected}"
        );
    }

    macro_rules! fixture {
        ($name:literal) => {
            include_str!(concat!("../tests/fixtures/console/", $name))
        };
    }

    #[test]
    fn fixtures() {
        let cases: &[(&str, &str, &str)] = &[
            (
                "clean boot and run",
                fixture!("clean.log"),
                "futex hash table entries: 1024",
            ),
            (
                "a WARNING inside a test, cut here block counted once",
                fixture!("warning.log"),
                "
                futex hash table entries: 512
                warning @5 in futex_basic: WARNING: CPU: 1 PID: 73 at kernel/futex/core.c:1203 futex_hash_put+0x4f/0x60 | 19 lines, last: ---[ end trace 0000000000000000 ]---
                ",
            ),
            (
                "page fault: BUG + Oops is one report, then the panic",
                fixture!("oops-panic.log"),
                "
                bug @4 in smoke: BUG: kernel NULL pointer dereference, address: 0000000000000008 | 25 lines, last: ---[ end trace 0000000000000000 ]---
                panic @30 in smoke: Kernel panic - not syncing: Fatal exception | 3 lines, last: ---[ end Kernel panic - not syncing: Fatal exception ]---
                running at end: smoke
                ",
            ),
            (
                "hung task while the host watchdog waits",
                fixture!("hung-task.log"),
                "
                hung-task @4 in resize: INFO: task futex_resize:91 blocked for more than 122 seconds. | 16 lines, last: </TASK>
                running at end: resize
                ",
            ),
            (
                "lockdep, soft lockup, RCU stall, KASAN, kernel BUG at",
                fixture!("mixed.log"),
                "
                lockdep @3 in -: WARNING: possible circular locking dependency detected | 12 lines, last: </TASK>
                soft-lockup @16 in requeue: watchdog: BUG: soft lockup - CPU#0 stuck for 22s! [futex_requeue:88] | 9 lines, last: </TASK>
                rcu-stall @25 in requeue: rcu: INFO: rcu_preempt self-detected stall on CPU | 8 lines, last: </TASK>
                kasan @36 in waitv: BUG: KASAN: slab-use-after-free in futex_unqueue+0x3a/0x90 | 9 lines, last: ==================================================================
                bug @45 in waitv: kernel BUG at kernel/futex/core.c:412! | 4 lines, last: ---[ end trace 0000000000000000 ]---
                hard-lockup @50 in -: NMI watchdog: Watchdog detected hard LOCKUP on cpu 1 | 2 lines, last: Modules linked in:
                ",
            ),
        ];
        for (what, input, expected) in cases {
            eprintln!("case: {what}");
            check(input, expected);
        }
    }

    #[test]
    fn report_start_names_stalls_on_live_lines() {
        let table: &[(&str, Option<ReportKind>)] = &[
            (
                "[   12.5] INFO: task fault:93 blocked for more than 1 seconds.",
                Some(ReportKind::HungTask),
            ),
            (
                "[    3.1] [    T9] watchdog: BUG: soft lockup - CPU#1 stuck for 3s! [fault:80]",
                Some(ReportKind::SoftLockup),
            ),
            (
                "rcu: INFO: rcu_preempt self-detected stall on CPU",
                Some(ReportKind::RcuStall),
            ),
            (
                "[    1.0] WARNING: CPU: 0 PID: 1 at x",
                Some(ReportKind::Warning),
            ),
            ("[    1.0] ------------[ cut here ]------------", None),
            ("harness: begin 1 smoke", None),
        ];
        for (line, kind) in table {
            assert_eq!(report_start(line), *kind, "{line}");
        }
        let wedge: Vec<_> = ReportKind::ALL
            .iter()
            .filter(|k| k.may_wedge())
            .map(|k| k.name())
            .collect();
        assert_eq!(
            wedge,
            [
                "oops",
                "bug",
                "soft-lockup",
                "hard-lockup",
                "hung-task",
                "rcu-stall"
            ]
        );
        let cpu: Vec<_> = ReportKind::ALL
            .iter()
            .filter(|k| k.is_cpu_lockup())
            .map(|k| k.name())
            .collect();
        assert_eq!(cpu, ["soft-lockup", "hard-lockup", "rcu-stall"]);
    }

    #[test]
    fn small_cases() {
        let cases: &[(&str, &str)] = &[
            // Without its cut-here line, a WARNING is still one report.
            (
                "[    2.0] WARNING: CPU: 0 PID: 1 at a.c:1 f+0x1/0x2\n[    2.1] ---[ end trace 1 ]---",
                "warning @1 in -: WARNING: CPU: 0 PID: 1 at a.c:1 f+0x1/0x2 | 2 lines, last: ---[ end trace 1 ]---",
            ),
            // Older x86 wording of a GP fault, caller ids after the timestamp.
            (
                "[    1.000000][    T1] general protection fault: 0000 [#1] SMP\n",
                "oops @1 in -: general protection fault: 0000 [#1] SMP | 1 lines, last: general protection fault: 0000 [#1] SMP",
            ),
            (
                "[    1.0] Oops: general protection fault, probably for non-canonical address 0xdead: 0000 [#1] PREEMPT SMP\n",
                "oops @1 in -: Oops: general protection fault, probably for non-canonical address 0xdead: 0000 [#1] PREEMPT SMP | 1 lines, last: Oops: general protection fault, probably for non-canonical address 0xdead: 0000 [#1] PREEMPT SMP",
            ),
            // A marker ends a report with no end line; end closes the test.
            (
                "harness: begin 1 a\r\nBUG: scheduling while atomic: x/1/0x00000002\r\nharness: end 1 a\r\nWARNING: CPU: 0 PID: 1 at b.c:2 g\r\n",
                "bug @2 in a: BUG: scheduling while atomic: x/1/0x00000002 | 1 lines, last: BUG: scheduling while atomic: x/1/0x00000002
                 warning @4 in -: WARNING: CPU: 0 PID: 1 at b.c:2 g | 1 lines, last: WARNING: CPU: 0 PID: 1 at b.c:2 g",
            ),
            // Older kernels print the hash size from alloc_large_system_hash.
            (
                "[    0.1] futex hash table entries: 256 (order: 2, 16384 bytes, linear)\n",
                "futex hash table entries: 256",
            ),
            // Nothing but noise.
            ("\u{0}\u{1b}[0m\n[ not a stamp ] BUGS: none\n", ""),
        ];
        for (input, expected) in cases {
            check(input, expected);
        }
    }

    #[test]
    fn excerpts_keep_timestamps_and_are_bounded() {
        let mut log = String::from("[    5.000000] ------------[ cut here ]------------\n");
        log.push_str("[    5.000001] WARNING: CPU: 0 PID: 1 at x.c:1 f\n");
        for i in 0..200 {
            let _ = writeln!(log, "[    5.{i:06}]  frame_{i}+0x1/0x2");
        }
        let scan = scan(log.as_bytes());
        let r = &scan.reports[0];
        assert!(r
            .excerpt
            .starts_with("[    5.000000] ------------[ cut here ]"));
        assert_eq!(r.excerpt.lines().count(), MAX_EXCERPT_LINES);
        assert_eq!(r.title, "WARNING: CPU: 0 PID: 1 at x.c:1 f");
        for (line, want) in [
            (
                "WARNING: ../src/mm/slub.c:6734 at free_large_kmalloc+0x10/0x85, CPU#3: futex-resize/350",
                "WARNING: mm/slub.c:6734 at free_large_kmalloc+0x10/0x85, CPU#3: futex-resize/350",
            ),
            (
                "kernel BUG at ../src/kernel/futex/pi.c:812!",
                "kernel BUG at kernel/futex/pi.c:812!",
            ),
        ] {
            let s = super::scan(format!("[    1.0] {line}\n").as_bytes());
            assert_eq!(s.reports[0].title, want, "ccache's relative source path is dropped");
        }
        // The rest of the trace starts no new report.
        assert_eq!(scan.reports.len(), 1);
        assert_eq!(scan.tail.lines().count(), TAIL_LINES);
        assert!(scan.tail.ends_with("frame_199+0x1/0x2"));

        let huge = format!("BUG: {}\n{}", "x".repeat(10_000), "y".repeat(10_000));
        let r = &super::scan(huge.as_bytes()).reports[0];
        assert!(r.excerpt.len() <= MAX_EXCERPT_BYTES + 1);
    }

    #[test]
    fn report_storms_are_bounded() {
        let log = "WARNING: CPU: 0 PID: 1 at x.c:1 f\n".repeat(MAX_REPORTS + 7);
        let scan = scan(log.as_bytes());
        assert_eq!(scan.reports.len(), MAX_REPORTS);
        assert_eq!(scan.omitted_reports, 7);
    }

    #[test]
    fn nested_markers_attribute_to_the_innermost_open_test() {
        let log = "harness: begin 1 outer\nharness: begin 2 inner\nharness: end 2 inner\nBUG: x\n";
        let scan = scan(log.as_bytes());
        assert_eq!(scan.reports[0].test.as_deref(), Some("outer"));
        assert_eq!(scan.running_at_end.as_deref(), Some("outer"));
    }

    #[test]
    fn case_markers_name_the_case_within_the_running_test() {
        let log = "harness: begin 1 futex-pi\nharness: case-begin lock a\nWARNING: a\n\
            harness: case-end lock a\nWARNING: between\nharness: case-begin never-ended\n\
            harness: end 1 futex-pi\nharness: begin 2 smoke\nBUG: next binary\n";
        let scan = scan(log.as_bytes());
        let got: Vec<(Option<&str>, Option<&str>)> = scan
            .reports
            .iter()
            .map(|r| (r.test.as_deref(), r.case.as_deref()))
            .collect();
        assert_eq!(
            got,
            [
                (Some("futex-pi"), Some("lock a")),
                (Some("futex-pi"), None),
                (Some("smoke"), None),
            ]
        );
    }

    proptest::proptest! {
        #[test]
        fn never_panics(input in proptest::collection::vec(proptest::num::u8::ANY, 0..4096)) {
            let _ = scan(&input);
        }
    }
}

//! Console scanner: finds kernel reports (panic, Oops, BUG, WARNING,
//! lockups, hung tasks, KASAN, lockdep) in the serial console log and
//! attributes each to the guest test that was running (from the
//! `harness: begin/end` markers guest-init writes to /dev/kmsg).

/// What kind of kernel report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
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

/// One kernel report found on the console.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelReport {
    /// Kind.
    pub kind: ReportKind,
    /// The top-level guest test running when it was printed, if any.
    pub test: Option<String>,
    /// 1-based console line of the report's first line.
    pub line: usize,
    /// The report's text, bounded.
    pub excerpt: String,
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
}

/// Scans a console log.
pub fn scan(_console: &[u8]) -> ConsoleScan {
    ConsoleScan::default()
}

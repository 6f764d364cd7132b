//! What kind of failure an error is, so the binary maps it to an exit
//! status in one place: 2 for the user's input, 69 for the host.

/// The kind of an error that stops a command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// Bad command line or input file (exit 2).
    Usage,
    /// The host or the network failed (exit 69).
    Infrastructure,
}

impl ErrorKind {
    /// The exit status (sysexits: `EX_USAGE`-like 2, `EX_UNAVAILABLE` 69).
    pub fn exit_code(self) -> u8 {
        match self {
            ErrorKind::Usage => exit::USAGE,
            ErrorKind::Infrastructure => exit::INFRASTRUCTURE,
        }
    }
}

/// An error with its kind: what every front door returns. It displays as
/// the error it wraps and continues that error's chain (so a cause is
/// printed once).
#[derive(Debug)]
pub struct Error {
    /// Usage or infrastructure.
    pub kind: ErrorKind,
    /// What went wrong.
    pub source: Box<dyn std::error::Error + Send + Sync>,
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.source.fmt(f)
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source.source()
    }
}

impl Error {
    /// A usage error.
    pub fn usage(e: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> Error {
        Error {
            kind: ErrorKind::Usage,
            source: e.into(),
        }
    }
    /// An infrastructure error.
    pub fn infra(e: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> Error {
        Error {
            kind: ErrorKind::Infrastructure,
            source: e.into(),
        }
    }
}

/// The exit statuses of every command: the one table. `--help`, the man
/// pages and README's table are written from it.
pub mod exit {
    /// Every result as expected.
    pub const OK: u8 = 0;
    /// An unexpected test result (or no result at all); for `bisect`, no
    /// single first bad commit.
    pub const TESTS_FAILED: u8 = 1;
    /// Bad command line or input file, refused before any work.
    pub const USAGE: u8 = 2;
    /// The host is not ready: `doctor` or `setup` found something the
    /// default run needs missing; `kernel path` of a definition not built.
    pub const NOT_READY: u8 = 3;
    /// A `bisect-step` that cannot say (`git bisect run`'s skip).
    pub const BISECT_SKIP: u8 = 125;
    /// The host or the network failed (QEMU missing, a download failed).
    pub const INFRASTRUCTURE: u8 = 69;
    /// Interrupted by SIGINT/SIGTERM.
    pub const INTERRUPTED: u8 = 130;

    /// What a run of cells came to, as far as its exit status goes.
    #[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
    pub struct RunSummary {
        /// Cells that finished (or will never start).
        pub cells: usize,
        /// Cells with an unexpected result (failed, not run), and results
        /// a front door found missing (a benchmark without its number).
        pub unexpected: usize,
        /// Cells the host could not run (a download, QEMU refusing).
        pub errors: usize,
        /// Whether SIGINT/SIGTERM stopped the run.
        pub interrupted: bool,
    }

    /// The exit status of a run: the one mapping every command that runs
    /// cells uses (nextest's `RunStats` to exit code). 130 after a signal;
    /// else 1 on any unexpected result or no cell at all; else 69 when a
    /// cell could not run for the host's reasons; else 0.
    pub fn of_run(s: &RunSummary) -> u8 {
        if s.interrupted {
            INTERRUPTED
        } else if s.cells == 0 || s.unexpected > 0 {
            TESTS_FAILED
        } else if s.errors > 0 {
            INFRASTRUCTURE
        } else {
            OK
        }
    }

    /// Every status with what it means, ascending.
    pub const TABLE: &[(u8, &str)] = &[
        (OK, "every result as expected"),
        (TESTS_FAILED, "an unexpected test result, or a cell with no result (bisect: no single first bad commit)"),
        (USAGE, "a usage or input error, refused before anything was fetched, built or booted"),
        (NOT_READY, "the host is not ready (doctor, setup), or the kernel asked for is not built (kernel path)"),
        (INFRASTRUCTURE, "the host or the network failed: QEMU missing, a download or build failed"),
        (BISECT_SKIP, "bisect-step only: this commit cannot be tested (git bisect run's skip)"),
        (INTERRUPTED, "interrupted by SIGINT or SIGTERM; partial reports are written"),
    ];

    /// The environment the harness reads (and, last, what it sets for the
    /// programs it runs), with what each does.
    pub const ENVIRONMENT: &[(&str, &str)] = &[
        ("HARNESS_QEMU", "the qemu-system-x86_64 to run (default: the one on PATH)"),
        ("HARNESS_QEMU_ARM64", "the qemu-system-aarch64 to run for --arch arm64 (default: the one on PATH)"),
        ("HARNESS_VIRTIOFSD", "the virtiofsd serving shares (default: found on PATH and in libexec)"),
        ("HARNESS_CACHE_DIR", "the cache of kernels, builds and guest binaries (default: ~/.cache/futex-harness)"),
        ("HARNESS_DEBIAN_MIRROR", "the Debian mirror for debian: kernels and sources (default: apt's configuration); --debian-mirror wins"),
        ("HARNESS_KERNELS_DIR", "the kernels/ definitions for source: kernels (default: ./kernels with fragments/, else the built-in ones)"),
        ("HARNESS_GUEST_BIN_DIR", "prebuilt static x86-64 guest binaries to use instead of the embedded ones"),
        ("HARNESS_GUEST_BIN_DIR_ARM64", "prebuilt static arm64 guest binaries to use instead of the embedded ones (or where the harness has none built in)"),
        ("HARNESS_GUEST_MODULES", "extra kernel modules to load in the guest, comma-separated"),
        ("HARNESS_FORCE_KVM", "1: take /dev/kvm without a hardware KVM module loaded (a paravirtual KVM, or a module of another name)"),
        ("HARNESS_CCACHE", "0: build kernels without ccache"),
        ("HARNESS_LOG", "tracing filter for the harness's own log (e.g. debug)"),
        ("HARNESS_KBUILD_TESTS", "the project's tests only: also run the tests that read or build a real 7.3 kernel tree (the one `harness kernel build 7.3` leaves in the cache)"),
        ("HARNESS_NET_TESTS", "the project's tests only: also run the tests that need the Debian mirror"),
        ("HARNESS_TIMEOUT_SCALE", "set in the guest: the --timeout-scale factor the test binaries apply"),
        ("HARNESS_SHARES", "set in the guest: the shares mounted, as GUEST_PATH:ro|rw,..."),
        ("HARNESS_CASE_MARKERS", "set in the guest by guest-init: a case-based test binary writes harness: case-begin/case-end <case> to /dev/kmsg, so a kernel report fails the case it was printed in"),
        ("HARNESS_ARTIFACTS", "set in the guest: the directory whose files come back to <out>/<cell>/artifacts"),
        ("HARNESS_FAULT_RUNS_FILE", "read by the guest fault binary: where fail-on-run counts its runs (default /tmp/harness-fault-runs)"),
        ("HARNESS_BISECT_COMMIT", "set for a bisect --step-command: the commit under test"),
        ("HARNESS_BISECT_REP", "set for a bisect --step-command: the repetition, from 1"),
        ("HARNESS_BISECT_STEP_DIR", "set for a bisect --step-command: the step's directory"),
        ("HARNESS_BISECT_BENCH", "set for a bisect --step-command with --metric: where it writes # BENCH lines"),
    ];

    /// Commands a kernel developer starts with.
    pub const EXAMPLES: &[(&str, &str)] = &[
        (
            "harness doctor",
            "what this host has, and the fix for what it lacks",
        ),
        (
            "harness run --kernel debian:7.3 --topology nodes=2,cpus=2",
            "Debian's 7.3 in two nodes, the futex suite",
        ),
        (
            "harness run --kernel tree:$HOME/linux --test 'futex-prctl/*'",
            "your tree, built, then one binary's cases",
        ),
        (
            "harness run --kernel debian:7.3 --until-fail --max 50 --test 'futex-resize/*'",
            "repeat until a case fails, keeping that iteration",
        ),
        (
            "harness matrix --list",
            "the cells of ./matrix.yaml (or the built-in one)",
        ),
        (
            "harness matrix --dry-run --kernel debian-7.3",
            "each of those cells' plan and QEMU command, nothing done",
        ),
        (
            "harness matrix -j auto --json results.json",
            "every cell at the machine's width, results in one JSON file",
        ),
        (
            "harness compare previous last --out target/matrix",
            "what changed between the last two matrix runs (exit 1: a regression)",
        ),
        (
            "harness report html results.json -o report.html",
            "one self-contained page of a run: grid, failures, kernel reports",
        ),
        (
            "harness bisect --tree $HOME/linux --good v7.2 --bad HEAD --test 'futex/futex-prctl/*'",
            "the commit that broke a case",
        ),
    ];

    /// The EXIT STATUS, ENVIRONMENT and EXAMPLES sections as help text.
    pub fn help_sections() -> String {
        use std::fmt::Write as _;
        let mut t = String::from("EXIT STATUS:\n");
        for (code, what) in TABLE {
            let _ = writeln!(t, "  {code:<4}{what}");
        }
        t.push_str("\nENVIRONMENT:\n");
        for (var, what) in ENVIRONMENT {
            let _ = writeln!(t, "  {var}\n      {what}");
        }
        t.push_str("\nEXAMPLES:\n");
        for (cmd, what) in EXAMPLES {
            let _ = writeln!(t, "  {cmd}\n      {what}");
        }
        t
    }
}

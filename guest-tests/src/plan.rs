//! The run plan: what the host asks `guest-init` to run, and how the guest
//! ends the VM. Encoded by the harness into the initramfs as JSON at
//! [`PLAN_PATH`], decoded by the init. Both ends use this module.

use serde::{Deserialize, Serialize};

/// Where the plan lives inside the initramfs.
pub const PLAN_PATH: &str = "/harness/plan.json";
/// Directory of the guest binaries inside the initramfs.
pub const BIN_DIR: &str = "/harness/bin";
/// The serial port reserved for the KTAP stream (the console is `ttyS0`).
#[cfg(not(target_arch = "aarch64"))]
pub const RESULTS_PORT: &str = "/dev/ttyS1";
/// The KTAP stream on arm64: `virt` has one UART (the console,
/// `ttyAMA0`), so results go to the first virtio console.
#[cfg(target_arch = "aarch64")]
pub const RESULTS_PORT: &str = "/dev/hvc0";
/// The serial port of the interactive shell (`--shell`).
#[cfg(not(target_arch = "aarch64"))]
pub const SHELL_PORT: &str = "/dev/ttyS2";
/// The interactive shell on arm64: the second virtio console.
#[cfg(target_arch = "aarch64")]
pub const SHELL_PORT: &str = "/dev/hvc1";
/// The kmsg record guest-init writes just before it powers a machine off
/// that has no `isa-debug-exit` (arm64's `virt`): `harness: guest-exit N`,
/// N the [`GuestExit`] code in decimal. QEMU then exits 0 (PSCI
/// `SYSTEM_OFF`), and the host reads the status from the console instead.
pub const GUEST_EXIT_MARK: &str = "harness: guest-exit ";
/// The results-stream comment guest-init writes when the shell starts
/// (`  # interactive shell on /dev/ttyS2`): the host's terminal bridge
/// waits for it.
pub const SHELL_MARK: &str = "# interactive shell on ";
/// Where Debian's static busybox is packed when a shell is needed.
pub const BUSYBOX_PATH: &str = "/bin/busybox";
/// busybox's `sh` applet, linked by guest-init.
pub const SHELL_PATH: &str = "/bin/sh";
/// Wire format version; bumped on incompatible changes.
pub const PLAN_VERSION: u32 = 1;

/// I/O port of QEMU's `isa-debug-exit` device (`-device isa-debug-exit,iobase=0xf4,iosize=0x04`).
pub const DEBUG_EXIT_PORT: u16 = 0xf4;

/// Status codes the init writes to `isa-debug-exit`. QEMU exits with
/// `(code << 1) | 1`, so none of them can be confused with QEMU's own 0/1.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum GuestExit {
    /// Every planned binary ran (whatever their results).
    Finished = 0x10,
    /// The plan could not be read or decoded.
    BadPlan = 0x11,
    /// The init itself failed (mount, results port, ...).
    InitError = 0x12,
}

impl GuestExit {
    /// The QEMU process exit status this guest exit produces.
    pub fn qemu_status(self) -> i32 {
        ((self as i32) << 1) | 1
    }

    /// Decodes a QEMU exit status produced by `isa-debug-exit`.
    pub fn from_qemu_status(status: i32) -> Option<GuestExit> {
        Self::ALL.into_iter().find(|g| g.qemu_status() == status)
    }

    /// Decodes the last [`GUEST_EXIT_MARK`] record of a console log (the
    /// exit of a machine without `isa-debug-exit`). `None` when there is
    /// none, or its code is not one of ours.
    pub fn from_console(console: &[u8]) -> Option<GuestExit> {
        let mark = GUEST_EXIT_MARK.as_bytes();
        let at = console.windows(mark.len()).rposition(|w| w == mark)?;
        let digits: Vec<u8> = console[at + mark.len()..]
            .iter()
            .take_while(|b| b.is_ascii_digit())
            .take(3)
            .copied()
            .collect();
        let code: u8 = std::str::from_utf8(&digits).ok()?.parse().ok()?;
        Self::ALL.into_iter().find(|g| *g as u8 == code)
    }

    const ALL: [GuestExit; 3] = [
        GuestExit::Finished,
        GuestExit::BadPlan,
        GuestExit::InitError,
    ];
}

/// Prefix of the markers the init writes to `/dev/kmsg` around each binary,
/// so kernel reports on the console can be attributed to the running test.
/// Format: `harness: begin <n> <name>` and `harness: end <n> <name>`;
/// inside a binary, [`CASE_BEGIN`] / [`CASE_END`] frame each of its cases.
pub const KMSG_MARKER: &str = "harness:";

/// After [`KMSG_MARKER`]: a case-based binary is starting case `<name>`
/// (`harness: case-begin <name>`, the case's KTAP name within the running
/// binary), so a kernel report printed meanwhile fails that case.
pub const CASE_BEGIN: &str = "case-begin";

/// After [`KMSG_MARKER`]: the case `<name>` has ended (`harness: case-end <name>`).
pub const CASE_END: &str = "case-end";

/// Set by guest-init in every test binary's environment: write the case
/// markers to `/dev/kmsg`. Unset (a binary run by hand, or on the host),
/// a binary writes none.
pub const CASE_MARKERS_ENV: &str = "HARNESS_CASE_MARKERS";

/// The whole plan.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunPlan {
    /// [`PLAN_VERSION`].
    pub version: u32,
    /// Binaries to run, in order; each is one top-level KTAP test.
    pub tests: Vec<PlannedTest>,
    /// Kernel modules (guest paths of uncompressed `.ko` files) to load
    /// before the shares are mounted, in this order (dependencies first).
    /// Optional: plans without it decode as before.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub modules: Vec<String>,
    /// virtiofs shares to mount before the tests run.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub shares: Vec<PlannedShare>,
    /// A busybox whose applets guest-init links beside it (`sh` first)
    /// before the tests run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub busybox: Option<String>,
    /// An interactive shell after the tests, as the document's last test.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shell: Option<PlannedShell>,
    /// Run the tests again and again in this boot (`--repeat`,
    /// `--until-fail`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repeat: Option<PlannedRepeat>,
}

/// The iterations of a repeated plan: `tests[..first]` (the topology
/// check) run once, then `tests[first..]` up to `iterations` times, each
/// iteration announced by an [`ITERATION_MARK`] line on the results stream
/// and on `/dev/kmsg`. With `until_fail` the first iteration in which a
/// test fails is the last.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlannedRepeat {
    /// How many times at most (>= 1).
    pub iterations: u32,
    /// Stop after the first iteration with a failed test.
    pub until_fail: bool,
    /// The index of the first repeated test.
    pub first: usize,
}

/// The comment that opens iteration K of a repeated plan, at the top level
/// of the results stream (`# harness iteration K`) and, after
/// [`KMSG_MARKER`], on the console (`harness: iteration K`).
pub const ITERATION_MARK: &str = "iteration ";

/// The interactive shell guest-init runs after the tests: on its own serial
/// port as its controlling terminal (Ctrl-C reaches its foreground job), no
/// deadline; its exit status is its result, and ends the VM.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlannedShell {
    /// The terminal (`/dev/ttyS2`).
    pub port: String,
    /// The shell.
    pub path: String,
    /// Environment (`PATH` with the test binaries first).
    pub env: Vec<(String, String)>,
}

/// Where guest-init finds the kernel modules of [`RunPlan::modules`].
pub const MODULE_DIR: &str = "/harness/modules";

/// One virtiofs share for guest-init to mount (`mount -t virtiofs TAG PATH`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlannedShare {
    /// The device's tag (`-device vhost-user-fs-pci,tag=...`).
    pub tag: String,
    /// Absolute mount point (created).
    pub path: String,
    /// Mount read-only (`MS_RDONLY`; the daemon refuses writes too).
    #[serde(default)]
    pub read_only: bool,
    /// A failure to mount ends the run as an init error; otherwise it is
    /// logged and the tests run without the share.
    #[serde(default)]
    pub required: bool,
}

/// One binary to run as one top-level KTAP test.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlannedTest {
    /// Name of the top-level KTAP test (no spaces, no `#`).
    pub name: String,
    /// Absolute path of the executable inside the initramfs.
    pub path: String,
    /// Arguments after argv\[0\].
    pub args: Vec<String>,
    /// Extra environment variables.
    pub env: Vec<(String, String)>,
    /// Wall-clock limit; the binary's process group is killed after it.
    pub timeout_ms: u64,
    /// Output kept from the binary; the rest is dropped with a note.
    pub max_output_bytes: u64,
    /// stdout and stderr on one pipe, read as stdout: the lines keep the
    /// order the binary's processes wrote them in. Two pipes lose it:
    /// kselftest_harness prints a test's result line (buffered stdout,
    /// flushed at the next test's fork) after its log lines (stderr), and a
    /// reader of two pipes can take the next test's start first.
    #[serde(default)]
    pub one_pipe: bool,
}

impl RunPlan {
    /// Encodes the plan for the initramfs.
    pub fn encode(&self) -> Vec<u8> {
        serde_json::to_vec_pretty(self).expect("a RunPlan always serializes")
    }

    /// Decodes a plan read from the initramfs.
    pub fn decode(bytes: &[u8]) -> Result<RunPlan, String> {
        let plan: RunPlan = serde_json::from_slice(bytes).map_err(|e| e.to_string())?;
        if plan.version != PLAN_VERSION {
            return Err(format!(
                "plan version {} but this init speaks {PLAN_VERSION}",
                plan.version
            ));
        }
        Ok(plan)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips() {
        let plan = RunPlan {
            version: PLAN_VERSION,
            tests: vec![PlannedTest {
                name: "smoke".into(),
                path: "/harness/bin/smoke".into(),
                args: vec!["--x".into(), "a b".into()],
                env: vec![("K".into(), "V".into())],
                timeout_ms: 30_000,
                max_output_bytes: 1 << 20,
                one_pipe: false,
            }],
            modules: vec![],
            shares: vec![],
            busybox: None,
            shell: None,
            repeat: None,
        };
        assert_eq!(RunPlan::decode(&plan.encode()).unwrap(), plan);
        // Without modules and shares the encoding is the old one.
        assert!(!String::from_utf8(plan.encode()).unwrap().contains("shares"));
    }

    #[test]
    fn modules_and_shares_are_optional_and_round_trip() {
        let old = RunPlan::decode(br#"{"version":1,"tests":[]}"#).unwrap();
        assert!(old.modules.is_empty() && old.shares.is_empty());
        let plan = RunPlan {
            version: PLAN_VERSION,
            tests: vec![],
            modules: vec!["/harness/modules/fuse.ko".into()],
            shares: vec![PlannedShare {
                tag: "artifacts".into(),
                path: "/harness/artifacts".into(),
                read_only: false,
                required: true,
            }],
            busybox: Some(BUSYBOX_PATH.into()),
            shell: Some(PlannedShell {
                port: SHELL_PORT.into(),
                path: SHELL_PATH.into(),
                env: vec![("PATH".into(), "/harness/bin:/bin".into())],
            }),
            repeat: Some(PlannedRepeat {
                iterations: 50,
                until_fail: true,
                first: 1,
            }),
        };
        assert_eq!(RunPlan::decode(&plan.encode()).unwrap(), plan);
        let minimal =
            RunPlan::decode(br#"{"version":1,"tests":[],"shares":[{"tag":"t","path":"/mnt"}]}"#)
                .unwrap();
        assert!(!minimal.shares[0].read_only && !minimal.shares[0].required);
    }

    #[test]
    fn rejects_other_versions_and_unknown_fields() {
        let e = RunPlan::decode(br#"{"version":9,"tests":[]}"#).unwrap_err();
        assert!(e.contains("plan version 9"), "{e}");
        assert!(RunPlan::decode(br#"{"version":1,"tests":[],"x":1}"#).is_err());
    }

    #[test]
    fn exit_codes_map_both_ways() {
        assert_eq!(GuestExit::Finished.qemu_status(), 33);
        assert_eq!(GuestExit::from_qemu_status(33), Some(GuestExit::Finished));
        assert_eq!(GuestExit::from_qemu_status(0), None);
        assert_eq!(GuestExit::from_qemu_status(1), None);
    }

    #[test]
    fn the_console_mark_gives_the_last_exit() {
        let log = b"[ 1.0] harness: guest-exit 18\r\n[ 2.0] harness: guest-exit 16\r\n[ 2.1] reboot: Power down\r\n";
        assert_eq!(GuestExit::from_console(log), Some(GuestExit::Finished));
        assert_eq!(GuestExit::from_console(b"harness: guest-exit 99\n"), None);
        assert_eq!(GuestExit::from_console(b"harness: guest-exit \n"), None);
        assert_eq!(GuestExit::from_console(b"nothing"), None);
    }
}

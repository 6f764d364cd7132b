//! Which boot crashes are booted again: only those of a named signature
//! that was measured, as data ([`SIGNATURES`]). A boot crash that matches
//! none — any other kernel, KVM, a newer QEMU, another console — is the
//! cell's result: a boot-time futex or NUMA panic must fail its cell, not
//! pass on the next boot with a note. Pure: the cell
//! ([`crate::cell::run_attached`]) gathers the facts and keeps the record.

use crate::qemu::Accel;
use crate::result::BootRetry;

/// A known boot crash that is the emulator's, not the kernel's: every
/// condition must hold for a boot to be retried.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Signature {
    /// Its name in reports (`qemu7-tcg-debian-6.12`).
    pub name: &'static str,
    /// The kernel release (from the image's header) starts with this
    /// (`None`: any kernel, for a crash of QEMU's own).
    pub release_prefix: Option<&'static str>,
    /// Under this accelerator only.
    pub accel: Accel,
    /// QEMU's major version is below this (`None`: any version).
    pub qemu_major_below: Option<u32>,
    /// A console line holds one of these (the kernel's own words).
    pub console: &'static [&'static str],
    /// A line of QEMU's own stderr holds one of these (QEMU's words; the
    /// guest cannot write there).
    pub qemu_stderr: &'static [&'static str],
}

/// The signatures retried, and nothing else.
///
/// `qemu7-tcg-debian-6.12`: Debian's 6.12 kernel under QEMU 7.2's TCG
/// crashed in about 3 boots in 10 at random (double faults, SIGSEGVs,
/// soft lockups), under QEMU 10 in none of 12 (docs/reliability.md, Boot
/// retries). The console words are how the kernel says each: the x86
/// double-fault handler (`PANIC: double fault, error_code: ...`), a
/// segfaulting task (`segfault at ...`), PID 1 killed by SIGSEGV
/// (`Attempted to kill init! exitcode=0x0000000b`) and the soft-lockup
/// watchdog (`watchdog: BUG: soft lockup - CPU#0 stuck ...`).
///
/// `qemu-tcg-stale-int3`: an `Oops: int3` while the kernel boots under TCG
/// at many vCPUs: a vCPU executed the `int3` of a finished text patch
/// (`smp_text_poke`, static keys) from a stale translation, after the
/// patcher had synced every CPU and dropped its handler. Seen on Debian's
/// 7.3.4 at 18 vCPUs under QEMU 10.0.2 (docs/reliability.md: RIP at a
/// 5-byte NOP `0f <1f> 44 00 00` already restored, in an IPI on an idle
/// CPU). Before guest-init speaks no futex code has run.
///
/// `qemu-tcg-iotlb-assert`: QEMU itself aborting on its assertion in
/// `iotlb_to_section()` (`system/physmem.c`: `section_index <
/// d->map.sections_nb`) under TCG while the guest boots, seen with QEMU 10
/// on a loaded 2-core host (docs/reliability.md). QEMU dies of its own
/// check, in its own stderr, before the guest ran a test: nothing of the
/// kernel's is hidden by booting again.
pub const SIGNATURES: &[Signature] = &[
    Signature {
        name: "qemu7-tcg-debian-6.12",
        release_prefix: Some("6.12."),
        accel: Accel::Tcg,
        qemu_major_below: Some(crate::host::RELIABLE_TCG_QEMU_MAJOR),
        console: &[
            "PANIC: double fault",
            "segfault at ",
            "exitcode=0x0000000b",
            "BUG: soft lockup",
        ],
        qemu_stderr: &[],
    },
    Signature {
        name: "qemu-tcg-stale-int3",
        release_prefix: None,
        accel: Accel::Tcg,
        qemu_major_below: None,
        console: &["Oops: int3: 0000"],
        qemu_stderr: &[],
    },
    Signature {
        name: "qemu-tcg-iotlb-assert",
        release_prefix: None,
        accel: Accel::Tcg,
        qemu_major_below: None,
        console: &[],
        qemu_stderr: &["iotlb_to_section: Assertion"],
    },
];

/// Bytes kept of the matching console line.
pub const MAX_LINE: usize = 240;

/// What a crashed boot was: facts from the host (the image's release,
/// the accelerator, QEMU's version) and the guest's console.
#[derive(Debug, Clone, Copy)]
pub struct Crash<'a> {
    /// The image's kernel release, when its header names one.
    pub release: Option<&'a str>,
    /// The accelerator the boot ran under.
    pub accel: Accel,
    /// QEMU's major version, when known.
    pub qemu_major: Option<u32>,
    /// The boot's console.
    pub console: &'a [u8],
    /// QEMU's stderr, when QEMU itself exited.
    pub qemu_stderr: &'a [u8],
}

impl Signature {
    /// The first console line of `crash` that shows this signature, when
    /// the host's facts are this signature's too.
    pub fn matches(&self, crash: &Crash) -> Option<String> {
        let host = self
            .release_prefix
            .is_none_or(|p| crash.release.is_some_and(|r| r.starts_with(p)))
            && crash.accel == self.accel
            && self
                .qemu_major_below
                .is_none_or(|below| crash.qemu_major.is_some_and(|m| m < below));
        if !host {
            return None;
        }
        let find = |text: &[u8], patterns: &[&str]| {
            text.split(|&b| b == b'\n')
                .find(|line| patterns.iter().any(|p| contains(line, p.as_bytes())))
                .map(printable)
        };
        find(crash.console, self.console).or_else(|| find(crash.qemu_stderr, self.qemu_stderr))
    }
}

/// The retry of attempt `attempt`'s crash, when a signature matches it.
pub fn decide(crash: &Crash, attempt: u32) -> Option<BootRetry> {
    SIGNATURES.iter().find_map(|s| {
        s.matches(crash).map(|line| BootRetry {
            signature: s.name.to_string(),
            attempt,
            line,
        })
    })
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

/// A console line as report text: lossy UTF-8, control characters
/// dropped, trimmed, at most [`MAX_LINE`] bytes on a character boundary.
fn printable(line: &[u8]) -> String {
    let text: String = String::from_utf8_lossy(line)
        .chars()
        .filter(|c| !c.is_control())
        .collect();
    let text = text.trim();
    let mut end = text.len().min(MAX_LINE);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end].to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    const DOUBLE_FAULT: &[u8] = b"[    0.912345] traps: PANIC: double fault, error_code: 0x0\n\
        [    0.912400] Kernel panic - not syncing: Machine halted.\n";

    /// The crash the signature is for: Debian's 6.12 under QEMU 7.2's TCG.
    fn known() -> Crash<'static> {
        Crash {
            release: Some("6.12.95+deb12-cloud-amd64"),
            accel: Accel::Tcg,
            qemu_major: Some(7),
            console: DOUBLE_FAULT,
            qemu_stderr: b"",
        }
    }

    const IOTLB: &[u8] = b"qemu-system-x86_64: system/physmem.c:2678: iotlb_to_section: Assertion `section_index < d->map.sections_nb' failed.\n";

    /// `crash`'s decision had it run under KVM.
    fn under_kvm(crash: Crash) -> Option<BootRetry> {
        decide(
            &Crash {
                accel: Accel::Kvm,
                ..crash
            },
            1,
        )
    }

    #[test]
    fn a_stale_int3_at_boot_is_retried_under_tcg_only() {
        let crash = Crash {
            release: Some("7.3.4+deb13-cloud-amd64"),
            accel: Accel::Tcg,
            qemu_major: Some(10),
            console: b"[    3.899683] Oops: int3: 0000 [#1] SMP NOPTI\n",
            qemu_stderr: b"",
        };
        assert_eq!(
            decide(&crash, 1).map(|r| r.signature),
            Some("qemu-tcg-stale-int3".to_string())
        );
        assert_eq!(under_kvm(crash), None, "KVM");
    }

    #[test]
    fn qemus_own_iotlb_assertion_is_retried_on_any_kernel_under_tcg_only() {
        let crash = Crash {
            release: Some("7.3.4"),
            accel: Accel::Tcg,
            qemu_major: Some(10),
            console: b"[    0.5] PCI: Using configuration type 1\n",
            qemu_stderr: IOTLB,
        };
        let r = decide(&crash, 1).unwrap();
        assert_eq!(r.signature, "qemu-tcg-iotlb-assert");
        assert!(r
            .line
            .starts_with("qemu-system-x86_64: system/physmem.c:2678: iotlb_to_section"));
        assert_eq!(under_kvm(crash), None, "KVM");
        // The guest cannot fake it: the words on its console are not QEMU's.
        let faked = Crash {
            console: IOTLB,
            qemu_stderr: b"",
            ..crash
        };
        assert_eq!(decide(&faked, 1), None, "guest-printed");
    }

    #[test]
    fn the_known_crash_is_retried_with_its_name_attempt_and_line() {
        assert_eq!(
            decide(&known(), 2),
            Some(BootRetry {
                signature: "qemu7-tcg-debian-6.12".into(),
                attempt: 2,
                line: "[    0.912345] traps: PANIC: double fault, error_code: 0x0".into(),
            })
        );
    }

    #[test]
    fn each_measured_console_pattern_matches_alone() {
        for (console, line) in [
            (
                &b"[    1.2] init[1]: segfault at 8 ip 00007f sp 00007ffd error 4\n"[..],
                "[    1.2] init[1]: segfault at 8 ip 00007f sp 00007ffd error 4",
            ),
            (
                b"[    1.3] Kernel panic - not syncing: Attempted to kill init! exitcode=0x0000000b\n",
                "[    1.3] Kernel panic - not syncing: Attempted to kill init! exitcode=0x0000000b",
            ),
            (
                b"[   23.0] watchdog: BUG: soft lockup - CPU#0 stuck for 22s! [swapper/0:1]\n",
                "[   23.0] watchdog: BUG: soft lockup - CPU#0 stuck for 22s! [swapper/0:1]",
            ),
        ] {
            let c = Crash {
                console,
                ..known()
            };
            assert_eq!(decide(&c, 1).map(|r| r.line), Some(line.to_string()));
        }
    }

    #[test]
    fn each_condition_alone_stops_the_retry() {
        let cases: [(&str, Crash); 9] = [
            (
                "another kernel (7.3)",
                Crash {
                    release: Some("7.3.4+deb13-cloud-amd64"),
                    ..known()
                },
            ),
            (
                "a release that only begins like 6.12",
                Crash {
                    release: Some("6.120.1"),
                    ..known()
                },
            ),
            (
                "no release in the image",
                Crash {
                    release: None,
                    ..known()
                },
            ),
            (
                "KVM",
                Crash {
                    accel: Accel::Kvm,
                    ..known()
                },
            ),
            (
                "QEMU 8",
                Crash {
                    qemu_major: Some(8),
                    ..known()
                },
            ),
            (
                "QEMU 10",
                Crash {
                    qemu_major: Some(10),
                    ..known()
                },
            ),
            (
                "QEMU's version unknown",
                Crash {
                    qemu_major: None,
                    ..known()
                },
            ),
            (
                "a different console (a plain boot panic)",
                Crash {
                    console: b"[    0.8] Kernel panic - not syncing: No working init found.\n",
                    ..known()
                },
            ),
            (
                "an empty console",
                Crash {
                    console: b"",
                    ..known()
                },
            ),
        ];
        assert!(decide(&known(), 1).is_some());
        for (what, crash) in cases {
            assert_eq!(decide(&crash, 1), None, "{what}");
        }
    }

    #[test]
    fn the_line_is_printable_and_bounded() {
        let mut console = b"\x1b[31mPANIC: double fault\x00\r ".to_vec();
        console.extend("é".repeat(400).as_bytes());
        console.extend(b"\xff\nnext line\n");
        let c = Crash {
            console: &console,
            ..known()
        };
        let line = decide(&c, 1).unwrap().line;
        assert!(line.starts_with("[31mPANIC: double fault"), "{line}");
        assert!(line.len() <= MAX_LINE, "{}", line.len());
        assert!(!line.chars().any(char::is_control), "{line:?}");
        assert!(!line.contains("next line"));
    }
}

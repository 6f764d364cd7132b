//! The host's TSC rate, given to every TCG guest as `tsc_early_khz=`.
//!
//! Why: under TCG a guest's TSC is the host's (QEMU reads the host's
//! counter), but the guest calibrates its rate at boot against the
//! emulated PIT and HPET in busy loops of a few milliseconds. A guest whose
//! host thread is descheduled inside such a loop (an idle-class cell,
//! [`crate::fill`], or any loaded host) gets a wrong rate. Seen once:
//! "PIT calibration deviates from HPET: 90300 2595191", "Detected 90.300
//! MHz processor", and the guest's clock ran 29 times too fast (an RCU
//! stall and timed-out cases in a 33 s cell whose guest counted 675 s).
//! The later refinement against the HPET keeps the boot value when the two
//! differ by more than 1%, so it did not repair it. With the rate given,
//! the early calibration is skipped, and the refinement lands within 1%.

use std::sync::OnceLock;

/// Rates outside this range are no TSC (kHz).
const PLAUSIBLE_KHZ: std::ops::RangeInclusive<u64> = 100_000..=20_000_000;

/// The host's TSC rate in kHz, measured once per process (100 ms), where
/// the host has a TSC that runs at a constant rate.
pub fn host_khz() -> Option<u64> {
    static KHZ: OnceLock<Option<u64>> = OnceLock::new();
    *KHZ.get_or_init(measure)
}

/// The kernel command-line word for a TCG guest.
pub fn cmdline_word() -> Option<String> {
    host_khz().map(|k| format!("tsc_early_khz={k}"))
}

#[cfg(target_arch = "x86_64")]
fn measure() -> Option<u64> {
    use std::time::{Duration, Instant};
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").ok()?;
    if !cpuinfo.split_whitespace().any(|w| w == "constant_tsc") {
        return None;
    }
    // A counter reading and the clock together: the pair whose two counter
    // reads are closest (the thread was not descheduled between them).
    let pair = || {
        (0..20)
            .map(|_| {
                // SAFETY: rdtsc has no preconditions on x86_64.
                let a = unsafe { core::arch::x86_64::_rdtsc() };
                let t = Instant::now();
                // SAFETY: as above.
                let b = unsafe { core::arch::x86_64::_rdtsc() };
                (b.wrapping_sub(a), a / 2 + b / 2, t)
            })
            .min_by_key(|(spread, _, _)| *spread)
    };
    let (_, c0, t0) = pair()?;
    std::thread::sleep(Duration::from_millis(100));
    let (_, c1, t1) = pair()?;
    let ns = t1.duration_since(t0).as_nanos() as u64;
    let khz = c1.checked_sub(c0)?.checked_mul(1_000_000)? / ns.max(1);
    PLAUSIBLE_KHZ.contains(&khz).then_some(khz)
}

#[cfg(not(target_arch = "x86_64"))]
fn measure() -> Option<u64> {
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_host_rate_is_measured_the_same_twice() {
        let Some(first) = host_khz() else {
            eprintln!("skipped: no constant-rate TSC on this host");
            return;
        };
        assert!(PLAUSIBLE_KHZ.contains(&first));
        let again = measure().unwrap();
        let diff = first.abs_diff(again);
        assert!(diff * 1000 < first, "{first} kHz, then {again} kHz");
        assert_eq!(cmdline_word().unwrap(), format!("tsc_early_khz={first}"));
    }
}

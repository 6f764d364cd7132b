//! Measured host load, for the scheduler: busy cores from `/proc/stat`
//! deltas, CPU pressure (PSI, where the kernel has it) and a process's CPU
//! time from `/proc/<pid>/stat`. Parsers are pure and never panic; a host
//! without `/proc` reads as "unknown" (`None`), never as idle.

use std::time::{Duration, Instant};

/// Busy and total jiffies of the `cpu` line of `/proc/stat` (busy: all but
/// idle and iowait).
pub fn parse_stat(stat: &str) -> Option<(u64, u64)> {
    let line = stat.lines().find(|l| l.starts_with("cpu "))?;
    let v: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .map(|f| f.parse().ok())
        .collect::<Option<_>>()?;
    // user nice system idle iowait irq softirq steal (guest is in user).
    if v.len() < 4 {
        return None;
    }
    let total: u64 = v.iter().take(8).sum();
    let idle = v[3] + v.get(4).copied().unwrap_or(0);
    Some((total.saturating_sub(idle), total))
}

/// `some avg10` of `/proc/pressure/cpu`: the share (0-100) of the last
/// 10 s in which some runnable task waited for a CPU.
pub fn parse_psi(psi: &str) -> Option<f64> {
    let line = psi.lines().find(|l| l.starts_with("some "))?;
    line.split_whitespace()
        .find_map(|f| f.strip_prefix("avg10="))?
        .parse()
        .ok()
}

/// The host's CPU pressure now (`None`: no PSI here).
pub fn cpu_pressure() -> Option<f64> {
    parse_psi(&std::fs::read_to_string("/proc/pressure/cpu").ok()?)
}

/// User + system clock ticks of `/proc/<pid>/stat` (fields 14 and 15,
/// counted after the `)` that ends the command name, which may hold
/// spaces and parentheses itself). For a thread-group leader these are
/// the whole process's: every TCG vCPU thread included.
pub fn parse_pid_stat(stat: &str) -> Option<u64> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // rest starts at field 3 (state): utime is field 14, stime 15.
    let utime: u64 = f.get(11)?.parse().ok()?;
    let stime: u64 = f.get(12)?.parse().ok()?;
    Some(utime + stime)
}

fn ticks_per_sec() -> f64 {
    // SAFETY: sysconf has no memory effects.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 {
        t as f64
    } else {
        100.0
    }
}

/// CPU time `pid` has used so far (`None`: gone or unreadable).
pub fn process_cpu(pid: i32) -> Option<Duration> {
    if pid <= 0 {
        return None;
    }
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    Some(Duration::from_secs_f64(
        parse_pid_stat(&stat)? as f64 / ticks_per_sec(),
    ))
}

/// The CPU time of a running process, sampled every half second until
/// stopped (the last sample is kept: a reaped process has no `/proc`
/// entry left to read).
#[derive(Debug)]
pub struct CpuWatch {
    micros: std::sync::Arc<std::sync::atomic::AtomicU64>,
    task: tokio::task::JoinHandle<()>,
}

impl CpuWatch {
    /// Starts sampling `pid` (needs a tokio runtime).
    pub fn start(pid: i32) -> CpuWatch {
        use std::sync::atomic::Ordering;
        let micros = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
        let m = micros.clone();
        let task = tokio::spawn(async move {
            loop {
                if let Some(t) = process_cpu(pid) {
                    m.store(t.as_micros() as u64, Ordering::Relaxed);
                }
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        });
        CpuWatch { micros, task }
    }

    /// Stops; the last sample (not a fresh read: once reaped, the pid may
    /// already name another process).
    pub fn stop(self) -> Option<Duration> {
        use std::sync::atomic::Ordering;
        self.task.abort();
        let t = Duration::from_micros(self.micros.load(Ordering::Relaxed));
        (!t.is_zero()).then_some(t)
    }
}

/// How much of the smoothed figure the newest sample is: with one sample a
/// second, about the last five seconds count. A cell's busy phases come in
/// bursts of a second or two (a boot, a race case); admission must follow
/// the load a cell keeps, not each burst.
pub const SMOOTHING: f64 = 0.3;

/// Host-wide busy cores, averaged between two samples and smoothed over a
/// few seconds ([`SMOOTHING`]).
#[derive(Debug)]
pub struct CpuMeter {
    last: Option<(u64, u64)>,
    at: Instant,
    cores: f64,
    busy: Option<f64>,
}

impl Default for CpuMeter {
    fn default() -> Self {
        Self::new()
    }
}

impl CpuMeter {
    /// A meter; its first [`CpuMeter::sample`] knows nothing yet.
    pub fn new() -> CpuMeter {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
        let mut m = CpuMeter {
            last: None,
            at: Instant::now(),
            cores,
            busy: None,
        };
        m.last = m.read();
        m
    }

    fn read(&self) -> Option<(u64, u64)> {
        parse_stat(&std::fs::read_to_string("/proc/stat").ok()?)
    }

    /// Busy cores since the previous sample, if at least `min` passed
    /// since then (else the previous figure: short windows are noise).
    pub fn sample(&mut self, min: Duration) -> Option<f64> {
        if self.at.elapsed() < min && self.busy.is_some() {
            return self.busy;
        }
        let now = self.read();
        if let (Some((b0, t0)), Some((b1, t1))) = (self.last, now) {
            if t1 > t0 {
                let now = busy_cores(b1 - b0, t1 - t0, self.cores);
                self.busy = Some(match self.busy {
                    Some(old) => old * (1.0 - SMOOTHING) + now * SMOOTHING,
                    None => now,
                });
            }
        }
        self.last = now;
        self.at = Instant::now();
        self.busy
    }
}

/// Busy cores from jiffy deltas (`/proc/stat` counts every core's).
pub fn busy_cores(busy: u64, total: u64, cores: f64) -> f64 {
    if total == 0 {
        return 0.0;
    }
    busy as f64 / total as f64 * cores
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_stat_cpu_line_gives_busy_and_total() {
        let s = "cpu  100 5 50 800 20 3 2 0 0 0\ncpu0 50 2 25 400 10 1 1 0 0 0\nintr 1\n";
        assert_eq!(parse_stat(s), Some((160, 980)));
        assert_eq!(
            parse_stat("cpu0 1 2 3 4\n"),
            None,
            "needs the aggregate line"
        );
        assert_eq!(parse_stat("cpu  1 2\n"), None);
        assert_eq!(parse_stat("cpu  1 x 3 4\n"), None);
        assert_eq!(parse_stat(""), None);
        assert!((busy_cores(160, 980, 2.0) - 0.3265).abs() < 1e-3);
        assert_eq!(busy_cores(1, 0, 2.0), 0.0);
    }

    #[test]
    fn psi_some_avg10() {
        let s = "some avg10=18.85 avg60=4.30 avg300=4.77 total=8553853238\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n";
        assert_eq!(parse_psi(s), Some(18.85));
        assert_eq!(parse_psi("full avg10=1.0\n"), None);
        assert_eq!(parse_psi("some avg60=1.0\n"), None);
    }

    #[test]
    fn pid_stat_counts_fields_after_the_last_parenthesis() {
        // A command name with spaces and a ')' must not shift the fields.
        let s =
            "4242 (qemu-system) x) S 1 4242 4242 0 -1 4194560 100 0 0 0 700 300 0 0 20 0 9 0 1 1 1";
        assert_eq!(parse_pid_stat(s), Some(1000));
        assert_eq!(parse_pid_stat("1 (a) S 1"), None);
        assert_eq!(parse_pid_stat("no parenthesis"), None);
    }

    #[test]
    fn this_process_has_a_cpu_time_and_the_meter_reads_the_host() {
        let mut spin = 0u64;
        for i in 0..2_000_000u64 {
            spin = spin.wrapping_add(i * i);
        }
        assert!(spin > 0);
        assert!(process_cpu(std::process::id() as i32).is_some());
        assert_eq!(process_cpu(0), None);
        let mut m = CpuMeter::new();
        std::thread::sleep(Duration::from_millis(30));
        let b = m
            .sample(Duration::ZERO)
            .expect("/proc/stat is readable here");
        assert!((0.0..=m.cores + 0.01).contains(&b), "{b}");
    }
}

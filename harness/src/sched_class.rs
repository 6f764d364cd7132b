//! A QEMU's host scheduling class, changeable while it runs: normal
//! (`SCHED_OTHER`) or `SCHED_IDLE`. An idle-class thread gets a core only
//! when no normal thread wants it and gives it up at once, so cells that
//! fill what the others leave idle cost those others nothing
//! ([`crate::fill`] decides which cell runs in which class). A
//! [`ClassHandle`] is how the runner reaches the QEMU a cell spawns later,
//! and again when the cell reboots.

use crate::procs::{spawn_guarded, GuardedChild};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

/// A host scheduling class.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Class {
    /// `SCHED_OTHER`: shares the cores fairly with the other normal cells.
    #[default]
    Normal,
    /// `SCHED_IDLE`: runs only on a core nothing normal wants.
    Idle,
}

impl Class {
    fn policy(self) -> libc::c_int {
        match self {
            Class::Normal => libc::SCHED_OTHER,
            Class::Idle => libc::SCHED_IDLE,
        }
    }
}

/// The class a cell's QEMU runs in, set before it is spawned or while it
/// runs. Clones share one slot.
#[derive(Debug, Clone, Default)]
pub struct ClassHandle(Arc<Mutex<Slot>>);

#[derive(Debug, Default)]
struct Slot {
    class: Class,
    /// Held at `SCHED_IDLE` whatever the class: a suspect wedged guest
    /// ([`ClassHandle::hold_idle`]).
    held: bool,
    /// The QEMU spawned last (a cell may boot more than once).
    pid: Option<u32>,
}

impl ClassHandle {
    /// A handle whose QEMU will start in `class`.
    pub fn new(class: Class) -> ClassHandle {
        ClassHandle(Arc::new(Mutex::new(Slot {
            class,
            held: false,
            pid: None,
        })))
    }

    fn slot(&self) -> MutexGuard<'_, Slot> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The class asked for last.
    pub fn class(&self) -> Class {
        self.slot().class
    }

    /// Whether the QEMU is held idle ([`ClassHandle::hold_idle`]).
    pub fn held(&self) -> bool {
        self.slot().held
    }

    /// Holds the QEMU at `SCHED_IDLE` (`true`) whatever class is asked
    /// for, or lets it back into the class asked for last (`false`): a
    /// guest whose kernel reports a lockup and makes no progress takes no
    /// core from the other cells ([`crate::vm`]).
    pub fn hold_idle(&self, held: bool) -> std::io::Result<()> {
        let mut slot = self.slot();
        slot.held = held;
        slot.apply()
    }

    /// [`spawn_guarded`], the child starting in the handle's class (set
    /// between fork and exec, so the QEMU never runs a moment in the
    /// other). The slot stays locked until the pid is known, so a
    /// [`ClassHandle::set`] meanwhile reaches the new QEMU.
    pub fn spawn(&self, cmd: &mut tokio::process::Command) -> std::io::Result<GuardedChild> {
        let mut slot = self.slot();
        if slot.effective() == Class::Idle {
            // SAFETY: sched_setscheduler is async-signal-safe; nothing else
            // runs between fork and exec.
            unsafe {
                cmd.pre_exec(|| set_policy(0, Class::Idle));
            }
        }
        let child = spawn_guarded(cmd)?;
        slot.pid = child.id();
        Ok(child)
    }

    /// Puts the QEMU in `class`: every thread of the one running now, and
    /// the next one spawned. A thread that is gone is no error (QEMU ends
    /// threads as it likes); a class the host refuses is reported.
    pub fn set(&self, class: Class) -> std::io::Result<()> {
        let mut slot = self.slot();
        slot.class = class;
        slot.apply()
    }

    /// How long the running QEMU's threads waited for a core while they
    /// could run, summed over its threads (`/proc/<pid>/task/*/schedstat`,
    /// second field); `None` when no QEMU runs or the host keeps no
    /// schedstats.
    pub fn run_delay(&self) -> Option<Duration> {
        let pid = self.slot().pid?;
        let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).ok()?;
        let mut ns = 0u64;
        let mut any = false;
        for t in tasks.flatten() {
            let Ok(text) = std::fs::read_to_string(t.path().join("schedstat")) else {
                continue;
            };
            if let Some(d) = schedstat_run_delay(&text) {
                ns = ns.saturating_add(d);
                any = true;
            }
        }
        any.then(|| Duration::from_nanos(ns))
    }
}

impl Slot {
    /// The class the QEMU runs in: idle while held.
    fn effective(&self) -> Class {
        if self.held {
            Class::Idle
        } else {
            self.class
        }
    }

    /// Puts the running QEMU, if any, in its effective class.
    fn apply(&self) -> std::io::Result<()> {
        match self.pid {
            Some(pid) => set_threads(pid, self.effective()),
            None => Ok(()),
        }
    }
}

/// The run delay (ns) of one `schedstat` line: "oncpu_ns delay_ns slices".
fn schedstat_run_delay(text: &str) -> Option<u64> {
    text.split_whitespace().nth(1)?.parse().ok()
}

fn set_policy(tid: libc::pid_t, class: Class) -> std::io::Result<()> {
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: a valid sched_param we own; tid 0 is the calling thread.
    if unsafe { libc::sched_setscheduler(tid, class.policy(), &param) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Sets `class` on every thread of `pid`, if `pid` is still a QEMU (a pid
/// the host reused for something else is left alone).
fn set_threads(pid: u32, class: Class) -> std::io::Result<()> {
    let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
    if !comm.starts_with("qemu") {
        return Ok(());
    }
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Ok(());
    };
    for t in tasks.flatten() {
        let Some(tid) = t.file_name().to_str().and_then(|s| s.parse().ok()) else {
            continue;
        };
        match set_policy(tid, class) {
            Err(e) if e.raw_os_error() != Some(libc::ESRCH) => return Err(e),
            _ => {}
        }
    }
    Ok(())
}

/// Whether this process may move a thread from `SCHED_IDLE` back to
/// normal (root, `CAP_SYS_NICE`, or an `RLIMIT_NICE` of 20): without it a
/// cell started idle could never be promoted, so the runner does not fill.
/// Tried on a thread of its own that then ends.
pub fn can_promote() -> bool {
    std::thread::spawn(|| {
        set_policy(0, Class::Idle).is_ok() && set_policy(0, Class::Normal).is_ok()
    })
    .join()
    .unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_delay_is_the_second_schedstat_field() {
        assert_eq!(schedstat_run_delay("123 456 7\n"), Some(456));
        assert_eq!(schedstat_run_delay("123"), None);
        assert_eq!(schedstat_run_delay("a b c"), None);
    }

    #[test]
    fn a_handle_remembers_its_class_before_any_qemu() {
        let h = ClassHandle::new(Class::Idle);
        assert_eq!(h.class(), Class::Idle);
        assert_eq!(h.run_delay(), None, "nothing spawned");
        h.set(Class::Normal).unwrap();
        assert_eq!(h.clone().class(), Class::Normal);
    }

    /// A real child spawned idle is idle on the host, and set() moves
    /// every thread of it (a QEMU-named copy of `sleep`, since set() only
    /// touches QEMUs).
    #[tokio::test]
    async fn a_spawned_child_runs_in_the_class_asked() {
        if !can_promote() {
            eprintln!("skipped: this user may not leave SCHED_IDLE");
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let sleep = dir.path().join("qemu-sleep");
        std::fs::copy("/bin/sleep", &sleep).unwrap();
        let h = ClassHandle::new(Class::Idle);
        let mut cmd = tokio::process::Command::new(&sleep);
        cmd.arg("30");
        let mut child = h.spawn(&mut cmd).unwrap();
        let pid = child.id().unwrap() as libc::pid_t;
        // SAFETY: a plain query of a pid we spawned.
        let policy = || unsafe { libc::sched_getscheduler(pid) };
        assert_eq!(policy(), libc::SCHED_IDLE);
        assert!(h.run_delay().is_some(), "schedstat of a live child");
        h.set(Class::Normal).unwrap();
        assert_eq!(policy(), libc::SCHED_OTHER);
        h.set(Class::Idle).unwrap();
        assert_eq!(policy(), libc::SCHED_IDLE);
        // Held idle, a promotion waits for the release.
        h.hold_idle(true).unwrap();
        h.set(Class::Normal).unwrap();
        assert_eq!((policy(), h.held()), (libc::SCHED_IDLE, true));
        h.hold_idle(false).unwrap();
        assert_eq!((policy(), h.held()), (libc::SCHED_OTHER, false));
        child.kill();
    }
}

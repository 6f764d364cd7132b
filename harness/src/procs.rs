//! Nothing the harness starts for a run (QEMU, virtiofsd) outlives it:
//! [`spawn_guarded`] puts each such child in its own process group with
//! `PR_SET_PDEATHSIG` and `kill_on_drop`, and registers the group here, so
//! that a second Ctrl-C (or a fatal error path) kills them all by group.

use std::sync::Mutex;

static GROUPS: Mutex<Vec<i32>> = Mutex::new(Vec::new());

/// Registers a child's process group (its pid: children are group leaders).
pub fn register(pgid: i32) {
    if let Ok(mut g) = GROUPS.lock() {
        g.push(pgid);
    }
}

/// Forgets a process group that has been reaped.
pub fn unregister(pgid: i32) {
    if let Ok(mut g) = GROUPS.lock() {
        g.retain(|&p| p != pgid);
    }
}

/// SIGKILLs a process group.
pub fn kill_group(pgid: i32) {
    if pgid > 0 {
        // SAFETY: kill(2) with a negative pid signals the group; no memory involved.
        unsafe {
            libc::kill(-pgid, libc::SIGKILL);
        }
    }
}

/// SIGKILLs every registered group (used on the second signal).
pub fn kill_all() {
    let groups = GROUPS.lock().map(|g| g.clone()).unwrap_or_default();
    for p in groups {
        kill_group(p);
    }
}

/// Number of live registered groups (for tests).
pub fn live() -> usize {
    GROUPS.lock().map(|g| g.len()).unwrap_or(0)
}

/// A child started by [`spawn_guarded`]; it derefs to the
/// [`tokio::process::Child`]. Dropping it SIGKILLs its process group and
/// the child (reaped in the background) and unregisters the group.
#[derive(Debug)]
pub struct GuardedChild {
    child: tokio::process::Child,
    pgid: i32,
}

impl GuardedChild {
    /// The child's process group (its pid; 0 if it was already reaped at spawn).
    pub fn pgid(&self) -> i32 {
        self.pgid
    }

    /// SIGKILLs the process group and the child, without waiting.
    pub fn kill(&mut self) {
        kill_group(self.pgid);
        // Fails only when the child was already reaped: nothing to kill then.
        let _ = self.child.start_kill();
    }
}

impl std::ops::Deref for GuardedChild {
    type Target = tokio::process::Child;

    fn deref(&self) -> &Self::Target {
        &self.child
    }
}

impl std::ops::DerefMut for GuardedChild {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.child
    }
}

impl Drop for GuardedChild {
    fn drop(&mut self) {
        // Anything left in the group (nothing, normally) goes too.
        self.kill();
        unregister(self.pgid);
    }
}

/// Spawns `cmd` so that it cannot outlive the harness: in its own process
/// group (so the group can be killed whole, and a terminal's Ctrl-C reaches
/// only the harness, which then stops it in order), with
/// `PR_SET_PDEATHSIG(SIGKILL)` (killed if the harness dies without
/// cleaning up), `kill_on_drop`, and registered for [`kill_all`].
pub fn spawn_guarded(cmd: &mut tokio::process::Command) -> std::io::Result<GuardedChild> {
    cmd.kill_on_drop(true).process_group(0);
    // SAFETY: prctl is async-signal-safe; nothing else runs between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            Ok(())
        });
    }
    let child = cmd.spawn()?;
    let pgid = child.id().map(|p| p as i32).unwrap_or(0);
    register(pgid);
    Ok(GuardedChild { child, pgid })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn registered(pgid: i32) -> bool {
        GROUPS.lock().unwrap().contains(&pgid)
    }

    /// `/proc/<pid>/stat`'s state letter, `None` when the process is gone.
    fn state(pid: i32) -> Option<char> {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        stat.rsplit_once(')')?.1.trim_start().chars().next()
    }

    #[tokio::test]
    async fn guarded_child_leads_its_group_and_dies_with_its_guard() {
        // The child forks a grandchild in its group: the guard kills both.
        let mut cmd = tokio::process::Command::new("sh");
        cmd.args(["-c", "sleep 60 & echo $!; wait"])
            .stdout(std::process::Stdio::piped());
        let mut child = spawn_guarded(&mut cmd).unwrap();
        let pgid = child.pgid();
        assert!(pgid > 0 && registered(pgid));
        // SAFETY: getpgid(2) reads no memory of ours.
        assert_eq!(unsafe { libc::getpgid(pgid) }, pgid, "own group");
        let mut out = child.stdout.take().unwrap();
        let mut line = Vec::new();
        while !line.ends_with(b"\n") {
            let mut b = [0u8; 1];
            let n = tokio::io::AsyncReadExt::read(&mut out, &mut b)
                .await
                .unwrap();
            assert_eq!(n, 1, "grandchild pid line");
            line.push(b[0]);
        }
        let grandchild: i32 = String::from_utf8(line).unwrap().trim().parse().unwrap();
        // SAFETY: as above.
        assert_eq!(unsafe { libc::getpgid(grandchild) }, pgid);
        drop(child);
        assert!(!registered(pgid));
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        // The grandchild is reparented and reaped by init (or a subreaper):
        // gone or a zombie means it was killed.
        while matches!(state(grandchild), Some(s) if s != 'Z') {
            assert!(
                std::time::Instant::now() < deadline,
                "grandchild {grandchild} still alive"
            );
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    }
}

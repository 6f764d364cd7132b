//! Every QEMU the harness starts is registered here so that nothing
//! outlives the harness: a second Ctrl-C (or a fatal error path) kills
//! them all by process group. Children also get `PR_SET_PDEATHSIG`.

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

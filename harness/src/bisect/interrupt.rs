//! Ctrl-C during a bisection: the signal state shared with the handler, and
//! children run in their own process group so that it reaches them through us.

use super::{infra, BisectError};
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::Arc;

/// Signal state shared with the handler: set on SIGINT/SIGTERM, which is
/// forwarded to the running child's process group.
#[derive(Debug, Default, Clone)]
pub struct Interrupt {
    /// Whether a signal came.
    pub seen: Arc<AtomicBool>,
    /// Process group of the running child (0: none).
    pub child: Arc<AtomicI32>,
}

impl Interrupt {
    /// Records the signal and forwards it.
    pub fn fire(&self, sig: i32) {
        self.seen.store(true, Ordering::SeqCst);
        let pg = self.child.load(Ordering::SeqCst);
        if pg > 0 {
            // SAFETY: plain syscall.
            unsafe {
                libc::kill(-pg, sig);
            }
        }
    }
}

/// Runs a child in its own process group (so that the interrupt reaches it
/// through us); returns its exit code and stdout, each line of which also
/// goes to `echo` as it comes.
pub(super) fn run_child(
    mut cmd: Command,
    intr: &Interrupt,
    echo: fn(&str),
) -> Result<(Option<i32>, String), BisectError> {
    use std::os::unix::process::CommandExt;
    cmd.process_group(0)
        .stdin(Stdio::null())
        .stdout(Stdio::piped());
    let mut child = cmd.spawn().map_err(|e| infra(format!("spawn: {e}")))?;
    intr.child.store(child.id() as i32, Ordering::SeqCst);
    let mut text = String::new();
    if let Some(out) = child.stdout.take() {
        for line in BufReader::new(out).lines() {
            let Ok(line) = line else { break };
            echo(&line);
            text.push_str(&line);
            text.push('\n');
        }
    }
    let status = child.wait().map_err(|e| infra(format!("wait: {e}")))?;
    intr.child.store(0, Ordering::SeqCst);
    Ok((status.code(), text))
}

//! SIGINT/SIGTERM: the first cancels (VMs are asked to quit, partial
//! results are still written); the second kills every QEMU at once and
//! exits 130.

use tokio::signal::unix::{signal, SignalKind};
use tokio_util::sync::CancellationToken;

/// Which signal arrived.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Interrupt {
    /// SIGINT (Ctrl-C).
    Int,
    /// SIGTERM.
    Term,
}

/// Installs the handlers; must be called inside the tokio runtime. What
/// the harness does about a signal goes to `notice` (the front door's
/// stderr: the library prints nothing).
pub fn install(cancel: CancellationToken, notice: fn(&str)) -> std::io::Result<()> {
    let mut int = signal(SignalKind::interrupt())?;
    let mut term = signal(SignalKind::terminate())?;
    tokio::spawn(async move {
        let mut seen = 0;
        loop {
            let which = tokio::select! {
                Some(()) = int.recv() => Interrupt::Int,
                Some(()) = term.recv() => Interrupt::Term,
                else => return,
            };
            seen += 1;
            if seen == 1 {
                notice(&format!("{which:?} received: stopping VMs and writing partial results (again to kill at once)"));
                cancel.cancel();
            } else {
                notice(&format!("{which:?} received again: killing every VM now"));
                crate::procs::kill_all();
                std::process::exit(crate::error::exit::INTERRUPTED.into());
            }
        }
    });
    Ok(())
}

//! The harness's terminal bridged to the guest's shell port (`--shell`):
//! once the guest says its shell runs, the terminal goes into raw mode
//! (restored when the bridge ends, whatever the exit path: [`RawMode`] is
//! a drop guard), stdin goes to the guest byte for byte (so Ctrl-C reaches
//! the guest's foreground job, not the harness) and the guest's output to
//! stdout, until the VM ends. After the end of stdin the guest's shell
//! gets ^D, so a script piped into `harness run --shell` ends it.

use std::io::{self, Read};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Once};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::UnixListener;
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

/// A terminal in raw mode; the saved settings come back on drop.
pub struct RawMode {
    fd: i32,
    saved: libc::termios,
}

/// The settings to put back, also when the process exits without
/// unwinding (`std::process::exit` after a second signal): an `atexit`
/// handler restores what is here.
static SAVED: Mutex<Option<(i32, libc::termios)>> = Mutex::new(None);

extern "C" fn restore_at_exit() {
    if let Ok(mut saved) = SAVED.lock() {
        if let Some((fd, t)) = saved.take() {
            // SAFETY: restores what tcgetattr returned for the same fd.
            unsafe { libc::tcsetattr(fd, libc::TCSANOW, &t) };
        }
    }
}

/// Whether this process has its terminal in raw mode now (a line printed
/// meanwhile must end in `\r\n`).
pub fn raw_active() -> bool {
    SAVED.lock().map(|s| s.is_some()).unwrap_or(false)
}

impl RawMode {
    /// Puts `fd` into raw mode; `None` when it is not a terminal.
    pub fn enter(fd: i32) -> Option<RawMode> {
        // SAFETY: isatty on any fd is harmless.
        if unsafe { libc::isatty(fd) } != 1 {
            return None;
        }
        // SAFETY: termios is plain data; tcgetattr fills it.
        let mut saved: libc::termios = unsafe { std::mem::zeroed() };
        // SAFETY: fd is a terminal, saved is live.
        if unsafe { libc::tcgetattr(fd, &mut saved) } != 0 {
            return None;
        }
        let mut raw = saved;
        // SAFETY: raw is live.
        unsafe { libc::cfmakeraw(&mut raw) };
        // SAFETY: as above.
        static AT_EXIT: Once = Once::new();
        // SAFETY: registers a plain extern "C" function.
        AT_EXIT.call_once(|| unsafe {
            libc::atexit(restore_at_exit);
        });
        if let Ok(mut s) = SAVED.lock() {
            *s = Some((fd, saved));
        }
        // SAFETY: as above.
        if unsafe { libc::tcsetattr(fd, libc::TCSANOW, &raw) } != 0 {
            restore_at_exit();
            return None;
        }
        Some(RawMode { fd, saved })
    }
}

impl Drop for RawMode {
    fn drop(&mut self) {
        if let Ok(mut s) = SAVED.lock() {
            s.take();
        }
        // SAFETY: restores what tcgetattr returned for the same fd.
        unsafe { libc::tcsetattr(self.fd, libc::TCSANOW, &self.saved) };
    }
}

/// Reads stdin on a thread of its own (polling, so it stops soon after
/// `stop` is set and never blocks the runtime's shutdown).
fn stdin_reader(tx: mpsc::Sender<Vec<u8>>, stop: Arc<AtomicBool>) {
    std::thread::spawn(move || {
        let stdin = io::stdin();
        let fd = stdin.as_raw_fd();
        let mut buf = [0u8; 4096];
        while !stop.load(Ordering::SeqCst) {
            let mut p = libc::pollfd {
                fd,
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: p is a live pollfd.
            let r = unsafe { libc::poll(&mut p, 1, 100) };
            if r <= 0 {
                continue;
            }
            match stdin.lock().read(&mut buf) {
                Ok(0) | Err(_) => return,
                Ok(n) => {
                    if tx.blocking_send(buf[..n].to_vec()).is_err() {
                        return;
                    }
                }
            }
        }
    });
}

/// Bridges the shell port QEMU connects to on `listener` with this
/// process's stdin/stdout once `ready` turns true, until `stop`.
pub async fn bridge(
    listener: UnixListener,
    mut ready: watch::Receiver<bool>,
    stop: CancellationToken,
) {
    let mut stream = tokio::select! {
        r = listener.accept() => match r {
            Ok((s, _)) => s,
            Err(_) => return,
        },
        _ = stop.cancelled() => return,
    };
    let mut buf = vec![0u8; 4096];
    let mut stdout = tokio::io::stdout();
    // Before the shell runs, what the port says is the guest's own.
    tokio::select! {
        _ = ready.wait_for(|r| *r) => {}
        _ = stop.cancelled() => return,
    }
    let _raw = RawMode::enter(io::stdin().as_raw_fd());
    let halt = Arc::new(AtomicBool::new(false));
    let (tx, mut rx) = mpsc::channel::<Vec<u8>>(64);
    stdin_reader(tx, halt.clone());
    let mut stdin_open = true;
    loop {
        tokio::select! {
            r = stream.read(&mut buf) => match r {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    let _ = stdout.write_all(&buf[..n]).await;
                    let _ = stdout.flush().await;
                }
            },
            input = rx.recv(), if stdin_open => match input {
                Some(bytes) => {
                    if stream.write_all(&bytes).await.is_err() {
                        break;
                    }
                }
                None => stdin_open = false,
            },
            // End of input: the guest's shell gets ^D, again each second
            // (one that lands while a command runs is that command's), so
            // `harness run --shell < script` ends too.
            _ = tokio::time::sleep(Duration::from_secs(1)), if !stdin_open => {
                if stream.write_all(b"\x04").await.is_err() {
                    break;
                }
            }
            _ = stop.cancelled() => break,
        }
    }
    halt.store(true, Ordering::SeqCst);
    // The reader thread notices within its poll interval.
    tokio::time::sleep(Duration::from_millis(1)).await;
}

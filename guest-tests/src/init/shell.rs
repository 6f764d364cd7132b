//! The debugging extras of guest-init: busybox's applet links, and the
//! interactive shell of `--shell` on its own serial port as its controlling
//! terminal (so Ctrl-C, typed on the host, reaches its foreground job).

use super::report::Ending;
use crate::plan::PlannedShell;
use std::fs::OpenOptions;
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};

/// Links busybox's applets beside `busybox` (`sh` first, by hand: the rest
/// through `busybox --install -s`). Returns what happened, for the log.
pub fn link_applets(busybox: &str) -> String {
    let dir = std::path::Path::new(busybox)
        .parent()
        .unwrap_or(std::path::Path::new("/bin"));
    let sh = dir.join("sh");
    if let Err(e) = std::os::unix::fs::symlink(busybox, &sh) {
        if e.kind() != io::ErrorKind::AlreadyExists {
            return format!("cannot link {}: {e}", sh.display());
        }
    }
    match Command::new(busybox)
        .args(["--install", "-s"])
        .arg(dir)
        .stdin(Stdio::null())
        .status()
    {
        Ok(st) if st.success() => format!("busybox applets linked in {}", dir.display()),
        Ok(st) => format!("busybox --install: {st}"),
        Err(e) => format!("cannot run {busybox}: {e}"),
    }
}

/// Mounts debugfs on `/sys/kernel/debug` for the shell, if the kernel has
/// it. Returns what happened, for the log.
pub fn mount_debugfs() -> String {
    let target = c"/sys/kernel/debug";
    // SAFETY: all pointers are live NUL-terminated strings.
    let r = unsafe {
        libc::mount(
            c"debugfs".as_ptr(),
            target.as_ptr(),
            c"debugfs".as_ptr(),
            0,
            std::ptr::null(),
        )
    };
    if r == 0 {
        "mounted debugfs on /sys/kernel/debug".into()
    } else {
        format!(
            "no debugfs on /sys/kernel/debug: {}",
            io::Error::last_os_error()
        )
    }
}

/// Runs the shell on its port until it exits: a new session whose
/// controlling terminal is the port (cooked mode, echo, signals from
/// `^C`/`^Z`), no deadline. `ready` is called once the port is open and
/// set, before the shell starts: input sent earlier would be lost. Its
/// exit status is the result.
pub fn run(shell: &PlannedShell, path_env: &str, ready: &mut dyn FnMut()) -> Ending {
    let port = match OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_NOCTTY)
        .open(&shell.port)
    {
        Ok(f) => f,
        Err(e) => return Ending::Failed(format!("open {}: {e}", shell.port)),
    };
    if let Err(e) = cooked(port.as_raw_fd()) {
        return Ending::Failed(format!("termios {}: {e}", shell.port));
    }
    let stdio = || port.try_clone().map(Stdio::from);
    let (Ok(i), Ok(o), Ok(e)) = (stdio(), stdio(), stdio()) else {
        return Ending::Failed(format!("dup {}", shell.port));
    };
    ready();
    let mut cmd = Command::new(&shell.path);
    cmd.env_clear()
        .env("PATH", path_env)
        .env("TERM", "linux")
        .env("HOME", "/tmp")
        .envs(shell.env.iter().map(|(k, v)| (k, v)))
        .stdin(i)
        .stdout(o)
        .stderr(e);
    // SAFETY: only async-signal-safe calls (setsid, ioctl) between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            if libc::setsid() < 0 || libc::ioctl(0, libc::TIOCSCTTY, 1) < 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let status = cmd.status();
    // The shell's last words (`...; exit`) may still sit in the UART's
    // buffer, paced at 115200 baud: power-off would drop them.
    // SAFETY: the port is open.
    unsafe { libc::tcdrain(port.as_raw_fd()) };
    match status {
        Ok(st) => {
            use std::os::unix::process::ExitStatusExt;
            Ending::from_wait_status(st.into_raw())
        }
        Err(e) => Ending::Failed(format!("cannot run {}: {e}", shell.path)),
    }
}

/// A terminal for a person: the kernel's sane defaults (echo, canonical
/// input, `^C` as SIGINT, `\n` -> `\r\n`) at 115200 baud.
fn cooked(fd: i32) -> io::Result<()> {
    // SAFETY: termios is plain data; tcgetattr fills it.
    let mut t: libc::termios = unsafe { std::mem::zeroed() };
    // SAFETY: fd is open, t is live.
    if unsafe { libc::tcgetattr(fd, &mut t) } != 0 {
        return Err(io::Error::last_os_error());
    }
    t.c_iflag |= libc::ICRNL;
    t.c_oflag |= libc::OPOST | libc::ONLCR;
    t.c_lflag |= libc::ECHO | libc::ECHOE | libc::ICANON | libc::ISIG | libc::IEXTEN;
    // The speed in the control flags (static glibc has no cfsetspeed):
    // QEMU's UART paces output by it.
    t.c_cflag = (t.c_cflag & !libc::CBAUD) | libc::B115200 | libc::CLOCAL | libc::CREAD;
    // SAFETY: t is live; fd is open.
    if unsafe { libc::tcsetattr(fd, libc::TCSANOW, &t) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

//! The PID 1 steps before the tests: mounts, kernel log, results port.

use std::ffi::CString;
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;

/// One filesystem to mount.
struct Mount {
    source: &'static str,
    target: &'static str,
    fstype: &'static str,
    flags: libc::c_ulong,
    data: &'static str,
}

/// What the tests need, in mount order.
const MOUNTS: &[Mount] = &[
    Mount {
        source: "proc",
        target: "/proc",
        fstype: "proc",
        flags: libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
        data: "",
    },
    Mount {
        source: "sysfs",
        target: "/sys",
        fstype: "sysfs",
        flags: libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
        data: "",
    },
    Mount {
        source: "devtmpfs",
        target: "/dev",
        fstype: "devtmpfs",
        flags: libc::MS_NOSUID,
        data: "mode=0755",
    },
    Mount {
        source: "tmpfs",
        target: "/tmp",
        fstype: "tmpfs",
        flags: libc::MS_NOSUID | libc::MS_NODEV,
        data: "mode=1777",
    },
];

/// Mounts [`MOUNTS`], creating the mount points. A filesystem that is
/// already mounted (`EBUSY`) is fine; any other failure is fatal.
pub fn mount_all(log: &mut Log) -> Result<(), String> {
    for m in MOUNTS {
        if let Err(e) = std::fs::create_dir_all(m.target) {
            return Err(format!("mkdir {}: {e}", m.target));
        }
        let cstr = |s: &str| CString::new(s).map_err(|e| format!("{s:?}: {e}"));
        let (source, target, fstype, data) = (
            cstr(m.source)?,
            cstr(m.target)?,
            cstr(m.fstype)?,
            cstr(m.data)?,
        );
        // SAFETY: all pointers are live NUL-terminated strings.
        let r = unsafe {
            libc::mount(
                source.as_ptr(),
                target.as_ptr(),
                fstype.as_ptr(),
                m.flags,
                data.as_ptr().cast(),
            )
        };
        if r == 0 {
            log.line(&format!("mounted {} on {}", m.fstype, m.target));
            continue;
        }
        let e = io::Error::last_os_error();
        if e.raw_os_error() == Some(libc::EBUSY) {
            log.line(&format!("{} already mounted on {}", m.fstype, m.target));
        } else {
            return Err(format!("mount {} on {}: {e}", m.fstype, m.target));
        }
    }
    Ok(())
}

/// Userspace writes to `/dev/kmsg` are rate limited by default (a burst of
/// 10 per 5 s), which would drop `harness: begin/end` markers. Lift it if
/// the kernel lets us (`printk.devkmsg=on` on the command line does the
/// same and also works without sysctl).
pub fn unlimit_kmsg(log: &mut Log) {
    const KNOB: &str = "/proc/sys/kernel/printk_devkmsg";
    match std::fs::write(KNOB, "on\n") {
        Ok(()) => log.line("kmsg rate limit off"),
        Err(e) => log.line(&format!(
            "cannot write {KNOB} ({e}); markers may be rate limited unless printk.devkmsg=on"
        )),
    }
}

/// The init's own log: `/dev/kmsg` once `/dev` is mounted, the console
/// (stderr) until then or if it cannot be opened. Best effort: never fails.
pub struct Log {
    kmsg: Option<File>,
    sink: io::Sink,
}

impl Log {
    /// A log writing to stderr until [`Log::open_kmsg`].
    pub fn new() -> Log {
        Log {
            kmsg: None,
            sink: io::sink(),
        }
    }

    /// Switches to `/dev/kmsg`.
    pub fn open_kmsg(&mut self) {
        match OpenOptions::new().write(true).open("/dev/kmsg") {
            Ok(f) => self.kmsg = Some(f),
            Err(e) => self.line(&format!(
                "cannot open /dev/kmsg: {e}; logging to the console"
            )),
        }
    }

    /// Logs `harness: <msg>` at level info, one record per call.
    pub fn line(&mut self, msg: &str) {
        let rec = format!("<6>harness: {msg}\n");
        match &mut self.kmsg {
            Some(k) => {
                let _ = k.write_all(rec.as_bytes());
            }
            None => {
                let _ = io::stderr().write_all(&rec.as_bytes()[3..]);
            }
        }
    }

    /// The writer for the runner's markers (a sink without `/dev/kmsg`).
    pub fn kmsg(&mut self) -> &mut dyn Write {
        match &mut self.kmsg {
            Some(k) => k,
            None => &mut self.sink,
        }
    }

    /// Logs from a context that has no [`Log`] (the panic hook).
    pub fn emergency(msg: &str) {
        let rec = format!("<2>harness: {msg}\n");
        if let Ok(mut k) = OpenOptions::new().write(true).open("/dev/kmsg") {
            let _ = k.write_all(rec.as_bytes());
        }
        let _ = io::stderr().write_all(&rec.as_bytes()[3..]);
    }
}

/// The serial port that carries the KTAP stream, in raw mode.
pub struct ResultsPort {
    file: File,
}

impl ResultsPort {
    /// Opens `path` and puts it in raw mode: no `\n` -> `\r\n`, no echo, no
    /// line discipline; `CLOCAL` so writes never wait for a modem carrier.
    pub fn open(path: &str) -> Result<ResultsPort, String> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_NOCTTY | libc::O_NONBLOCK | libc::O_CLOEXEC)
            .open(path)
            .map_err(|e| format!("open {path}: {e}"))?;
        let fd = file.as_raw_fd();
        let err = |what: &str| format!("{what} {path}: {}", io::Error::last_os_error());
        // SAFETY: termios is plain data; tcgetattr fills it.
        let mut t: libc::termios = unsafe { std::mem::zeroed() };
        // SAFETY: fd is open, t is live.
        if unsafe { libc::tcgetattr(fd, &mut t) } != 0 {
            return Err(err("tcgetattr"));
        }
        // SAFETY: t is live.
        unsafe { libc::cfmakeraw(&mut t) };
        t.c_cflag |= libc::CLOCAL | libc::CREAD;
        // SAFETY: fd is open, t is live.
        if unsafe { libc::tcsetattr(fd, libc::TCSANOW, &t) } != 0 {
            return Err(err("tcsetattr"));
        }
        // Blocking writes from here on: output must not be lost when the
        // UART buffer is full.
        // SAFETY: plain fcntl on an open fd.
        let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
        // SAFETY: as above.
        if flags < 0 || unsafe { libc::fcntl(fd, libc::F_SETFL, flags & !libc::O_NONBLOCK) } != 0 {
            return Err(err("fcntl"));
        }
        Ok(ResultsPort { file })
    }

    /// Writes one line.
    pub fn write_line(&mut self, line: &str) -> Result<(), String> {
        let mut buf = String::with_capacity(line.len() + 1);
        buf.push_str(line);
        buf.push('\n');
        self.file
            .write_all(buf.as_bytes())
            .map_err(|e| format!("writing results: {e}"))
    }

    /// Waits until everything written has left the UART, so nothing is lost
    /// when the VM ends.
    pub fn drain(&self) {
        // SAFETY: plain syscall on an open fd.
        unsafe { libc::tcdrain(self.file.as_raw_fd()) };
    }
}

impl Write for ResultsPort {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.file.write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.file.flush()
    }
}

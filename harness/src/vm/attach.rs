//! What a debugging session attaches to a VM ([`Attach`]): live lines
//! for the terminal ([`LiveLine`], split and sanitised like guest-init's
//! result lines, bounded by [`LIVE_BACKLOG`]), the shell's start mark for
//! the terminal bridge, and the guest memory image (QMP
//! `dump-guest-memory`).

use super::QmpAsk;
use crate::debug::{DumpFormat, Dumped};
use guest_tests::init::lines::{sanitize_line, LineSplitter, MAX_LINE_BYTES};
use guest_tests::plan::SHELL_MARK;
use std::path::{Path, PathBuf};
use std::time::Duration;
use tokio::sync::{mpsc, oneshot, watch};

/// A line a VM printed, for the terminal (`--live`): sanitised like the
/// guest's result lines, at most [`MAX_LINE_BYTES`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LiveLine {
    /// A kernel console line (ttyS0).
    Console(String),
    /// A line of the KTAP results stream (ttyS1).
    Result(String),
    /// Lines not shown because the terminal fell behind.
    Dropped(u64),
}

/// Live lines in flight at most; past that they are dropped and counted.
pub const LIVE_BACKLOG: usize = 4096;

/// Where a VM's live lines go: the runner's channel, tagged with the cell.
#[derive(Debug, Clone)]
pub struct LiveTap {
    /// The cell's index.
    pub index: usize,
    /// The runner's end of the channel (bounded: [`LIVE_BACKLOG`]).
    pub tx: mpsc::Sender<(usize, LiveLine)>,
}

/// What a debugging session attaches to a VM.
#[derive(Debug, Clone, Default)]
pub struct Attach {
    /// Live console and result lines.
    pub live: Option<LiveTap>,
    /// A guest memory image on a panic or at the watchdog: the directory
    /// and the format asked for.
    pub dump: Option<(PathBuf, DumpFormat)>,
    /// The host class QEMU runs in, changed by the runner while it runs
    /// ([`crate::fill`]); none: normal.
    pub class: Option<crate::sched_class::ClassHandle>,
}

/// Makes a [`LiveLine`] of a sanitised line (which port it came from).
pub(super) type LiveKind = fn(String) -> LiveLine;

/// Splits a serial stream into sanitised lines for the live tap and for
/// the shell's start mark.
pub(super) struct LineTap {
    splitter: LineSplitter,
    live: Option<(LiveTap, LiveKind)>,
    dropped: u64,
    shell_ready: Option<watch::Sender<bool>>,
}

impl LineTap {
    /// A tap for the live lines of one port (`make` says which) and, on
    /// the results port of a shell session, the shell's start mark.
    pub(super) fn new(
        live: Option<(LiveTap, LiveKind)>,
        shell_ready: Option<watch::Sender<bool>>,
    ) -> Option<LineTap> {
        (live.is_some() || shell_ready.is_some()).then(|| LineTap {
            splitter: LineSplitter::new(MAX_LINE_BYTES),
            live,
            dropped: 0,
            shell_ready,
        })
    }

    pub(super) fn push(&mut self, chunk: &[u8]) {
        for l in self.splitter.push(chunk) {
            self.line(sanitize_line(&l.bytes));
        }
    }

    pub(super) fn finish(&mut self) {
        if let Some(l) = self.splitter.finish() {
            self.line(sanitize_line(&l.bytes));
        }
    }

    fn line(&mut self, text: String) {
        if let Some(tx) = &self.shell_ready {
            if text.trim_start().starts_with(SHELL_MARK) {
                let _ = tx.send(true);
            }
        }
        let Some((tap, make)) = &self.live else {
            return;
        };
        if self.dropped > 0
            && tap
                .tx
                .try_send((tap.index, LiveLine::Dropped(self.dropped)))
                .is_ok()
        {
            self.dropped = 0;
        }
        if tap.tx.try_send((tap.index, make(text))).is_err() {
            self.dropped += 1;
        }
    }
}

pub(super) use qapi::qmp::DumpGuestMemoryFormat as Q;

/// QMP's formats for a dump format, best first: the plain kdump file
/// (`kdump-raw-*`, QEMU >= 8.2) before the flattened one older tools
/// need `makedumpfile -R` for.
pub(super) fn qmp_formats(f: DumpFormat) -> Vec<Q> {
    match f {
        DumpFormat::Elf => vec![Q::elf],
        DumpFormat::KdumpZlib => vec![Q::kdump_raw_zlib, Q::kdump_zlib],
        DumpFormat::KdumpLzo => vec![Q::kdump_raw_lzo, Q::kdump_lzo],
        DumpFormat::KdumpSnappy => vec![Q::kdump_raw_snappy, Q::kdump_snappy],
    }
}

/// Writes the guest's memory into `dir` through QMP (vCPUs stopped
/// first), after checking that the disk has room for `mem_mib` of RAM. QEMU must
/// still be running: a guest booted with `panic=0` waits after a panic.
pub(super) async fn dump_memory(
    ask: &mpsc::Sender<QmpAsk>,
    dir: &Path,
    format: DumpFormat,
    mem_mib: u64,
    child: &mut crate::procs::GuardedChild,
) -> Result<Dumped, String> {
    if let Some(free) = free_bytes(dir) {
        let need = (mem_mib + 64) << 20;
        if free < need {
            return Err(format!(
                "not written: {} has {} MiB free, the image needs about {mem_mib} MiB",
                dir.display(),
                free >> 20
            ));
        }
    }
    let (tx, rx) = oneshot::channel();
    ask.send(QmpAsk::Dump(dir.to_path_buf(), format, tx))
        .await
        .map_err(|_| "not written: QMP is gone".to_string())?;
    // Bounded: about 20 s per GiB on a slow disk, and at least a minute.
    let limit = Duration::from_secs(60 + mem_mib / 50);
    tokio::select! {
        r = tokio::time::timeout(limit, rx) => match r {
            Ok(Ok(Ok(d))) => Ok(d),
            Ok(Ok(Err(e))) => Err(format!("QMP dump-guest-memory failed: {e}")),
            Ok(Err(_)) => Err("not written: QMP closed".into()),
            Err(_) => Err(format!("not written within {} s", limit.as_secs())),
        },
        _ = child.wait() => Err("not written: QEMU exited first".into()),
    }
}

/// Bytes free for an unprivileged writer on the filesystem of `dir`.
fn free_bytes(dir: &Path) -> Option<u64> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(dir.as_os_str().as_bytes()).ok()?;
    // SAFETY: statvfs is plain data; the call fills it.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: c is a live NUL-terminated path, st is live.
    (unsafe { libc::statvfs(c.as_ptr(), &mut st) } == 0)
        .then(|| st.f_bavail as u64 * st.f_frsize as u64)
}

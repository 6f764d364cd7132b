//! Runs one VM: the only module that spawns QEMU.
//!
//! The harness listens on three Unix sockets in the cell's private temp dir
//! (console, results, QMP) before QEMU starts; QEMU connects to them, so
//! there are no ports to race for and no predictable paths. Console and
//! results are read live and bounded; a kernel panic on the console or a
//! QMP `GUEST_PANICKED` ends the run in seconds, and so does a wedged
//! guest ([`WedgeWatch`]; a suspect one runs at `SCHED_IDLE` meanwhile); a
//! watchdog and the cancel token bound the rest. QEMU is started by [`crate::procs::spawn_guarded`]
//! (own process group, `PR_SET_PDEATHSIG`, registered) and is killed on
//! every exit path. What a debugging session attaches ([`Attach`]): live
//! lines for the terminal, the shell port bridged to it
//! ([`crate::console_bridge`]), a memory image through QMP
//! `dump-guest-memory` on a panic or at the watchdog.

mod attach;
mod wedge;

pub use attach::{Attach, LiveLine, LiveTap, LIVE_BACKLOG};
pub use wedge::{WedgeWatch, WEDGE_MARGIN};

use crate::debug::{DumpFormat, Dumped};
use crate::host::Qemu;
use crate::profile::Arrivals;
use crate::qemu::{argv, VmSpec};
use crate::result::VmEnd;
use attach::{LineTap, LiveKind, Q};
use futures::StreamExt;
use guest_tests::plan::GuestExit;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::UnixListener;
use tokio::sync::{mpsc, oneshot, watch};
use tokio_util::sync::CancellationToken;

/// Errors that stop a VM from starting at all.
#[derive(Debug, thiserror::Error)]
pub enum VmError {
    /// A socket could not be created.
    #[error("cannot listen on {path}: {source}")]
    Listen {
        /// Socket path.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// QEMU could not be spawned.
    #[error("cannot start {qemu}: {source}")]
    Spawn {
        /// Binary.
        qemu: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A log file could not be written.
    #[error("cannot write {path}: {source}")]
    Log {
        /// File.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

/// Bounds on what the guest may make us keep.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Console bytes kept (in memory and in the log); the tail is kept too.
    pub console_bytes: usize,
    /// KTAP bytes kept.
    pub results_bytes: usize,
    /// After a panic is seen, how long QEMU gets to exit by itself.
    pub panic_grace: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            console_bytes: 32 << 20,
            results_bytes: 64 << 20,
            panic_grace: Duration::from_secs(5),
        }
    }
}

/// What to run.
#[derive(Debug, Clone)]
pub struct VmRequest {
    /// The QEMU binary.
    pub qemu: Qemu,
    /// The machine.
    pub spec: VmSpec,
    /// Wall-clock limit for the whole VM.
    pub watchdog: Duration,
    /// Where the console log goes (written live).
    pub console_log: PathBuf,
    /// Where the raw KTAP stream goes (written live).
    pub results_log: PathBuf,
    /// Bounds.
    pub limits: Limits,
    /// Live lines and the memory image (none by default).
    pub attach: Attach,
    /// The plan's tests and timeouts, to end a wedged guest early (`None`:
    /// only the watchdog does; a person at a shell or in gdb may keep a
    /// guest silent for as long as they like).
    pub wedge: Option<WedgeWatch>,
}

/// What a VM produced.
#[derive(Debug, Clone)]
pub struct VmOutput {
    /// How it ended.
    pub end: VmEnd,
    /// Console bytes (bounded).
    pub console: Vec<u8>,
    /// KTAP bytes (bounded).
    pub results: Vec<u8>,
    /// Tail of QEMU's stderr.
    pub qemu_stderr: String,
    /// QEMU's exit status (negative: killed by that signal).
    pub status: Option<i32>,
    /// Whether QMP reported GUEST_PANICKED.
    pub qmp_panicked: bool,
    /// Wall-clock time.
    pub elapsed: Duration,
    /// QEMU's CPU time (every vCPU thread), if it could be read.
    pub cpu: Option<Duration>,
    /// When the console's bytes arrived (since QEMU was spawned).
    pub console_at: Arrivals,
    /// When the results stream's bytes arrived.
    pub results_at: Arrivals,
    /// The guest memory image asked for by [`Attach::dump`]: written, or
    /// why not (`None`: none asked for, or no panic and no watchdog).
    pub dump: Option<Result<Dumped, String>>,
}

const PANIC_LINE: &[u8] = b"Kernel panic - not syncing";

/// A bounded capture: the first `limit` bytes, then only a sliding tail.
struct Capture {
    head: Vec<u8>,
    tail: Vec<u8>,
    dropped: u64,
    limit: usize,
}

impl Capture {
    fn new(limit: usize) -> Self {
        Capture {
            head: Vec::new(),
            tail: Vec::new(),
            dropped: 0,
            limit,
        }
    }

    fn push(&mut self, b: &[u8]) {
        let room = self.limit.saturating_sub(self.head.len());
        let (h, rest) = b.split_at(room.min(b.len()));
        self.head.extend_from_slice(h);
        if rest.is_empty() {
            return;
        }
        let tail_max = (self.limit / 8).max(4096);
        self.tail.extend_from_slice(rest);
        if self.tail.len() > tail_max {
            let cut = self.tail.len() - tail_max;
            self.dropped += cut as u64;
            self.tail.drain(..cut);
        }
    }

    fn finish(mut self) -> Vec<u8> {
        if self.dropped > 0 {
            self.head.extend_from_slice(
                format!(
                    "\n[harness: {} bytes dropped here: output limit]\n",
                    self.dropped
                )
                .as_bytes(),
            );
        }
        self.head.extend_from_slice(&self.tail);
        self.head
    }
}

/// Sees every chunk a serial port reads (the wedge watch).
type OnChunk = Box<dyn FnMut(&[u8]) + Send>;

/// Accepts one connection and copies it into a capture and a log file
/// (the file is bounded like the capture). `panic_tx` is set when the
/// console shows a panic. Also says when each read arrived since `spawned`.
async fn serial_reader(
    listener: UnixListener,
    log: tokio::fs::File,
    limit: usize,
    panic_tx: Option<watch::Sender<bool>>,
    mut tap: Option<LineTap>,
    mut on_chunk: Option<OnChunk>,
    spawned: Instant,
) -> (Vec<u8>, Arrivals) {
    let mut cap = Capture::new(limit);
    let mut arrivals = Arrivals::default();
    let Ok((mut stream, _)) = listener.accept().await else {
        return (cap.finish(), arrivals);
    };
    let mut log = tokio::io::BufWriter::new(log);
    let mut logged = 0usize;
    let mut buf = vec![0u8; 64 * 1024];
    let mut window: Vec<u8> = Vec::new();
    loop {
        let n = match stream.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        let chunk = &buf[..n];
        arrivals.record(n, spawned.elapsed());
        cap.push(chunk);
        if let Some(t) = tap.as_mut() {
            t.push(chunk);
        }
        if let Some(f) = on_chunk.as_mut() {
            f(chunk);
        }
        if logged < limit {
            let take = (limit - logged).min(n);
            // A full disk must not stop the run; the capture still has it.
            let _ = log.write_all(&chunk[..take]).await;
            let _ = log.flush().await;
            logged += take;
        }
        if let Some(tx) = &panic_tx {
            // Search across chunk boundaries with a small overlap window.
            window.extend_from_slice(chunk);
            if window.windows(PANIC_LINE.len()).any(|w| w == PANIC_LINE) {
                let _ = tx.send(true);
            }
            let keep = PANIC_LINE.len();
            if window.len() > keep {
                window.drain(..window.len() - keep);
            }
        }
    }
    let _ = log.flush().await;
    if let Some(t) = tap.as_mut() {
        t.finish();
    }
    (cap.finish(), arrivals)
}

/// What the harness asks of QMP.
enum QmpAsk {
    /// End QEMU.
    Quit,
    /// Stop the vCPUs and write a memory image into the directory, in the
    /// format if QEMU can write it, else as ELF.
    Dump(PathBuf, DumpFormat, oneshot::Sender<Result<Dumped, String>>),
}

/// Speaks QMP: records GUEST_PANICKED, and sends `quit` when asked.
async fn qmp_session(
    listener: UnixListener,
    panic_tx: watch::Sender<bool>,
    mut ask_rx: mpsc::Receiver<QmpAsk>,
    qmp_panicked: Arc<std::sync::atomic::AtomicBool>,
) {
    let Ok((stream, _)) = listener.accept().await else {
        return;
    };
    let Ok(neg) = qapi::futures::QmpStreamTokio::open(stream).await else {
        return;
    };
    let Ok(qmp) = neg.negotiate().await else {
        return;
    };
    let (service, mut events) = qmp.into_parts();
    let service = Arc::new(service);
    loop {
        tokio::select! {
            ev = events.next() => match ev {
                Some(Ok(qapi::qmp::Event::GUEST_PANICKED { .. })) => {
                    qmp_panicked.store(true, std::sync::atomic::Ordering::SeqCst);
                    let _ = panic_tx.send(true);
                }
                Some(Ok(ev)) => tracing::debug!(?ev, "QMP event"),
                Some(Err(e)) => {
                    tracing::debug!(%e, "QMP stream error");
                    break;
                }
                None => break,
            },
            Some(ask) = ask_rx.recv() => match ask {
                QmpAsk::Quit => {
                    tokio::spawn(service.execute(qapi::qmp::quit {}));
                }
                QmpAsk::Dump(dir, asked, reply) => {
                    // In a task: the event loop must go on reading the replies.
                    let service = service.clone();
                    tokio::spawn(async move {
                        let caps = service
                            .execute(qapi::qmp::query_dump_guest_memory_capability {})
                            .await;
                        let formats = caps.map(|c| c.formats).unwrap_or_default();
                        let (format, qmp) = attach::qmp_formats(asked)
                            .into_iter()
                            .find(|q| formats.contains(q))
                            .map_or((DumpFormat::Elf, Q::elf), |q| (asked, q));
                        let path = dir.join(format.file_name());
                        let _ = service.execute(qapi::qmp::stop {}).await;
                        let r = service
                            .execute(qapi::qmp::dump_guest_memory {
                                paging: false,
                                protocol: format!("file:{}", path.display()),
                                detach: Some(false),
                                format: Some(qmp),
                                begin: None,
                                length: None,
                            })
                            .await
                            .map(|_| Dumped { path, format, asked })
                            .map_err(|e| e.to_string());
                        let _ = reply.send(r);
                    });
                }
            },
        }
    }
}

fn listen(path: &Path) -> Result<UnixListener, VmError> {
    UnixListener::bind(path).map_err(|source| VmError::Listen {
        path: path.to_path_buf(),
        source,
    })
}

async fn create_log(path: &Path) -> Result<tokio::fs::File, VmError> {
    tokio::fs::File::create(path)
        .await
        .map_err(|source| VmError::Log {
            path: path.to_path_buf(),
            source,
        })
}

/// Why the wait for QEMU stopped.
enum Stop {
    Exited(std::io::Result<std::process::ExitStatus>),
    Watchdog,
    Cancelled,
    Panicked,
    Wedged(crate::result::Wedge),
}

/// The wedge watch shared by the two serial readers and its checker.
type SharedWatch = Arc<Mutex<wedge::Watch>>;

fn lock(w: &SharedWatch) -> std::sync::MutexGuard<'_, wedge::Watch> {
    // A reader that panicked left a usable state behind: counters only.
    w.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The readers' hooks feeding `watch` (console, results). A chunk that
/// decides a wedge (a timeout line, a lockup report) wakes `decided` at
/// once: the guest runs on until QEMU is told to quit, and the next test's
/// results should not race that.
fn feed(
    watch: &Option<SharedWatch>,
    decided: &Arc<tokio::sync::Notify>,
) -> (Option<OnChunk>, Option<OnChunk>) {
    let Some(w) = watch else {
        return (None, None);
    };
    let (c, r) = (w.clone(), w.clone());
    let (dc, dr) = (decided.clone(), decided.clone());
    (
        Some(Box::new(move |b: &[u8]| {
            let mut w = lock(&c);
            w.console(Instant::now(), b);
            if w.decided() {
                dc.notify_one();
            }
        })),
        Some(Box::new(move |b: &[u8]| {
            let mut w = lock(&r);
            w.results(Instant::now(), b);
            if w.decided() {
                dr.notify_one();
            }
        })),
    )
}

/// Resolves when `watch` finds the guest wedged (checked each second);
/// never without a watch. Meanwhile a suspect guest's QEMU is held at
/// `SCHED_IDLE` through `class` (released when the suspicion ends), so a
/// kernel spinning in a lockup costs the other cells nothing.
async fn wedged(
    watch: Option<SharedWatch>,
    decided: Arc<tokio::sync::Notify>,
    class: Option<crate::sched_class::ClassHandle>,
) -> crate::result::Wedge {
    let Some(w) = watch else {
        return std::future::pending().await;
    };
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    let mut held = false;
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            () = decided.notified() => {}
        }
        let now = Instant::now();
        let (found, suspect) = {
            let w = lock(&w);
            (w.check(now), w.suspect(now))
        };
        if let Some(found) = found {
            return found;
        }
        if suspect != held {
            if let Some(c) = &class {
                // Refused (an unprivileged user may not leave SCHED_IDLE):
                // the guest stays idle, which only slows it.
                let _ = c.hold_idle(suspect);
            }
            held = suspect;
        }
    }
}

/// Runs the VM to its end. Only setup failures are errors; everything the
/// guest does (panic, hang, garbage) is a [`VmEnd`].
pub async fn run(req: &VmRequest, cancel: &CancellationToken) -> Result<VmOutput, VmError> {
    let spec = &req.spec;
    let console_l = listen(&spec.console_socket)?;
    let results_l = listen(&spec.results_socket)?;
    let qmp_l = listen(&spec.qmp_socket)?;
    let shell_l = spec
        .extras
        .shell_socket
        .as_deref()
        .map(listen)
        .transpose()?;
    let console_log = create_log(&req.console_log).await?;
    let results_log = create_log(&req.results_log).await?;

    let mut cmd = tokio::process::Command::new(&req.qemu.path);
    cmd.args(argv(spec))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let start = Instant::now();
    let spawned = match &req.attach.class {
        Some(class) => class.spawn(&mut cmd),
        None => crate::procs::spawn_guarded(&mut cmd),
    };
    let mut child = spawned.map_err(|source| VmError::Spawn {
        qemu: req.qemu.path.clone(),
        source,
    })?;
    let pgid = child.pgid();
    let cpu = crate::hostload::CpuWatch::start(pgid);

    let wedge_watch: Option<SharedWatch> = req
        .wedge
        .clone()
        .map(|w| Arc::new(Mutex::new(wedge::Watch::new(w, Instant::now()))));
    let decided = Arc::new(tokio::sync::Notify::new());
    let (console_feed, results_feed) = feed(&wedge_watch, &decided);
    let (panic_tx, mut panic_rx) = watch::channel(false);
    let (ask_tx, ask_rx) = mpsc::channel(2);
    let qmp_panicked = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (shell_tx, shell_rx) = watch::channel(false);
    let tap = |make: LiveKind, shell: Option<watch::Sender<bool>>| {
        LineTap::new(req.attach.live.clone().map(|t| (t, make)), shell)
    };
    let console_task = tokio::spawn(serial_reader(
        console_l,
        console_log,
        req.limits.console_bytes,
        Some(panic_tx.clone()),
        tap(LiveLine::Console, None),
        console_feed,
        start,
    ));
    let results_task = tokio::spawn(serial_reader(
        results_l,
        results_log,
        req.limits.results_bytes,
        None,
        tap(LiveLine::Result, shell_l.is_some().then_some(shell_tx)),
        results_feed,
        start,
    ));
    let bridge_stop = CancellationToken::new();
    let bridge_task = shell_l.map(|l| {
        tokio::spawn(crate::console_bridge::bridge(
            l,
            shell_rx,
            bridge_stop.clone(),
        ))
    });
    let qmp_task = tokio::spawn(qmp_session(qmp_l, panic_tx, ask_rx, qmp_panicked.clone()));
    let mut stderr = child.stderr.take();
    let stderr_task = tokio::spawn(async move {
        let mut cap = Capture::new(16 * 1024);
        if let Some(s) = stderr.as_mut() {
            let mut buf = [0u8; 4096];
            while let Ok(n) = s.read(&mut buf).await {
                if n == 0 {
                    break;
                }
                cap.push(&buf[..n]);
            }
        }
        String::from_utf8_lossy(&cap.finish()).into_owned()
    });

    let stop = tokio::select! {
        st = child.wait() => Stop::Exited(st),
        _ = tokio::time::sleep(req.watchdog) => Stop::Watchdog,
        _ = cancel.cancelled() => Stop::Cancelled,
        // Only a real panic: the senders dropping (QEMU gone) is no panic.
        Ok(_) = panic_rx.wait_for(|p| *p) => Stop::Panicked,
        w = wedged(wedge_watch, decided, req.attach.class.clone()) => Stop::Wedged(w),
    };
    let dump = match (&stop, &req.attach.dump) {
        (Stop::Panicked | Stop::Watchdog | Stop::Wedged(_), Some((dir, format))) => Some(
            attach::dump_memory(&ask_tx, dir, *format, spec.topology.mem_mib(), &mut child).await,
        ),
        _ => None,
    };
    let status = match stop {
        Stop::Exited(ref st) => st.as_ref().ok().copied(),
        Stop::Panicked if dump.is_some() => {
            let _ = ask_tx.try_send(QmpAsk::Quit);
            match tokio::time::timeout(Duration::from_secs(2), child.wait()).await {
                Ok(st) => st.ok(),
                Err(_) => kill_and_reap(&mut child, pgid).await,
            }
        }
        Stop::Panicked => {
            // panic=-1 and -no-reboot: QEMU should exit on its own at once.
            match tokio::time::timeout(req.limits.panic_grace, child.wait()).await {
                Ok(st) => st.ok(),
                Err(_) => kill_and_reap(&mut child, pgid).await,
            }
        }
        Stop::Watchdog | Stop::Cancelled | Stop::Wedged(_) => {
            let _ = ask_tx.try_send(QmpAsk::Quit);
            match tokio::time::timeout(Duration::from_secs(2), child.wait()).await {
                Ok(st) => st.ok(),
                Err(_) => kill_and_reap(&mut child, pgid).await,
            }
        }
    };
    // Anything left in QEMU's group (nothing, normally) goes too, and the
    // group leaves the registry.
    drop(child);
    let elapsed = start.elapsed();
    let cpu = cpu.stop();
    bridge_stop.cancel();
    if let Some(t) = bridge_task {
        // The terminal's settings come back when the bridge ends.
        let _ = tokio::time::timeout(Duration::from_secs(2), t).await;
    }

    let drain = Duration::from_secs(3);
    let (console, console_at) = join_or_empty(console_task, drain).await;
    let (results, results_at) = join_or_empty(results_task, drain).await;
    qmp_task.abort();
    let qemu_stderr = tokio::time::timeout(drain, stderr_task)
        .await
        .ok()
        .and_then(Result::ok)
        .unwrap_or_default();

    let code = status.map(|s| {
        use std::os::unix::process::ExitStatusExt;
        s.code().unwrap_or_else(|| -s.signal().unwrap_or(0))
    });
    let qmp_panicked = qmp_panicked.load(std::sync::atomic::Ordering::SeqCst);
    let console_panicked = console.windows(PANIC_LINE.len()).any(|w| w == PANIC_LINE);
    let end = match stop {
        Stop::Cancelled => VmEnd::Interrupted,
        Stop::Watchdog => VmEnd::Watchdog(req.watchdog),
        Stop::Wedged(w) => VmEnd::Wedged(w),
        _ if qmp_panicked || console_panicked => VmEnd::KernelPanic,
        _ => match guest_exit(spec.arch, code, &console) {
            Some(GuestExit::Finished) => VmEnd::Finished,
            Some(GuestExit::BadPlan) => {
                VmEnd::InitError("guest-init could not read the run plan".into())
            }
            Some(GuestExit::InitError) => {
                VmEnd::InitError("guest-init failed (see the console log)".into())
            }
            None => VmEnd::QemuExited {
                status: code.unwrap_or(-1),
                stderr: tail(&qemu_stderr, 2000),
            },
        },
    };
    Ok(VmOutput {
        end,
        console,
        results,
        qemu_stderr,
        status: code,
        qmp_panicked,
        elapsed,
        cpu,
        console_at,
        results_at,
        dump,
    })
}

/// guest-init's status: QEMU's exit status on x86 (`isa-debug-exit`);
/// on arm64, where a PSCI poweroff makes QEMU exit 0, the last
/// `GUEST_EXIT_MARK` record of the console.
fn guest_exit(arch: crate::arch::Arch, code: Option<i32>, console: &[u8]) -> Option<GuestExit> {
    match arch {
        crate::arch::Arch::X86_64 => code.and_then(GuestExit::from_qemu_status),
        crate::arch::Arch::Arm64 => (code == Some(0))
            .then(|| GuestExit::from_console(console))
            .flatten(),
    }
}

async fn kill_and_reap(
    child: &mut tokio::process::Child,
    pgid: i32,
) -> Option<std::process::ExitStatus> {
    crate::procs::kill_group(pgid);
    let _ = child.start_kill();
    child.wait().await.ok()
}

async fn join_or_empty<T: Default>(task: tokio::task::JoinHandle<T>, limit: Duration) -> T {
    let abort = task.abort_handle();
    match tokio::time::timeout(limit, task).await {
        Ok(Ok(v)) => v,
        _ => {
            abort.abort();
            T::default()
        }
    }
}

/// The last `max` bytes of `s` (on a char boundary).
pub fn tail(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut i = s.len() - max;
    while !s.is_char_boundary(i) {
        i += 1;
    }
    s[i..].to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_guests_status_is_qemus_on_x86_and_the_consoles_on_arm64() {
        use crate::arch::Arch;
        let console = b"[ 2.9] harness: guest-exit 16\r\n[ 2.9] reboot: Power down\r\n";
        assert_eq!(
            guest_exit(Arch::X86_64, Some(33), b""),
            Some(GuestExit::Finished)
        );
        assert_eq!(guest_exit(Arch::X86_64, Some(0), console), None);
        assert_eq!(
            guest_exit(Arch::Arm64, Some(0), console),
            Some(GuestExit::Finished)
        );
        // Killed, or QEMU's own error: not the guest's word, mark or not.
        assert_eq!(guest_exit(Arch::Arm64, Some(1), console), None);
        assert_eq!(guest_exit(Arch::Arm64, None, console), None);
        assert_eq!(
            guest_exit(Arch::Arm64, Some(0), b"reboot: Power down"),
            None
        );
    }

    #[test]
    fn capture_keeps_head_and_tail_and_says_what_it_dropped() {
        let mut c = Capture::new(8192);
        c.push(&[b'a'; 8192]);
        c.push(&[b'b'; 10000]);
        c.push(b"END");
        let out = c.finish();
        assert!(out.starts_with(&[b'a'; 8192]));
        assert!(out.ends_with(b"bbbEND"));
        let s = String::from_utf8_lossy(&out);
        assert!(
            s.contains("[harness: 5907 bytes dropped here: output limit]"),
            "{}",
            &s[8192..8300]
        );
        assert_eq!(
            out.len(),
            8192 + 4096 + "\n[harness: 5907 bytes dropped here: output limit]\n".len()
        );
    }

    #[test]
    fn tail_respects_char_boundaries() {
        assert_eq!(tail("héllo", 4), "llo");
        assert_eq!(tail("abc", 10), "abc");
    }
}

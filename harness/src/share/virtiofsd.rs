//! The virtiofsd daemons: where the binary is, its command line for an
//! export, and one daemon per export and boot attempt, started by
//! [`crate::procs::spawn_guarded`] (nothing outlives the harness) and
//! killed when dropped. Knows nothing of plans or kernels.

use super::{CellShares, Export, ShareError};
use crate::procs::{spawn_guarded, GuardedChild};
use crate::qemu::FsDevice;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

/// Environment variable naming the virtiofsd binary.
pub const VIRTIOFSD_ENV: &str = "HARNESS_VIRTIOFSD";
/// How long a daemon gets to create its socket.
pub const DAEMON_START_TIMEOUT: Duration = Duration::from_secs(10);

/// The virtiofsd to use: `$HARNESS_VIRTIOFSD`, else `virtiofsd` on `PATH`,
/// in `~/.cargo/bin` (`cargo install virtiofsd`), or where distributions
/// put it.
pub fn find_virtiofsd() -> Result<PathBuf, String> {
    if let Some(p) = std::env::var_os(VIRTIOFSD_ENV) {
        let p = PathBuf::from(p);
        return if p.is_file() {
            Ok(p)
        } else {
            Err(format!("{VIRTIOFSD_ENV}={} is not a file", p.display()))
        };
    }
    let mut candidates: Vec<PathBuf> = std::env::var_os("PATH")
        .map(|p| {
            std::env::split_paths(&p)
                .map(|d| d.join("virtiofsd"))
                .collect()
        })
        .unwrap_or_default();
    if let Some(home) = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")))
    {
        candidates.push(home.join("bin/virtiofsd"));
    }
    candidates.push("/usr/libexec/virtiofsd".into());
    candidates.push("/usr/lib/qemu/virtiofsd".into());
    candidates.into_iter().find(|p| p.is_file()).ok_or_else(|| {
        "no virtiofsd (not packaged in Debian 12: `cargo install virtiofsd`, \
         which needs libcap-ng-dev and libseccomp-dev; or set HARNESS_VIRTIOFSD)"
            .to_string()
    })
}

/// virtiofsd's `--cache` for an export. Writable: `never`, so what the
/// guest wrote is on the host when the VM ends. Read-only: `always`
/// (`FOPEN_KEEP_CACHE`): the guest keeps a file's page cache across opens,
/// so repeated execs of a share binary skip revalidation and re-reads. The
/// host side of a read-only share is not expected to change during a run;
/// each run mounts it afresh. (Dropping the page cache also exposed a TCG
/// problem with code virtiofsd writes: see `qemu::tcg_share_cmdline`.)
pub fn cache_mode(read_only: bool) -> &'static str {
    if read_only {
        "always"
    } else {
        "never"
    }
}

/// The `virtiofsd` command line for an export (pure).
pub fn daemon_args(e: &Export, socket: &Path) -> Vec<std::ffi::OsString> {
    let mut a: Vec<std::ffi::OsString> = vec![
        "--socket-path".into(),
        socket.into(),
        "--shared-dir".into(),
        e.host.clone().into(),
        // The harness runs as root here; the guest is ours and throwaway.
        "--sandbox".into(),
        "none".into(),
        "--cache".into(),
        cache_mode(e.read_only).into(),
        "--log-level".into(),
        "warn".into(),
    ];
    if e.read_only {
        a.push("--readonly".into());
    }
    a
}

/// The running daemons of one boot attempt; killed on drop.
#[derive(Debug, Default)]
pub struct Daemons {
    children: Vec<GuardedChild>,
    devices: Vec<FsDevice>,
}

impl Daemons {
    /// Starts one daemon per export (sockets `vfs-<tag>-<attempt>.sock` in
    /// `tmp`, logs `virtiofsd-<tag>.log` in `log_dir`) and waits until each
    /// listens.
    pub async fn start(
        cs: &CellShares,
        tmp: &Path,
        attempt: u32,
        log_dir: &Path,
    ) -> Result<Daemons, ShareError> {
        let mut d = Daemons::default();
        let Some(bin) = &cs.virtiofsd else {
            return Ok(d);
        };
        for e in &cs.exports {
            let socket = tmp.join(format!("vfs-{}-{attempt}.sock", e.tag));
            let log_path = log_dir.join(format!("virtiofsd-{}.log", e.tag));
            let err = |why: String| ShareError::Daemon {
                tag: e.tag.clone(),
                dir: e.host.clone(),
                why,
            };
            let log = std::fs::File::create(&log_path)
                .map_err(|x| err(format!("log {}: {x}", log_path.display())))?;
            let log2 = log
                .try_clone()
                .map_err(|x| err(format!("log {}: {x}", log_path.display())))?;
            let mut cmd = tokio::process::Command::new(bin);
            cmd.args(daemon_args(e, &socket))
                .stdin(Stdio::null())
                .stdout(log)
                .stderr(log2);
            let mut child = spawn_guarded(&mut cmd)
                .map_err(|x| err(format!("cannot start {}: {x}", bin.display())))?;
            let started = Instant::now();
            let ready = loop {
                if socket.exists() {
                    break Ok(());
                }
                if let Ok(Some(st)) = child.try_wait() {
                    break Err(format!("exited at start ({st})"));
                }
                if started.elapsed() > DAEMON_START_TIMEOUT {
                    break Err(format!(
                        "no socket after {} s",
                        DAEMON_START_TIMEOUT.as_secs()
                    ));
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            };
            d.children.push(child);
            if let Err(why) = ready {
                let log = std::fs::read_to_string(&log_path).unwrap_or_default();
                return Err(err(format!(
                    "{why}; log {}: {}",
                    log_path.display(),
                    crate::vm::tail(log.trim(), 500)
                )));
            }
            d.devices.push(FsDevice {
                tag: e.tag.clone(),
                socket,
            });
        }
        Ok(d)
    }

    /// The QEMU devices.
    pub fn devices(&self) -> Vec<FsDevice> {
        self.devices.clone()
    }

    /// Kills the daemons and waits for them.
    pub async fn stop(mut self) {
        for mut c in std::mem::take(&mut self.children) {
            c.kill();
            let _ = tokio::time::timeout(Duration::from_secs(2), c.wait()).await;
            // Dropping `c` unregisters its group.
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn daemon_command_line() {
        let e = Export {
            tag: "share0".into(),
            host: "/srv/bins".into(),
            guest: "/mnt/bins".into(),
            read_only: true,
            required: true,
        };
        let line = |e: &Export| {
            daemon_args(e, Path::new("/t/vfs.sock"))
                .iter()
                .map(|s| s.to_string_lossy().into_owned())
                .collect::<Vec<_>>()
                .join(" ")
        };
        assert_eq!(
            line(&e),
            "--socket-path /t/vfs.sock --shared-dir /srv/bins --sandbox none --cache always --log-level warn --readonly"
        );
        let rw = Export {
            read_only: false,
            ..e
        };
        assert_eq!(
            line(&rw),
            "--socket-path /t/vfs.sock --shared-dir /srv/bins --sandbox none --cache never --log-level warn"
        );
    }
}

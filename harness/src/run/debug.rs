//! The debugging flags of `harness run` (docs/debugging.md): the clap
//! types, what they mean for the cell request, and what is said before
//! the boot (`--dry-run`'s plan, `--gdb`'s command).

use crate::debug::{DebugOptions, DumpFormat, ShellMode};
use crate::error::Error;
use crate::planner::{CellRequest, ReadyCell, Session};
use crate::qemu::GdbStub;
use crate::reporter::Reporters;
use std::time::Duration;

/// When `--shell` runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ShellWhen {
    /// After the plan's tests.
    After,
    /// Instead of them.
    Only,
}

/// The flags.
#[derive(Debug, Clone, clap::Args)]
pub struct DebugArgs {
    /// A word appended to QEMU's argv after the harness's own (repeatable;
    /// recorded in qemu-argv.txt).
    #[arg(long = "qemu-arg", value_name = "ARG", allow_hyphen_values = true)]
    pub qemu_args: Vec<String>,
    /// Print the resolved plan (kernel, initramfs files, kernel command
    /// line, QEMU argv) without booting.
    #[arg(long)]
    pub dry_run: bool,
    /// Stream the kernel console and the result lines to the terminal as
    /// they come.
    #[arg(short = 'v', long)]
    pub live: bool,
    /// Run a shell command line in the guest as one test (`/bin/sh -c CMD`,
    /// judged by its exit status; repeatable; brings Debian's busybox).
    #[arg(long = "exec", value_name = "CMD")]
    pub exec: Vec<String>,
    /// Timeout of each --exec, in seconds.
    #[arg(long, default_value_t = 120, value_name = "SECS")]
    pub exec_timeout: u64,
    /// An interactive busybox shell on this terminal in the guest, after
    /// the plan (`--shell`) or instead of it (`--shell=only`); its exit
    /// ends the VM.
    #[arg(long, value_enum, num_args = 0..=1, require_equals = true,
          default_missing_value = "after", value_name = "WHEN")]
    pub shell: Option<ShellWhen>,
    /// QEMU's gdbstub on a Unix socket path or a TCP port (default: the
    /// cell's gdb.sock); the guest starts halted and the kernel without
    /// KASLR; the gdb command is printed.
    #[arg(long, value_name = "SOCKET|PORT", num_args = 0..=1, default_missing_value = "")]
    pub gdb: Option<String>,
    /// With --gdb: start the guest at once instead of waiting for gdb.
    #[arg(long, requires = "gdb")]
    pub gdb_no_wait: bool,
    /// On a kernel panic (or at the watchdog) write the guest's memory into
    /// the cell's output directory: an ELF core (vmcore.elf), or
    /// kdump-compressed (vmcore.kdump; ELF where QEMU cannot).
    #[arg(long, value_enum, num_args = 0..=1, require_equals = true,
          default_missing_value = "elf", value_name = "FORMAT")]
    pub dump_on_panic: Option<DumpWhat>,
    /// Keep the cell's initramfs (`initramfs.cpio` in its output
    /// directory) and write `qemu-by-hand.txt`: the QEMU command that boots
    /// it without the harness, as `--dry-run`'s `by hand:` line prints it.
    #[arg(long)]
    pub keep_initramfs: bool,
}

/// `--dump-on-panic`'s formats, as QEMU names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum DumpWhat {
    /// ELF core.
    Elf,
    /// kdump-compressed, zlib.
    KdumpZlib,
    /// kdump-compressed, LZO.
    KdumpLzo,
    /// kdump-compressed, snappy.
    KdumpSnappy,
}

impl DebugArgs {
    /// The options as a plan (`--dry-run`): what [`DebugArgs::apply`]
    /// sets, without fetching busybox (its path is the cache's).
    pub fn planned(&self, out_dir: &std::path::Path) -> DebugOptions {
        let mut opts = self.options(out_dir);
        if !self.exec.is_empty() || opts.shell.is_some() {
            opts.busybox = Some(std::path::PathBuf::from("<cache>/busybox/busybox"));
        }
        opts
    }

    fn options(&self, out_dir: &std::path::Path) -> DebugOptions {
        DebugOptions {
            qemu_args: self.qemu_args.clone(),
            shell: self.shell.map(|s| match s {
                ShellWhen::After => ShellMode::After,
                ShellWhen::Only => ShellMode::Only,
            }),
            gdb: self.gdb.as_deref().map(|g| GdbStub {
                listen: crate::debug::gdb_listen(g, out_dir),
                wait: !self.gdb_no_wait,
            }),
            dump: self.dump_on_panic.map(|f| match f {
                DumpWhat::Elf => DumpFormat::Elf,
                DumpWhat::KdumpZlib => DumpFormat::KdumpZlib,
                DumpWhat::KdumpLzo => DumpFormat::KdumpLzo,
                DumpWhat::KdumpSnappy => DumpFormat::KdumpSnappy,
            }),
            live: self.live,
            busybox: None,
            keep_initramfs: self.keep_initramfs,
        }
    }

    /// Adds the options to `req`: `--exec` tests (after the suite's),
    /// busybox when a shell is needed, the gdbstub in the cell's directory.
    pub async fn apply(
        &self,
        req: &mut CellRequest,
        session: &mut Session,
        reporters: &mut Reporters,
    ) -> Result<(), Error> {
        let mut opts = self.options(&req.out_dir);
        if !self.exec.is_empty() || opts.shell.is_some() {
            let busybox = session.busybox(reporters).await?;
            let timeout = Duration::from_secs(self.exec_timeout);
            for (i, cmd) in self.exec.iter().enumerate() {
                req.tests
                    .push(crate::debug::exec_test(i + 1, cmd, &busybox, timeout));
            }
            opts.busybox = Some(busybox);
        }
        if opts.shell == Some(ShellMode::Only) {
            req.topology_check = false;
        }
        req.debug = opts;
        Ok(())
    }

    /// What is said before the boot: with `--gdb` the command.
    pub fn before_boot(&self, cell: &ReadyCell, reporters: &mut Reporters) -> Result<(), Error> {
        if let Some(stub) = &cell.spec.debug.gdb {
            if let crate::qemu::GdbListen::Unix(p) = &stub.listen {
                // sun_path holds 108 bytes with the NUL.
                if p.as_os_str().len() > 107 {
                    return Err(Error::usage(format!(
                        "--gdb: {} is longer than a Unix socket path may be (107 bytes): give a shorter path or a port",
                        p.display()
                    )));
                }
                // A socket left by an earlier run would make QEMU refuse.
                let _ = std::fs::remove_file(p);
                if let Some(d) = p.parent() {
                    std::fs::create_dir_all(d)
                        .map_err(|e| Error::infra(format!("creating {}: {e}", d.display())))?;
                }
            }
            let vmlinux = crate::debug::vmlinux_beside(&cell.spec.kernel_image);
            let cmd = crate::debug::gdb_command(vmlinux.as_deref(), stub);
            reporters.step(&format!("gdb: {cmd}"))?;
            if vmlinux.is_none() {
                reporters.step(
                    "gdb: no vmlinux beside the kernel image: symbols only for source: kernels",
                )?;
            }
            if stub.wait {
                reporters.step("gdb: the guest waits for gdb to `continue` (or `detach`)")?;
            }
        }
        Ok(())
    }
}

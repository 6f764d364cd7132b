//! The debugging options of a cell — `--qemu-arg`, `--exec`, `--shell`,
//! `--gdb`, `--dump-on-panic` — and what they mean for its tests, its run
//! plan and its QEMU argv. Pure: the shell bridge is in
//! [`crate::console_bridge`], the dump in [`crate::vm`], busybox's download
//! in [`crate::busybox`].

use crate::qemu::{GdbListen, GdbStub};
use crate::suite::{Binary, SuiteTest};
use guest_tests::plan::{PlannedShell, RunPlan, BIN_DIR, BUSYBOX_PATH, SHELL_PATH, SHELL_PORT};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// When the interactive shell runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShellMode {
    /// After the plan's tests (`--shell`).
    After,
    /// Instead of them (`--shell=only`).
    Only,
}

/// What a debugging session adds to a cell; nothing by default.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DebugOptions {
    /// Appended to QEMU's argv (`--qemu-arg`, `qemu_args:`).
    pub qemu_args: Vec<String>,
    /// Debian's static busybox on the host, packed as `/bin/busybox` when
    /// set (`--exec`, `--shell` need it).
    pub busybox: Option<PathBuf>,
    /// The interactive shell on ttyS2.
    pub shell: Option<ShellMode>,
    /// QEMU's gdbstub.
    pub gdb: Option<GdbStub>,
    /// A guest memory image on a panic, or at the watchdog, in this format.
    pub dump: Option<DumpFormat>,
    /// Console and result lines to the terminal as they come (`--live`).
    pub live: bool,
    /// Keep the initramfs as `<out_dir>/initramfs.cpio`, with the command
    /// that boots it without the harness in `qemu-by-hand.txt`
    /// (`--keep-initramfs`).
    pub keep_initramfs: bool,
}

impl DebugOptions {
    /// Whether a person is in the loop (shell, gdb): the watchdog is off
    /// unless `--timeout` sets one.
    pub fn interactive(&self) -> bool {
        self.shell.is_some() || self.gdb.is_some()
    }
}

/// The format of a guest memory image (QMP `dump-guest-memory`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DumpFormat {
    /// An ELF core: every tool reads it (`readelf`, `gdb`, `crash`, `drgn`).
    Elf,
    /// kdump-compressed (diskdump), zlib.
    KdumpZlib,
    /// kdump-compressed, LZO (when QEMU was built with it).
    KdumpLzo,
    /// kdump-compressed, snappy (when QEMU was built with it).
    KdumpSnappy,
}

impl DumpFormat {
    /// QEMU's name of the format.
    pub fn name(self) -> &'static str {
        match self {
            DumpFormat::Elf => "elf",
            DumpFormat::KdumpZlib => "kdump-zlib",
            DumpFormat::KdumpLzo => "kdump-lzo",
            DumpFormat::KdumpSnappy => "kdump-snappy",
        }
    }

    /// The image's file name in the cell's output directory.
    pub fn file_name(self) -> &'static str {
        match self {
            DumpFormat::Elf => "vmcore.elf",
            _ => "vmcore.kdump",
        }
    }
}

/// A memory image QEMU wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dumped {
    /// The file.
    pub path: PathBuf,
    /// Its format.
    pub format: DumpFormat,
    /// The format asked for (ELF is written when QEMU cannot write it).
    pub asked: DumpFormat,
}

/// How every note about the memory image starts (the runner adds such
/// notes to the failure text of the cell's failed cases).
pub const DUMP_NOTE: &str = "guest memory image";

/// The note about a memory image: where it is and how to open it, or why
/// there is none.
pub fn dump_note(dump: &Result<Dumped, String>, mem_mib: u64) -> String {
    match dump {
        Ok(d) => format!(
            "{DUMP_NOTE}: {} ({}, guest RAM {mem_mib} MiB{}); open it with `crash <vmlinux> {0}` or `drgn -c {0} -s <vmlinux>` (docs/debugging.md)",
            d.path.display(),
            d.format.name(),
            if d.asked == d.format {
                String::new()
            } else {
                format!("; this QEMU cannot write {}", d.asked.name())
            }
        ),
        Err(why) => format!("{DUMP_NOTE}: {why}"),
    }
}

/// File name an `--exec` test's shell has in the guest's binary directory
/// before [`place_busybox`] moves it to `/bin`.
const EXEC_FILE: &str = "sh";

/// The name of the `n`th (1-based) `--exec` test.
pub fn exec_name(n: usize) -> String {
    format!("exec-{n}")
}

/// Output of an `--exec` test kept in its note, in bytes.
pub const EXEC_NOTE_BYTES: usize = 2000;

/// One note per `--exec` test with what it printed (its diagnostics in the
/// results document), bounded by [`EXEC_NOTE_BYTES`]: a passing command's
/// output is in the report too.
pub fn exec_notes(doc: &crate::ktap::Document) -> Vec<String> {
    doc.tests
        .iter()
        .filter(|t| t.name.starts_with("exec-"))
        .map(|t| {
            let mut out = t.diagnostics.join("\n");
            if out.len() > EXEC_NOTE_BYTES {
                let mut cut = EXEC_NOTE_BYTES;
                while !out.is_char_boundary(cut) {
                    cut -= 1;
                }
                out.truncate(cut);
                out.push_str(" [output cut]");
            }
            format!("{} output:\n{out}", t.name)
        })
        .collect()
}

/// `--exec CMD` as a test: `/bin/sh -c CMD`, judged by its exit status,
/// its output captured like any test's.
pub fn exec_test(n: usize, command: &str, busybox: &Path, timeout: Duration) -> SuiteTest {
    SuiteTest {
        name: exec_name(n),
        binary: Binary::External {
            file: EXEC_FILE.into(),
            path: busybox.to_path_buf(),
        },
        args: vec!["-c".into(), command.into()],
        timeout,
    }
}

/// Moves busybox to `/bin/busybox` (the caller packs it there; guest-init
/// links its applets, `sh` first): `--exec` tests run `/bin/sh`, and the
/// shell is planned. Without busybox, nothing changes.
pub fn place_busybox(opts: &DebugOptions, plan: &mut RunPlan, files: &mut Vec<(String, PathBuf)>) {
    if opts.busybox.is_none() {
        return;
    }
    let packed = format!("{BIN_DIR}/{EXEC_FILE}");
    files.retain(|(f, _)| f != EXEC_FILE);
    for t in plan.tests.iter_mut().filter(|t| t.path == packed) {
        t.path = SHELL_PATH.into();
        t.env.push(("PATH".into(), guest_path()));
    }
    if opts.shell == Some(ShellMode::Only) {
        plan.tests.clear();
    }
    plan.busybox = Some(BUSYBOX_PATH.into());
    plan.shell = opts.shell.map(|_| PlannedShell {
        port: SHELL_PORT.into(),
        path: SHELL_PATH.into(),
        env: vec![("PATH".into(), guest_path())],
    });
}

/// `PATH` in the guest's shell: the test binaries, then busybox's applets.
pub fn guest_path() -> String {
    format!("{BIN_DIR}:/bin")
}

/// Kernel command line words the options add (before the user's):
/// `panic=0` keeps a panicked guest alive for its memory image (the last
/// `panic=` wins over ours).
pub fn cmdline_words(opts: &DebugOptions) -> Vec<String> {
    if opts.dump.is_some() {
        vec!["panic=0".into()]
    } else {
        Vec::new()
    }
}

/// Where `--gdb` listens: a port number, a socket path, or (empty) the
/// cell's `gdb.sock`.
pub fn gdb_listen(arg: &str, out_dir: &Path) -> GdbListen {
    match arg.parse::<u16>() {
        Ok(port) if port > 0 => GdbListen::Tcp(port),
        _ if arg.is_empty() => GdbListen::Unix(out_dir.join("gdb.sock")),
        _ => GdbListen::Unix(PathBuf::from(arg)),
    }
}

/// The gdb command that attaches to `stub`: `vmlinux` (when known: the
/// symbols) and the kernel's `scripts/gdb` helpers (when present beside
/// it as `vmlinux-gdb.py`).
pub fn gdb_command(vmlinux: Option<&Path>, stub: &GdbStub) -> String {
    let mut words = vec!["gdb".to_string()];
    if let Some(v) = vmlinux {
        let py = v.with_file_name("vmlinux-gdb.py");
        if py.is_file() {
            words.push(format!(
                "-iex {}",
                shell_quote(&format!("add-auto-load-safe-path {}", py.display()))
            ));
        }
        words.push(shell_quote(&v.display().to_string()));
    }
    words.push(format!(
        "-ex {}",
        shell_quote(&format!("target remote {}", stub.listen.gdb_target()))
    ));
    words.join(" ")
}

/// `s` as one POSIX shell word.
pub fn shell_quote(s: &str) -> String {
    if !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "/._-:=,+@".contains(c))
    {
        return s.to_string();
    }
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// Why `harness matrix --gdb` refuses a selection of other than one cell.
pub fn gdb_one_cell<'a>(cells: impl Iterator<Item = &'a str>) -> String {
    let names: Vec<&str> = cells.collect();
    let shown = names.iter().take(4).copied().collect::<Vec<_>>().join(", ");
    let more = match names.len() {
        0 => String::new(),
        n if n > 4 => format!(" ({shown}, and {} more)", n - 4),
        _ => format!(" ({shown})"),
    };
    format!(
        "--gdb debugs one VM, but the selection has {} cells{more}; narrow it with --kernel, --topology and --suite",
        names.len()
    )
}

/// The `vmlinux` beside a kernel image (kept there for `source:` builds).
pub fn vmlinux_beside(image: &Path) -> Option<PathBuf> {
    let v = image.with_file_name("vmlinux");
    v.is_file().then_some(v)
}

#[cfg(test)]
mod tests {
    use super::*;
    use guest_tests::plan::{PlannedTest, PLAN_VERSION};

    fn planned(name: &str, path: &str) -> PlannedTest {
        PlannedTest {
            name: name.into(),
            path: path.into(),
            args: vec!["-c".into(), "true".into()],
            env: vec![],
            timeout_ms: 1000,
            max_output_bytes: 1000,
            one_pipe: false,
        }
    }

    #[test]
    fn exec_tests_run_bin_sh_and_busybox_moves_to_bin() {
        let t = exec_test(
            2,
            "grep -c processor /proc/cpuinfo",
            "/c/busybox".as_ref(),
            Duration::from_secs(9),
        );
        assert_eq!(t.name, "exec-2");
        assert_eq!(t.args, ["-c", "grep -c processor /proc/cpuinfo"]);
        let mut plan = RunPlan {
            version: PLAN_VERSION,
            tests: vec![
                planned("topology", "/harness/bin/topology"),
                planned("exec-1", "/harness/bin/sh"),
            ],
            ..RunPlan::default()
        };
        let mut files = vec![
            ("topology".into(), PathBuf::from("/t")),
            ("sh".into(), "/c/busybox".into()),
        ];
        let opts = DebugOptions {
            busybox: Some("/c/busybox".into()),
            shell: Some(ShellMode::After),
            ..DebugOptions::default()
        };
        place_busybox(&opts, &mut plan, &mut files);
        assert_eq!(files.len(), 1);
        assert_eq!(plan.tests[1].path, "/bin/sh");
        assert_eq!(plan.tests[0].path, "/harness/bin/topology");
        let shell = plan.shell.as_ref().unwrap();
        assert_eq!(
            (shell.port.as_str(), shell.path.as_str()),
            ("/dev/ttyS2", "/bin/sh")
        );
        assert_eq!(plan.busybox.as_deref(), Some("/bin/busybox"));

        // --shell=only: the shell instead of the plan; no busybox: nothing.
        let only = DebugOptions {
            shell: Some(ShellMode::Only),
            ..opts
        };
        place_busybox(&only, &mut plan, &mut files);
        assert!(plan.tests.is_empty());
        let mut p2 = RunPlan::default();
        place_busybox(&DebugOptions::default(), &mut p2, &mut files);
        assert!(p2.shell.is_none() && p2.busybox.is_none());
    }

    #[test]
    fn exec_output_becomes_a_note() {
        let doc = crate::ktap::parse(
            b"KTAP version 1\n1..2\n  # Subtest: exec-1\n  # 2\nok 1 exec-1\n  # Subtest: smoke\n  # x\nok 2 smoke\n",
        );
        assert_eq!(exec_notes(&doc), ["exec-1 output:\n2"]);
    }

    #[test]
    fn gdb_listens_where_asked_and_prints_the_command() {
        let out = Path::new("/o/cell");
        assert_eq!(gdb_listen("1234", out), GdbListen::Tcp(1234));
        assert_eq!(
            gdb_listen("", out),
            GdbListen::Unix("/o/cell/gdb.sock".into())
        );
        assert_eq!(
            gdb_listen("/tmp/g.sock", out),
            GdbListen::Unix("/tmp/g.sock".into())
        );
        let stub = GdbStub {
            listen: GdbListen::Tcp(1234),
            wait: true,
        };
        assert_eq!(
            gdb_command(Some("/k/vmlinux".as_ref()), &stub),
            "gdb /k/vmlinux -ex 'target remote localhost:1234'"
        );
        assert_eq!(shell_quote("it's"), r"'it'\''s'");
        assert_eq!(
            cmdline_words(&DebugOptions {
                dump: Some(DumpFormat::Elf),
                ..Default::default()
            }),
            ["panic=0"]
        );
        let dumped = Dumped {
            path: "/o/vmcore.elf".into(),
            format: DumpFormat::Elf,
            asked: DumpFormat::KdumpLzo,
        };
        assert!(dump_note(&Ok(dumped), 256).starts_with(
            "guest memory image: /o/vmcore.elf (elf, guest RAM 256 MiB; this QEMU cannot write kdump-lzo); open it with `crash <vmlinux> /o/vmcore.elf`"
        ));
    }
}

//! What a cell boots, built one way for the VM ([`crate::cell`]) and for
//! `harness run --dry-run`: the guest's run plan, the initramfs layout
//! (busybox placed when asked for, share modules), the [`VmSpec`] of one
//! boot attempt; and [`describe`], the plan as text (pure).

use super::{CellError, CellSpec};
use crate::guestbin::GuestBins;
use crate::initramfs::{Layout, Node};
use crate::qemu::{Accel, Extras, FsDevice, VmSpec};
use crate::share::{CellShares, ShareSetup};
use crate::suite::SuiteError;
use guest_tests::plan::{RunPlan, BUSYBOX_PATH};
use std::ffi::OsString;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// A cell's guest side: the plan and the initramfs that carries it.
#[derive(Debug, Clone)]
pub struct Guest {
    /// The run plan guest-init decodes.
    pub plan: RunPlan,
    /// Every initramfs entry.
    pub layout: Layout,
    /// The cell's shares (modules, mounts, notes).
    pub shares: CellShares,
}

/// The run plan and initramfs of `spec`. Empties `<out_dir>/artifacts`
/// when the artifacts share is on (see [`CellShares::prepare`]).
pub fn guest(spec: &CellSpec, shares: &ShareSetup, bins: &GuestBins) -> Result<Guest, CellError> {
    let (mut plan, mut files) = crate::suite::plan(&spec.tests, bins, spec.timeout_scale)?;
    for t in &mut plan.tests {
        t.env.extend(spec.guest_env.iter().cloned());
    }
    let names: Vec<String> = spec.tests.iter().map(|t| t.name.clone()).collect();
    plan.repeat = spec
        .repeat
        .and_then(|r| r.planned(crate::repeat::once(&names)));
    crate::debug::place_busybox(&spec.debug, &mut plan, &mut files);
    if spec.debug.shell.is_some() {
        // In the shell every test binary is at hand (`futex-prctl --help`).
        for b in guest_tests::binaries::tests() {
            if !files.iter().any(|(f, _)| f == b) {
                files.push((b.to_string(), bins.path(b).map_err(SuiteError::from)?));
            }
        }
    }
    let cell_shares = CellShares::prepare(shares, &spec.out_dir, &mut plan, &mut files)?;
    let mut layout = Layout::guest(
        &bins.path("guest-init").map_err(SuiteError::from)?,
        plan.encode(),
        &files,
    );
    if let Some(busybox) = &spec.debug.busybox {
        layout.push("bin", Node::Dir);
        layout.push(BUSYBOX_PATH, Node::HostFile(busybox.clone(), 0o755));
    }
    if !cell_shares.initramfs_files.is_empty() {
        layout.push(guest_tests::plan::MODULE_DIR, Node::Dir);
    }
    for (guest, host) in &cell_shares.initramfs_files {
        layout.push(guest, Node::HostFile(host.clone(), 0o644));
    }
    Ok(Guest {
        plan,
        layout,
        shares: cell_shares,
    })
}

/// The QEMU spec of boot attempt `attempt`: its sockets in `dir` (the
/// cell's private temp dir), the debugging extras of `spec`.
pub fn vm_spec(
    spec: &CellSpec,
    accel: Accel,
    initrd: &Path,
    dir: &Path,
    attempt: u32,
    shares: Vec<FsDevice>,
) -> VmSpec {
    // Its PVH ELF where it has one: no decompression in the guest (x86).
    let kernel = match spec.arch {
        crate::arch::Arch::X86_64 => crate::kernel::pvh::boot_image(&spec.kernel_image),
        _ => spec.kernel_image.clone(),
    };
    vm_spec_booting(spec, kernel, accel, initrd, dir, attempt, shares)
}

/// [`vm_spec`] booting `kernel` as it is (`--dry-run` unpacks no PVH ELF).
fn vm_spec_booting(
    spec: &CellSpec,
    kernel: PathBuf,
    accel: Accel,
    initrd: &Path,
    dir: &Path,
    attempt: u32,
    shares: Vec<FsDevice>,
) -> VmSpec {
    let sock = |what: &str| dir.join(format!("{what}-{attempt}.sock"));
    // Under TCG, the delay-loop constant an earlier boot of this image
    // printed: the secondary CPUs then skip calibrating (kernel::lpj).
    let mut cmdline: Vec<String> = (accel == Accel::Tcg)
        .then(|| crate::kernel::lpj::known(&spec.kernel_image))
        .flatten()
        .map(|n| format!("lpj={n}"))
        .into_iter()
        .collect();
    // Under TCG, the host's TSC rate: a guest descheduled while it
    // calibrates its own can get it wrong by far (kernel::tsc).
    if accel == Accel::Tcg && spec.arch == crate::arch::Arch::X86_64 {
        cmdline.extend(crate::kernel::tsc::cmdline_word());
    }
    cmdline.extend(crate::debug::cmdline_words(&spec.debug));
    cmdline.extend(spec.cmdline_extra.iter().cloned());
    VmSpec {
        arch: spec.arch,
        accel,
        tcg_thread: spec.tcg_thread,
        topology: spec.topology.clone(),
        kernel,
        initrd: initrd.to_path_buf(),
        cmdline_extra: cmdline,
        console_socket: sock("console"),
        results_socket: sock("results"),
        qmp_socket: sock("qmp"),
        shares,
        extras: Extras {
            shell_socket: spec.debug.shell.map(|_| sock("shell")),
            gdb: spec.debug.gdb.clone(),
            qemu_args: spec.debug.qemu_args.iter().map(OsString::from).collect(),
        },
    }
}

/// QEMU's whole command line as one line (`qemu-argv.txt`, `--dry-run`):
/// each word shell-quoted, so that a shell gives QEMU exactly these words.
pub fn argv_line(qemu: &Path, vm: &VmSpec) -> String {
    quoted_line(qemu, crate::qemu::argv(vm))
}

/// `qemu` and `args`, each word shell-quoted, as one line.
fn quoted_line(qemu: &Path, args: Vec<OsString>) -> String {
    std::iter::once(qemu.as_os_str().to_os_string())
        .chain(args)
        .map(|a| crate::debug::shell_quote(&a.to_string_lossy()))
        .collect::<Vec<_>>()
        .join(" ")
}

/// The resolved plan of a cell as text: kernel, topology, tests, the
/// initramfs's files, the kernel command line and QEMU's argv.
pub fn describe(spec: &CellSpec, guest: &Guest, qemu: &Path, vm: &VmSpec) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "cell: {}", spec.name);
    let _ = writeln!(
        s,
        "kernel: {} ({})",
        spec.kernel_label,
        spec.kernel_image.display()
    );
    let _ = writeln!(s, "topology: {} ({})", spec.topology_label, spec.topology);
    let _ = writeln!(s, "accel: {}", vm.accel.name());
    if !spec.guest_env.is_empty() {
        let words: Vec<String> = spec
            .guest_env
            .iter()
            .map(|(k, v)| crate::debug::shell_quote(&format!("{k}={v}")))
            .collect();
        let _ = writeln!(s, "guest env: {}", words.join(" "));
    }
    let _ = writeln!(s, "tests:");
    for t in &guest.plan.tests {
        let words: Vec<_> = std::iter::once(t.path.as_str())
            .chain(t.args.iter().map(String::as_str))
            .map(crate::debug::shell_quote)
            .collect();
        let _ = writeln!(
            s,
            "  {}: {} (timeout {} s)",
            t.name,
            words.join(" "),
            t.timeout_ms / 1000
        );
    }
    if let Some(sh) = &guest.plan.shell {
        let _ = writeln!(s, "  shell: {} on {} (interactive)", sh.path, sh.port);
    }
    for m in &guest.plan.shares {
        let _ = writeln!(
            s,
            "share: {} on {}{}",
            m.tag,
            m.path,
            if m.read_only { " (read-only)" } else { "" }
        );
    }
    let _ = writeln!(s, "initramfs:");
    for e in &guest.layout.entries {
        let what = match &e.node {
            Node::Dir => "dir".to_string(),
            Node::Bytes(b, _) => format!("{} bytes", b.len()),
            Node::HostFile(p, _) => format!("from {}", p.display()),
            Node::CharDev(maj, min) => format!("char {maj}:{min}"),
        };
        let _ = writeln!(s, "  /{} ({what})", e.path);
    }
    let words = crate::qemu::cmdline_words(vm);
    let _ = writeln!(
        s,
        "kernel command line: {}",
        crate::qemu::kernel_cmdline_for(vm.arch, &words)
    );
    let _ = writeln!(s, "qemu: {}", argv_line(qemu, vm));
    s
}

/// `--dry-run` with nothing done: the plan of `spec` without shares and
/// with the guest binaries where they would be ([`GuestBins::planned`]);
/// the kernel image as named (a run boots its PVH ELF where it has one).
/// Ends with the `by hand:` line ([`by_hand`]).
pub fn planned(spec: &CellSpec, qemu: &Path, bins: &GuestBins) -> Result<String, CellError> {
    let guest = guest(spec, &ShareSetup::none(), bins)?;
    let dir = dry_run_socket_dir();
    let initrd = dir.join("initramfs.cpio");
    let vm = vm_spec_booting(
        spec,
        spec.kernel_image.clone(),
        spec.accel,
        &initrd,
        &dir,
        1,
        vec![],
    );
    let mut text = describe(spec, &guest, qemu, &vm);
    match by_hand(spec, qemu, &vm, false) {
        Ok(line) => {
            let _ = writeln!(
                text,
                "initramfs by hand: {} (a run with --keep-initramfs writes it)",
                kept_initramfs(spec).display()
            );
            let _ = writeln!(text, "by hand: {line}");
            if is_placeholder(&spec.kernel_image) {
                let _ = writeln!(
                    text,
                    "note: the kernel is not in the cache yet: its path is known once it is \
                     fetched or built (a --dry-run after the run prints it)"
                );
            }
        }
        Err(why) => {
            let _ = writeln!(text, "by hand: not available: {why}");
        }
    }
    Ok(text)
}

/// Whether `path` names a file `--dry-run` could not know (`<newest 7.3>`).
fn is_placeholder(path: &Path) -> bool {
    path.components()
        .any(|c| c.as_os_str().to_string_lossy().starts_with('<'))
}

/// Where `--keep-initramfs` keeps a cell's initramfs.
pub fn kept_initramfs(spec: &CellSpec) -> PathBuf {
    spec.out_dir.join("initramfs.cpio")
}

/// Where a boot by hand writes its results.
pub fn by_hand_results(spec: &CellSpec) -> PathBuf {
    spec.out_dir.join("results-by-hand.ktap")
}

/// The shell-quoted QEMU command that boots `vm`'s cell with no harness
/// ([`crate::qemu::argv_by_hand`]): the kept initramfs, the console on
/// stdout, the results in [`by_hand_results`], QEMU's exit status 33 when
/// the plan ran. Not available where the guest needs the harness: a shell
/// on its socket, or shares (`with_shares`) served by virtiofsd.
pub fn by_hand(
    spec: &CellSpec,
    qemu: &Path,
    vm: &VmSpec,
    with_shares: bool,
) -> Result<String, &'static str> {
    if spec.debug.shell.is_some() {
        return Err("--shell needs the harness on the shell's socket");
    }
    if with_shares {
        return Err("the cell's shares need virtiofsd, started by the harness");
    }
    let vm = VmSpec {
        initrd: kept_initramfs(spec),
        ..vm.clone()
    };
    Ok(quoted_line(
        qemu,
        crate::qemu::argv_by_hand(&vm, &by_hand_results(spec)),
    ))
}

/// Where `--dry-run` says the sockets are (they exist only while a VM runs).
pub fn dry_run_socket_dir() -> PathBuf {
    PathBuf::from("<cell-temp-dir>")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::debug::DebugOptions;
    use crate::topology::Topology;
    use guest_tests::plan::PlannedTest;

    fn spec() -> CellSpec {
        CellSpec {
            arch: crate::arch::Arch::X86_64,
            name: "debian-7.3.4/nodes=2/smoke".into(),
            kernel_label: "debian:7.3.4".into(),
            kernel_image: "/cache/vmlinuz".into(),
            topology: Topology::parse_spec("nodes=2,cpus=1,mem=256M").unwrap(),
            topology_label: "nodes=2,cpus=1,mem=256M".into(),
            suite_label: "smoke".into(),
            tests: vec![],
            accel: Accel::Tcg,
            tcg_thread: Default::default(),
            cmdline_extra: vec!["quiet".into()],
            watchdog: None,
            timeout_scale: 1.0,
            boot_retries: 0,
            out_dir: "/o".into(),
            debug: DebugOptions {
                qemu_args: vec!["-d".into(), "guest_errors".into()],
                dump: Some(crate::debug::DumpFormat::Elf),
                ..DebugOptions::default()
            },
            repeat: None,
            guest_env: vec![("FUTEX_RACE_SERIALIZE".into(), "1".into())],
        }
    }

    /// `spec`'s first TCG boot, its sockets where `--dry-run` names them.
    fn tcg_vm(spec: &CellSpec) -> VmSpec {
        vm_spec(
            spec,
            Accel::Tcg,
            "/t/initramfs.cpio".as_ref(),
            &dry_run_socket_dir(),
            1,
            vec![],
        )
    }

    #[test]
    fn by_hand_boots_the_kept_initramfs_unless_the_guest_needs_the_harness() {
        let mut spec = spec();
        let vm = tcg_vm(&spec);
        let line = by_hand(&spec, "/usr/bin/qemu".as_ref(), &vm, false).unwrap();
        let words = shlex::split(&line).unwrap();
        let at = |w: &str| words.iter().position(|x| x == w).unwrap();
        assert_eq!(words[at("-initrd") + 1], "/o/initramfs.cpio");
        assert_eq!(
            words[at("-chardev") + 1],
            "file,id=results,path=/o/results-by-hand.ktap"
        );
        assert!(
            !line.contains("<cell-temp-dir>") && !line.contains("qmp"),
            "{line}"
        );
        assert_eq!(
            by_hand(&spec, "/usr/bin/qemu".as_ref(), &vm, true),
            Err("the cell's shares need virtiofsd, started by the harness")
        );
        spec.debug.shell = Some(crate::debug::ShellMode::After);
        assert!(by_hand(&spec, "/usr/bin/qemu".as_ref(), &vm, false).is_err());
        assert!(is_placeholder("/c/<newest 7.3>/vmlinuz".as_ref()));
        assert!(!is_placeholder("/c/7.3.4/vmlinuz".as_ref()));
    }

    #[test]
    fn the_plan_says_what_boots_without_a_vm() {
        let spec = spec();
        let mut layout = Layout::default();
        layout.push("init", Node::HostFile("/g/guest-init".into(), 0o755));
        layout.push("harness/plan.json", Node::Bytes(vec![b'{'; 10], 0o644));
        let guest = Guest {
            plan: RunPlan {
                tests: vec![PlannedTest {
                    name: "exec-1".into(),
                    path: "/bin/sh".into(),
                    args: vec!["-c".into(), "grep -c processor /proc/cpuinfo".into()],
                    env: vec![],
                    timeout_ms: 120_000,
                    max_output_bytes: 1,
                    one_pipe: false,
                }],
                ..RunPlan::default()
            },
            layout,
            shares: CellShares::default(),
        };
        let vm = tcg_vm(&spec);
        let text = describe(&spec, &guest, "/usr/bin/qemu-system-x86_64".as_ref(), &vm);
        // The printed line is what a shell splits back into QEMU's words.
        let line = text.lines().find_map(|l| l.strip_prefix("qemu: ")).unwrap();
        let words: Vec<String> = std::iter::once("/usr/bin/qemu-system-x86_64".to_string())
            .chain(
                crate::qemu::argv(&vm)
                    .iter()
                    .map(|a| a.to_string_lossy().into_owned()),
            )
            .collect();
        assert_eq!(shlex::split(line).unwrap(), words, "{line}");
        for want in [
            "kernel: debian:7.3.4 (/cache/vmlinuz)\n",
            "guest env: FUTEX_RACE_SERIALIZE=1\n",
            "  exec-1: /bin/sh -c 'grep -c processor /proc/cpuinfo' (timeout 120 s)\n",
            "  /init (from /g/guest-init)\n  /harness/plan.json (10 bytes)\n",
            "random.trust_cpu=on tsc=reliable ",
            " panic=0 quiet\n",
            "qemu: /usr/bin/qemu-system-x86_64 -nodefaults",
            "path=<cell-temp-dir>/console-1.sock",
            "-device pvpanic -d guest_errors\n",
        ] {
            assert!(text.contains(want), "{want:?} not in\n{text}");
        }
        // Under TCG the host's TSC rate, where it has a constant one.
        if let Some(word) = crate::kernel::tsc::cmdline_word() {
            assert!(
                text.contains(&format!("tsc=reliable {word} panic=0")),
                "{text}"
            );
        }
    }
}

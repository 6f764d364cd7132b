//! QEMU command line: a pure function of the VM spec and host facts, built
//! from one small function per concern (each returning `Vec<OsString>`), so
//! the whole argv for a NUMA topology is snapshot-tested without a VM.

use crate::arch::Arch;
use crate::topology::Topology;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// How QEMU executes guest code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Accel {
    /// Hardware virtualization.
    Kvm,
    /// Software emulation (multi-threaded TCG).
    Tcg,
}

impl Accel {
    /// `kvm` / `tcg`.
    pub fn name(self) -> &'static str {
        match self {
            Accel::Kvm => "kvm",
            Accel::Tcg => "tcg",
        }
    }
}

/// How TCG maps a guest's vCPUs onto host threads (QEMU's
/// `-accel tcg,thread=...`; nothing under KVM).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum TcgThread {
    /// One host thread per vCPU (QEMU's default): a guest may keep every
    /// host core busy, and vCPUs really run at once.
    #[default]
    Multi,
    /// One host thread for all vCPUs, run in turns (round-robin): a guest
    /// keeps at most one core busy, and a vCPU spinning on a sibling
    /// (`pause`) hands the thread on instead of burning a core. What the
    /// matrix uses when cells share the host (docs/matrix.md, Scheduling).
    Single,
}

impl TcgThread {
    /// QEMU's word: `multi` / `single`.
    pub fn name(self) -> &'static str {
        match self {
            TcgThread::Multi => "multi",
            TcgThread::Single => "single",
        }
    }
}

/// Everything the argv depends on.
#[derive(Debug, Clone)]
pub struct VmSpec {
    /// The guest architecture (machine, CPU, console, results channel).
    pub arch: Arch,
    /// Accelerator.
    pub accel: Accel,
    /// TCG's vCPU threads (ignored under KVM).
    pub tcg_thread: TcgThread,
    /// NUMA topology.
    pub topology: Topology,
    /// bzImage / vmlinuz.
    pub kernel: PathBuf,
    /// newc initramfs.
    pub initrd: PathBuf,
    /// Extra kernel command line words (appended after ours).
    pub cmdline_extra: Vec<String>,
    /// Unix socket (harness listens) for the console serial port ttyS0.
    pub console_socket: PathBuf,
    /// Unix socket (harness listens) for the results serial port ttyS1.
    pub results_socket: PathBuf,
    /// Unix socket (harness listens) for QMP.
    pub qmp_socket: PathBuf,
    /// virtiofs devices (vhost-user, one daemon each); when there are any,
    /// guest RAM is shared memory (`memory-backend-memfd,share=on`).
    pub shares: Vec<FsDevice>,
    /// What debugging and the user add (shell port, gdbstub, `--qemu-arg`).
    pub extras: Extras,
}

/// The parts of the argv a debugging session adds; none by default.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Extras {
    /// Unix socket (harness listens) for a third serial port, ttyS2, that
    /// carries the interactive shell.
    pub shell_socket: Option<PathBuf>,
    /// QEMU's gdbstub.
    pub gdb: Option<GdbStub>,
    /// `--qemu-arg` / `qemu_args:` words, appended after everything of
    /// ours (so where QEMU lets a later option win, they win).
    pub qemu_args: Vec<OsString>,
}

/// Where QEMU's gdbstub listens, and whether the guest waits for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GdbStub {
    /// The address.
    pub listen: GdbListen,
    /// Start the guest halted (`-S`) until gdb says `continue`.
    pub wait: bool,
}

/// A gdbstub address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GdbListen {
    /// A Unix socket (QEMU listens).
    Unix(PathBuf),
    /// A TCP port on localhost.
    Tcp(u16),
}

impl GdbListen {
    /// QEMU's `-gdb` device string: `unix:PATH,server=on,wait=off` or
    /// `tcp:127.0.0.1:PORT`.
    pub fn qemu_device(&self) -> OsString {
        match self {
            GdbListen::Unix(p) => {
                let mut s = OsString::from("unix:");
                s.push(p);
                s.push(",server=on,wait=off");
                s
            }
            GdbListen::Tcp(port) => format!("tcp:127.0.0.1:{port}").into(),
        }
    }

    /// What gdb's `target remote` takes: the socket path, or `localhost:PORT`.
    pub fn gdb_target(&self) -> String {
        match self {
            GdbListen::Unix(p) => p.display().to_string(),
            GdbListen::Tcp(port) => format!("localhost:{port}"),
        }
    }
}

/// One `vhost-user-fs-pci` device backed by a virtiofsd socket.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FsDevice {
    /// The tag the guest mounts (`mount -t virtiofs TAG ...`).
    pub tag: String,
    /// virtiofsd's vhost-user socket (the daemon listens, QEMU connects).
    pub socket: PathBuf,
}

/// The kernel command line: console on ttyS0, panic reboots at once (QEMU
/// exits because of `-no-reboot`), our init from the initramfs.
pub fn kernel_cmdline(extra: &[String]) -> String {
    kernel_cmdline_for(Arch::X86_64, extra)
}

/// [`kernel_cmdline`] for `arch`: the console on its first UART (`ttyS0`,
/// arm64's PL011 `ttyAMA0`).
pub fn kernel_cmdline_for(arch: Arch, extra: &[String]) -> String {
    let console = match arch {
        Arch::X86_64 => "console=ttyS0,115200",
        Arch::Arm64 => "console=ttyAMA0",
    };
    let mut words = vec![
        console,
        "panic=-1",
        "rdinit=/init",
        "printk.time=1",
        // guest-init's begin/end markers must not be rate-limited away.
        "printk.devkmsg=on",
        // A hung test must not stall the boot-time RNG wait of Rust's std.
        "random.trust_cpu=on",
    ]
    .into_iter()
    .map(String::from)
    .collect::<Vec<_>>();
    words.extend(extra.iter().cloned());
    words.join(" ")
}

fn os(parts: &[&str]) -> Vec<OsString> {
    parts.iter().map(OsString::from).collect()
}

/// No default devices, no display, no network; QEMU exits on guest reboot.
pub fn base_args() -> Vec<OsString> {
    base_args_for(Arch::X86_64)
}

/// [`base_args`] with `arch`'s machine: `pc`, or `virt` with GICv3 (up
/// to 512 vCPUs, where GICv2 stops at 8).
pub fn base_args_for(arch: Arch) -> Vec<OsString> {
    os(&[
        "-nodefaults",
        "-no-user-config",
        "-display",
        "none",
        "-no-reboot",
        "-machine",
        match arch {
            Arch::X86_64 => "pc",
            Arch::Arm64 => "virt,gic-version=3",
        },
    ])
}

/// Accelerator and CPU model (`host` needs KVM; `max` under TCG, but
/// without 5-level paging, which QEMU 7.2's TCG emulates badly enough to
/// double-fault Debian's 6.12 kernel; QEMU >= 8 is recommended anyway, see
/// README).
pub fn accel_args(accel: Accel, thread: TcgThread) -> Vec<OsString> {
    accel_args_for(Arch::X86_64, accel, thread)
}

/// [`accel_args`] for `arch`. arm64 under TCG: `max` with QEMU's own
/// pointer-authentication algorithm (`pauth-impdef=on`: the architected
/// QARMA5 costs TCG a large share of its time on every signed return,
/// and the guest cannot tell them apart).
pub fn accel_args_for(arch: Arch, accel: Accel, thread: TcgThread) -> Vec<OsString> {
    if arch == Arch::Arm64 {
        return match (accel, thread) {
            (Accel::Kvm, _) => os(&["-accel", "kvm", "-cpu", "host"]),
            (Accel::Tcg, TcgThread::Multi) => os(&["-accel", "tcg", "-cpu", "max,pauth-impdef=on"]),
            (Accel::Tcg, TcgThread::Single) => {
                os(&["-accel", "tcg,thread=single", "-cpu", "max,pauth-impdef=on"])
            }
        };
    }
    match (accel, thread) {
        (Accel::Kvm, _) => os(&["-accel", "kvm", "-cpu", "host"]),
        // QEMU's default is multi: said only when it is not.
        (Accel::Tcg, TcgThread::Multi) => os(&["-accel", "tcg", "-cpu", "max,la57=off"]),
        (Accel::Tcg, TcgThread::Single) => {
            os(&["-accel", "tcg,thread=single", "-cpu", "max,la57=off"])
        }
    }
}

/// `-smp` and `-m` for the whole machine.
pub fn smp_mem_args(t: &Topology) -> Vec<OsString> {
    vec![
        "-smp".into(),
        format!("{},sockets={},cores=1,threads=1", t.cpus(), t.cpus()).into(),
        "-m".into(),
        mem_size(t).into(),
    ]
}

/// `-m`'s value: the boot memory, and with offline nodes the memory
/// hotplug range (`slots=,maxmem=`) whose SRAT entry, hot-pluggable and
/// given to the last node, is what makes that node possible.
pub fn mem_size(t: &Topology) -> String {
    match t.offline() {
        0 => format!("{}M", t.mem_mib()),
        n => format!(
            "{}M,slots={n},maxmem={}M",
            t.mem_mib(),
            t.mem_mib() + t.hotplug_mib()
        ),
    }
}

/// One memory backend per node with memory, `-numa node` per node (CPU
/// ranges, memdev), a bare `-numa node,nodeid=N` per offline node (the
/// last ones: the hotplug range of [`mem_size`] goes to the last node),
/// and `-numa dist` for every ordered pair when declared.
pub fn numa_args(t: &Topology) -> Vec<OsString> {
    numa_args_shared(t, false)
}

/// [`numa_args`], with every node's RAM in shared memory when `shared`
/// (vhost-user devices such as virtiofs need the daemon to map all guest
/// RAM: `memory-backend-memfd,share=on` instead of `memory-backend-ram`).
pub fn numa_args_shared(t: &Topology, shared: bool) -> Vec<OsString> {
    let mut a: Vec<OsString> = Vec::new();
    for (i, n) in t.nodes().iter().enumerate() {
        if n.mem_mib > 0 {
            a.push("-object".into());
            a.push(if shared {
                format!(
                    "memory-backend-memfd,id=mem{i},size={}M,share=on",
                    n.mem_mib
                )
                .into()
            } else {
                format!("memory-backend-ram,id=mem{i},size={}M", n.mem_mib).into()
            });
        }
    }
    for (i, n) in t.nodes().iter().enumerate() {
        let mut node = format!("node,nodeid={i}");
        let cpus = t.node_cpus(i);
        if !cpus.is_empty() {
            node += &format!(",cpus={}-{}", cpus.start, cpus.end - 1);
        }
        if n.mem_mib > 0 {
            node += &format!(",memdev=mem{i}");
        }
        a.push("-numa".into());
        a.push(node.into());
    }
    for i in t.offline_ids() {
        a.push("-numa".into());
        a.push(format!("node,nodeid={i}").into());
    }
    if let Some(d) = t.distances() {
        for (i, row) in d.iter().enumerate() {
            for (j, v) in row.iter().enumerate() {
                if i != j {
                    a.push("-numa".into());
                    a.push(format!("dist,src={i},dst={j},val={v}").into());
                }
            }
        }
    }
    a
}

/// Kernel, initramfs, command line.
pub fn kernel_args(kernel: &Path, initrd: &Path, cmdline: &str) -> Vec<OsString> {
    vec![
        "-kernel".into(),
        kernel.into(),
        "-initrd".into(),
        initrd.into(),
        "-append".into(),
        cmdline.into(),
    ]
}

fn socket_chardev(id: &str, path: &Path) -> OsString {
    let mut s = OsString::from(format!("socket,id={id},path="));
    s.push(path);
    s
}

/// ttyS0 = console, ttyS1 = KTAP results; both connect to the harness's
/// listening sockets (so QEMU never races the harness for a port).
pub fn serial_args(console: &Path, results: &Path) -> Vec<OsString> {
    vec![
        "-chardev".into(),
        socket_chardev("console", console),
        "-serial".into(),
        "chardev:console".into(),
        "-chardev".into(),
        socket_chardev("results", results),
        "-serial".into(),
        "chardev:results".into(),
    ]
}

/// ttyS0 = console on QEMU's stdout, ttyS1 = KTAP results into `results`:
/// a boot with no harness listening (the `by hand:` line of `--dry-run`).
pub fn serial_args_by_hand(results: &Path) -> Vec<OsString> {
    // QEMU splits an option value at a comma; ",," is a literal one.
    let mut file = OsString::from("file,id=results,path=");
    file.push(results.to_string_lossy().replace(',', ",,"));
    vec![
        "-serial".into(),
        "stdio".into(),
        "-chardev".into(),
        file,
        "-serial".into(),
        "chardev:results".into(),
    ]
}

/// QMP monitor on a client socket to the harness.
pub fn qmp_args(qmp: &Path) -> Vec<OsString> {
    vec![
        "-chardev".into(),
        socket_chardev("qmp", qmp),
        "-mon".into(),
        "chardev=qmp,mode=control".into(),
    ]
}

/// The results channel of a `virt` machine, which has one UART (the
/// console): a virtio console (`/dev/hvc0` in the guest) on the harness's
/// listening socket, as x86's second serial port is.
pub fn virtio_results_args(results: OsString) -> Vec<OsString> {
    vec![
        "-device".into(),
        "virtio-serial-pci".into(),
        "-chardev".into(),
        results,
        "-device".into(),
        "virtconsole,chardev=results".into(),
    ]
}

/// The console and results channel of `arch` (see [`serial_args`]).
pub fn channel_args(arch: Arch, console: &Path, results: &Path) -> Vec<OsString> {
    match arch {
        Arch::X86_64 => serial_args(console, results),
        Arch::Arm64 => [
            vec![
                "-chardev".into(),
                socket_chardev("console", console),
                "-serial".into(),
                "chardev:console".into(),
            ],
            virtio_results_args(socket_chardev("results", results)),
        ]
        .concat(),
    }
}

/// [`serial_args_by_hand`] for `arch`.
pub fn channel_args_by_hand(arch: Arch, results: &Path) -> Vec<OsString> {
    match arch {
        Arch::X86_64 => serial_args_by_hand(results),
        Arch::Arm64 => {
            let mut file = OsString::from("file,id=results,path=");
            file.push(results.to_string_lossy().replace(',', ",,"));
            [
                vec!["-serial".into(), "stdio".into()],
                virtio_results_args(file),
            ]
            .concat()
        }
    }
}

/// The devices of `arch` that end QEMU and report panics: x86's
/// [`device_args`]; none on arm64, whose guest ends the VM by PSCI
/// (its status on the console, `guest_tests::plan::GUEST_EXIT_MARK`) and
/// whose panics the console shows (Debian's arm64 kernel has no pvpanic).
pub fn device_args_for(arch: Arch) -> Vec<OsString> {
    match arch {
        Arch::X86_64 => device_args(),
        Arch::Arm64 => Vec::new(),
    }
}

/// isa-debug-exit (guest-init ends QEMU with a status) and pvpanic (a
/// panic is reported as QMP `GUEST_PANICKED`).
pub fn device_args() -> Vec<OsString> {
    os(&[
        "-device",
        "isa-debug-exit,iobase=0xf4,iosize=0x04",
        "-device",
        "pvpanic",
    ])
}

/// One vhost-user-fs device per share: `-chardev socket,id=vfsN,path=SOCK
/// -device vhost-user-fs-pci,chardev=vfsN,tag=TAG`. (No `--tag` on the
/// daemon: QEMU 7.1-8.0 crash on the config feature it enables.)
pub fn share_args(shares: &[FsDevice]) -> Vec<OsString> {
    let mut a: Vec<OsString> = Vec::new();
    for (i, s) in shares.iter().enumerate() {
        a.push("-chardev".into());
        a.push(socket_chardev(&format!("vfs{i}"), &s.socket));
        a.push("-device".into());
        a.push(format!("vhost-user-fs-pci,chardev=vfs{i},tag={}", s.tag).into());
    }
    a
}

/// The kernel command-line word a TCG guest with virtiofs shares needs
/// (before the user's words, so `--append init_on_alloc=0` still wins).
///
/// virtiofsd writes file data straight into guest RAM (shared memory), past
/// TCG's tracking of writes to pages it has translated code from. When the
/// guest reuses a page that held executed code as page cache for a share
/// file and virtiofsd fills it, TCG keeps running the old translations:
/// the second exec of a binary from a share crashed with SIGSEGV/SIGILL
/// while its bytes read back correctly (docs/shares.md). With
/// `init_on_alloc=1` the guest CPU zeroes every page it allocates, which
/// drops those translations first. KVM runs the real bytes: not needed.
pub fn tcg_share_cmdline(accel: Accel, has_shares: bool) -> Option<&'static str> {
    (accel == Accel::Tcg && has_shares).then_some("init_on_alloc=1")
}

/// The kernel command-line word every TCG guest gets: `tsc=reliable`.
///
/// Under TCG every vCPU reads one virtual TSC (QEMU's virtual clock), so
/// the TSCs are synchronized by construction; but the boot-time sync check
/// runs on vCPU threads the host deschedules, finds "TSCs unsynchronized"
/// and falls back to the HPET, whose every read is an emulated MMIO exit
/// and whose `clock_gettime()` leaves the vDSO. Measured on debian 7.3.4 at
/// 2 x 4 vCPUs: the futex suite's QEMU CPU time 25.3 s -> 20.3 s, wall
/// 32.0 s -> 29.7 s. KVM guests use kvm-clock: not needed there.
pub fn tcg_clock_cmdline(accel: Accel) -> Option<&'static str> {
    (accel == Accel::Tcg).then_some("tsc=reliable")
}

/// [`tcg_clock_cmdline`] where there is a TSC (x86-64; arm64's generic
/// timer is one per machine already).
pub fn tcg_clock_cmdline_for(arch: Arch, accel: Accel) -> Option<&'static str> {
    tcg_clock_cmdline(accel).filter(|_| arch == Arch::X86_64)
}

/// The shell's serial port ttyS2 (the interactive shell of `--shell`),
/// on the harness's listening socket like the other two.
pub fn shell_args(shell: &Path) -> Vec<OsString> {
    vec![
        "-chardev".into(),
        socket_chardev("shell", shell),
        "-serial".into(),
        "chardev:shell".into(),
    ]
}

/// The gdbstub (`-gdb DEV`), and `-S` when the guest waits for gdb.
pub fn gdb_args(gdb: &GdbStub) -> Vec<OsString> {
    let mut a = vec!["-gdb".into(), gdb.listen.qemu_device()];
    if gdb.wait {
        a.push("-S".into());
    }
    a
}

/// The command line words of ours that come before the user's: TCG's
/// clock and share words, and `nokaslr` under gdb (symbols of `vmlinux`
/// then match the running kernel's addresses).
pub fn cmdline_words(spec: &VmSpec) -> Vec<String> {
    tcg_clock_cmdline_for(spec.arch, spec.accel)
        .into_iter()
        .chain(tcg_share_cmdline(spec.accel, !spec.shares.is_empty()))
        .chain(spec.extras.gdb.as_ref().map(|_| "nokaslr"))
        .map(String::from)
        .chain(spec.cmdline_extra.iter().cloned())
        .collect()
}

/// The whole argv (without the program name).
pub fn argv(spec: &VmSpec) -> Vec<OsString> {
    let extra = cmdline_words(spec);
    [
        base_args_for(spec.arch),
        accel_args_for(spec.arch, spec.accel, spec.tcg_thread),
        smp_mem_args(&spec.topology),
        numa_args_shared(&spec.topology, !spec.shares.is_empty()),
        kernel_args(
            &spec.kernel,
            &spec.initrd,
            &kernel_cmdline_for(spec.arch, &extra),
        ),
        channel_args(spec.arch, &spec.console_socket, &spec.results_socket),
        qmp_args(&spec.qmp_socket),
        device_args_for(spec.arch),
        share_args(&spec.shares),
        spec.extras
            .shell_socket
            .as_deref()
            .map(shell_args)
            .unwrap_or_default(),
        spec.extras.gdb.as_ref().map(gdb_args).unwrap_or_default(),
        spec.extras.qemu_args.clone(),
    ]
    .concat()
}

/// The argv of a boot without the harness (without the program name):
/// [`argv`] with the console on stdout, the results written to `results`,
/// and no QMP, shares or shell, which need the harness on their sockets.
/// QEMU's exit status is then guest-init's (`33`: the plan ran).
pub fn argv_by_hand(spec: &VmSpec, results: &Path) -> Vec<OsString> {
    let extra = cmdline_words(spec);
    [
        base_args_for(spec.arch),
        accel_args_for(spec.arch, spec.accel, spec.tcg_thread),
        smp_mem_args(&spec.topology),
        numa_args_shared(&spec.topology, false),
        kernel_args(
            &spec.kernel,
            &spec.initrd,
            &kernel_cmdline_for(spec.arch, &extra),
        ),
        channel_args_by_hand(spec.arch, results),
        device_args_for(spec.arch),
        spec.extras.gdb.as_ref().map(gdb_args).unwrap_or_default(),
        spec.extras.qemu_args.clone(),
    ]
    .concat()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::Node;

    fn spec(t: Topology, accel: Accel) -> VmSpec {
        VmSpec {
            arch: Arch::X86_64,
            accel,
            tcg_thread: TcgThread::Multi,
            topology: t,
            kernel: "/k/vmlinuz".into(),
            initrd: "/c/initrd".into(),
            cmdline_extra: vec!["quiet".into()],
            console_socket: "/c/console.sock".into(),
            results_socket: "/c/results.sock".into(),
            qmp_socket: "/c/qmp.sock".into(),
            shares: vec![],
            extras: Extras::default(),
        }
    }

    fn line(a: &[OsString]) -> String {
        a.iter()
            .map(|s| s.to_string_lossy().into_owned())
            .collect::<Vec<_>>()
            .join(" ")
    }

    #[test]
    fn two_node_tcg_snapshot() {
        let t = Topology::parse_spec("nodes=2,cpus=2,mem=512M").unwrap();
        assert_eq!(
            line(&argv(&spec(t, Accel::Tcg))),
            "-nodefaults -no-user-config -display none -no-reboot -machine pc \
             -accel tcg -cpu max,la57=off -smp 4,sockets=4,cores=1,threads=1 -m 1024M \
             -object memory-backend-ram,id=mem0,size=512M -object memory-backend-ram,id=mem1,size=512M \
             -numa node,nodeid=0,cpus=0-1,memdev=mem0 -numa node,nodeid=1,cpus=2-3,memdev=mem1 \
             -kernel /k/vmlinuz -initrd /c/initrd \
             -append console=ttyS0,115200 panic=-1 rdinit=/init printk.time=1 printk.devkmsg=on random.trust_cpu=on tsc=reliable quiet \
             -chardev socket,id=console,path=/c/console.sock -serial chardev:console \
             -chardev socket,id=results,path=/c/results.sock -serial chardev:results \
             -chardev socket,id=qmp,path=/c/qmp.sock -mon chardev=qmp,mode=control \
             -device isa-debug-exit,iobase=0xf4,iosize=0x04 -device pvpanic"
        );
    }

    #[test]
    fn two_node_arm64_tcg_snapshot() {
        let t = Topology::parse_spec("nodes=2,cpus=2,mem=512M,distance=31").unwrap();
        let mut s = spec(t, Accel::Tcg);
        s.arch = Arch::Arm64;
        assert_eq!(
            line(&argv(&s)),
            "-nodefaults -no-user-config -display none -no-reboot -machine virt,gic-version=3 \
             -accel tcg -cpu max,pauth-impdef=on -smp 4,sockets=4,cores=1,threads=1 -m 1024M \
             -object memory-backend-ram,id=mem0,size=512M -object memory-backend-ram,id=mem1,size=512M \
             -numa node,nodeid=0,cpus=0-1,memdev=mem0 -numa node,nodeid=1,cpus=2-3,memdev=mem1 \
             -numa dist,src=0,dst=1,val=31 -numa dist,src=1,dst=0,val=31 \
             -kernel /k/vmlinuz -initrd /c/initrd \
             -append console=ttyAMA0 panic=-1 rdinit=/init printk.time=1 printk.devkmsg=on random.trust_cpu=on quiet \
             -chardev socket,id=console,path=/c/console.sock -serial chardev:console \
             -device virtio-serial-pci -chardev socket,id=results,path=/c/results.sock \
             -device virtconsole,chardev=results \
             -chardev socket,id=qmp,path=/c/qmp.sock -mon chardev=qmp,mode=control"
        );
        // By hand: the console on stdout, the results into a file, no
        // isa-debug-exit (the guest's status is on the console).
        let by_hand = line(&argv_by_hand(&s, "/o/r.ktap".as_ref()));
        assert!(
            by_hand.ends_with(
                "-serial stdio -device virtio-serial-pci -chardev file,id=results,path=/o/r.ktap \
                 -device virtconsole,chardev=results"
            ),
            "{by_hand}"
        );
        assert_eq!(
            line(&accel_args_for(Arch::Arm64, Accel::Kvm, TcgThread::Multi)),
            "-accel kvm -cpu host"
        );
    }

    #[test]
    fn by_hand_the_console_is_stdout_and_the_results_a_file() {
        let t = Topology::parse_spec("nodes=2,cpus=2,mem=512M").unwrap();
        let mut s = spec(t, Accel::Tcg);
        s.extras.qemu_args = vec!["-d".into(), "guest_errors".into()];
        let by_hand = line(&argv_by_hand(&s, "/o/nodes=2,cpus=2/r.ktap".as_ref()));
        let full = line(&argv(&s));
        let (head, _) = full.split_once(" -chardev socket,id=console").unwrap();
        assert_eq!(
            by_hand,
            format!(
                "{head} -serial stdio -chardev file,id=results,path=/o/nodes=2,,cpus=2/r.ktap \
                 -serial chardev:results \
                 -device isa-debug-exit,iobase=0xf4,iosize=0x04 -device pvpanic -d guest_errors"
            )
        );
    }

    #[test]
    fn distances_memoryless_and_cpuless_nodes() {
        let n = |cpus, mem_mib| Node { cpus, mem_mib };
        let d = vec![vec![10, 21, 31], vec![21, 10, 21], vec![31, 21, 10]];
        let t = Topology::new(vec![n(2, 512), n(2, 0), n(0, 256)], Some(d)).unwrap();
        assert_eq!(
            line(&numa_args(&t)),
            "-object memory-backend-ram,id=mem0,size=512M -object memory-backend-ram,id=mem2,size=256M \
             -numa node,nodeid=0,cpus=0-1,memdev=mem0 -numa node,nodeid=1,cpus=2-3 -numa node,nodeid=2,memdev=mem2 \
             -numa dist,src=0,dst=1,val=21 -numa dist,src=0,dst=2,val=31 -numa dist,src=1,dst=0,val=21 \
             -numa dist,src=1,dst=2,val=21 -numa dist,src=2,dst=0,val=31 -numa dist,src=2,dst=1,val=21"
        );
        assert_eq!(
            line(&smp_mem_args(&t)),
            "-smp 4,sockets=4,cores=1,threads=1 -m 768M"
        );
    }

    #[test]
    fn an_offline_node_is_a_bare_last_node_with_the_hotplug_range() {
        // The measured argv: Linux shows possible 0-2, online 0-1
        // (docs/futex-abi.md section 3).
        let t = Topology::parse_spec("nodes=2,cpus=2,mem=512M,offline=1").unwrap();
        assert_eq!(
            line(&[smp_mem_args(&t), numa_args(&t)].concat()),
            "-smp 4,sockets=4,cores=1,threads=1 -m 1024M,slots=1,maxmem=1280M \
             -object memory-backend-ram,id=mem0,size=512M -object memory-backend-ram,id=mem1,size=512M \
             -numa node,nodeid=0,cpus=0-1,memdev=mem0 -numa node,nodeid=1,cpus=2-3,memdev=mem1 \
             -numa node,nodeid=2"
        );
    }

    #[test]
    fn shares_add_devices_and_share_all_guest_ram() {
        let t = Topology::parse_spec("nodes=2,cpus=1,mem=256M").unwrap();
        let mut s = spec(t, Accel::Tcg);
        s.shares = vec![
            FsDevice {
                tag: "artifacts".into(),
                socket: "/c/vfs-artifacts.sock".into(),
            },
            FsDevice {
                tag: "share0".into(),
                socket: "/c/vfs-share0.sock".into(),
            },
        ];
        let l = line(&argv(&s));
        assert!(
            l.contains(
                "-object memory-backend-memfd,id=mem0,size=256M,share=on \
                 -object memory-backend-memfd,id=mem1,size=256M,share=on -numa node,nodeid=0"
            ),
            "{l}"
        );
        assert!(!l.contains("memory-backend-ram"), "{l}");
        // TCG runs stale translations of code virtiofsd overwrote unless the
        // guest zeroes pages it allocates; the user's words still come last.
        assert!(
            l.contains("random.trust_cpu=on tsc=reliable init_on_alloc=1 quiet -chardev"),
            "{l}"
        );
        assert_eq!(tcg_share_cmdline(Accel::Tcg, false), None);
        assert_eq!(tcg_clock_cmdline(Accel::Tcg), Some("tsc=reliable"));
        assert_eq!(tcg_clock_cmdline(Accel::Kvm), None);
        assert_eq!(tcg_share_cmdline(Accel::Kvm, true), None);
        assert!(
            l.ends_with(
                "-device pvpanic \
                 -chardev socket,id=vfs0,path=/c/vfs-artifacts.sock \
                 -device vhost-user-fs-pci,chardev=vfs0,tag=artifacts \
                 -chardev socket,id=vfs1,path=/c/vfs-share0.sock \
                 -device vhost-user-fs-pci,chardev=vfs1,tag=share0"
            ),
            "{l}"
        );
        assert!(share_args(&[]).is_empty());
    }

    #[test]
    fn debugging_adds_the_shell_port_the_gdbstub_and_the_users_words_last() {
        let t = Topology::parse_spec("nodes=1,cpus=1,mem=256M").unwrap();
        let mut s = spec(t, Accel::Kvm);
        s.extras = Extras {
            shell_socket: Some("/c/shell.sock".into()),
            gdb: Some(GdbStub {
                listen: GdbListen::Unix("/c/gdb.sock".into()),
                wait: true,
            }),
            qemu_args: vec!["-d".into(), "guest_errors".into()],
        };
        let l = line(&argv(&s));
        assert!(
            l.contains("random.trust_cpu=on nokaslr quiet -chardev"),
            "{l}"
        );
        assert!(
            l.ends_with(
                "-device pvpanic \
                 -chardev socket,id=shell,path=/c/shell.sock -serial chardev:shell \
                 -gdb unix:/c/gdb.sock,server=on,wait=off -S -d guest_errors"
            ),
            "{l}"
        );
        let tcp = GdbListen::Tcp(1234);
        assert_eq!(tcp.qemu_device(), "tcp:127.0.0.1:1234");
        assert_eq!(tcp.gdb_target(), "localhost:1234");
        assert!(!line(&gdb_args(&GdbStub {
            listen: tcp,
            wait: false
        }))
        .contains("-S"));
    }

    #[test]
    fn kvm_uses_the_host_cpu() {
        for t in [TcgThread::Multi, TcgThread::Single] {
            assert_eq!(line(&accel_args(Accel::Kvm, t)), "-accel kvm -cpu host");
        }
    }

    #[test]
    fn round_robin_tcg_is_said_on_the_accel_option() {
        assert_eq!(
            line(&accel_args(Accel::Tcg, TcgThread::Single)),
            "-accel tcg,thread=single -cpu max,la57=off"
        );
        let t = Topology::parse_spec("nodes=2,cpus=2,mem=512M").unwrap();
        let mut s = spec(t, Accel::Tcg);
        s.tcg_thread = TcgThread::Single;
        assert!(line(&argv(&s)).contains(" -accel tcg,thread=single -cpu max,la57=off -smp 4,"));
    }
}

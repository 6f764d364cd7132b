//! The pre-boot check of a `path:` kernel: read its configuration (the
//! `.config` beside the image, or the `IKCONFIG` blob embedded in a
//! gzip-compressed bzImage) and refuse to boot, naming each missing option
//! and the fragment line that fixes it, when the guest cannot work — rather
//! than finding out after the boot (without `X86_IOPL_IOPERM` guest-init
//! cannot end QEMU through isa-debug-exit; without `ACPI_NUMA` a two-node
//! guest sees one node). The image's header says its architecture (an x86
//! bzImage or an arm64 `Image`, [`Arch::of_kernel_image`]), and so which
//! needs apply: an arm64 guest on QEMU's `virt` needs a PL011 console, a
//! virtconsole for results and PSCI power-off instead of the 8250 ports
//! and isa-debug-exit.
//!
//! Architecture invariant: pure apart from reading the image and its
//! config; it knows what guest-init and the suites need, not how to build.

use crate::arch::Arch;
use std::io::Read;
use std::path::{Path, PathBuf};

/// One option the guest needs, and why.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Need {
    /// The option, without `CONFIG_`.
    pub option: &'static str,
    /// At least this value (`SERIAL_8250_RUNTIME_UARTS >= 2`); else `=y`.
    pub at_least: Option<u32>,
    /// Why the guest needs it.
    pub why: &'static str,
}

const fn y(option: &'static str, why: &'static str) -> Need {
    Need {
        option,
        at_least: None,
        why,
    }
}

/// What every x86-64 guest needs.
pub const GUEST: &[Need] = &[
    y(
        "BLK_DEV_INITRD",
        "the initramfs holds guest-init and the tests",
    ),
    y("BINFMT_ELF", "the guest binaries are ELF executables"),
    y("DEVTMPFS", "guest-init mounts /dev"),
    y("PROC_FS", "guest-init mounts /proc"),
    y("SYSFS", "the topology check reads /sys/devices/system/node"),
    y("TTY", "the console and the results port are serial ttys"),
    y(
        "SERIAL_8250",
        "the console (ttyS0) and results port (ttyS1)",
    ),
    y("SERIAL_8250_CONSOLE", "the kernel console on ttyS0"),
    Need {
        option: "SERIAL_8250_RUNTIME_UARTS",
        at_least: Some(2),
        why: "the results port is the second 8250 port (ttyS1)",
    },
    y(
        "X86_IOPL_IOPERM",
        "guest-init ends QEMU through isa-debug-exit (ioperm)",
    ),
    y("FUTEX", "the test binaries (glibc, Rust std) use futexes"),
];

/// What an arm64 guest on QEMU's `virt` needs.
pub const GUEST_ARM64: &[Need] = &[
    y(
        "BLK_DEV_INITRD",
        "the initramfs holds guest-init and the tests",
    ),
    y("BINFMT_ELF", "the guest binaries are ELF executables"),
    y("DEVTMPFS", "guest-init mounts /dev"),
    y("PROC_FS", "guest-init mounts /proc"),
    y("SYSFS", "the topology check reads /sys/devices/system/node"),
    y("TTY", "the console and the results channel are ttys"),
    y("SERIAL_AMBA_PL011", "the console (ttyAMA0) is virt's PL011"),
    y("SERIAL_AMBA_PL011_CONSOLE", "the kernel console on ttyAMA0"),
    y("PCI", "the results channel is on virtio-serial-pci"),
    y("PCI_HOST_GENERIC", "virt's PCI host bridge (ECAM)"),
    y("VIRTIO_PCI", "the results channel is on virtio-serial-pci"),
    y(
        "VIRTIO_CONSOLE",
        "the results channel is a virtconsole (hvc0)",
    ),
    y("ARM_PSCI_FW", "guest-init ends QEMU with a PSCI power-off"),
    y(
        "POWER_RESET",
        "the PSCI power-off handler (without it QEMU does not exit)",
    ),
    y("FUTEX", "the test binaries (glibc, Rust std) use futexes"),
];

/// What a guest of more than one node needs (x86-64).
pub const MULTI_NODE: &[Need] = &[
    y("NUMA", "more than one node"),
    y("ACPI", "QEMU describes the nodes in ACPI SRAT"),
    y("ACPI_NUMA", "the kernel reads the nodes from SRAT"),
    y(
        "PCI",
        "X86_64_ACPI_NUMA depends on PCI: without it one node",
    ),
    y("X86_64_ACPI_NUMA", "the kernel reads the nodes from SRAT"),
];

/// What an arm64 guest of more than one node needs: QEMU's `-kernel`
/// boot passes the nodes in the device tree.
pub const MULTI_NODE_ARM64: &[Need] = &[
    y("NUMA", "more than one node"),
    y("OF_NUMA", "the kernel reads the nodes from the device tree"),
];

/// What a guest of more than one vCPU needs.
pub const MULTI_CPU: &[Need] = &[y("SMP", "more than one vCPU")];

/// The needs of a guest of `arch` with `nodes` nodes and `cpus` vCPUs.
pub fn needs(arch: Arch, nodes: usize, cpus: u32) -> Vec<Need> {
    let (guest, multi_node) = match arch {
        Arch::X86_64 => (GUEST, MULTI_NODE),
        Arch::Arm64 => (GUEST_ARM64, MULTI_NODE_ARM64),
    };
    let mut needs: Vec<Need> = guest.to_vec();
    if nodes > 1 {
        needs.extend_from_slice(multi_node);
    }
    if cpus > 1 {
        needs.extend_from_slice(MULTI_CPU);
    }
    needs
}

/// A configuration and where it was read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// Where: a file, or the image's embedded blob.
    pub source: String,
    /// The `.config` text.
    pub text: String,
}

/// A need the configuration does not meet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Missing {
    /// The need.
    pub need: Need,
    /// What the configuration says (`not set`, `=m`, `=1`).
    pub found: String,
}

impl Missing {
    /// The fragment line that fixes it.
    pub fn fix(&self) -> String {
        match self.need.at_least {
            Some(n) => format!("CONFIG_{}={n}", self.need.option),
            None => format!("CONFIG_{}=y", self.need.option),
        }
    }
}

/// The value of `CONFIG_<option>` in a `.config` (`None`: not set).
pub fn value<'a>(config: &'a str, option: &str) -> Option<&'a str> {
    let key = format!("CONFIG_{option}=");
    config
        .lines()
        .find_map(|l| l.strip_prefix(&key))
        .map(|v| v.trim().trim_matches('"'))
}

/// The needs of an x86-64 guest of `nodes` nodes and `cpus` vCPUs that
/// `config` does not meet (pure).
pub fn missing(config: &str, nodes: usize, cpus: u32) -> Vec<Missing> {
    missing_for(Arch::X86_64, config, nodes, cpus)
}

/// [`missing`] for a guest of `arch` (pure).
pub fn missing_for(arch: Arch, config: &str, nodes: usize, cpus: u32) -> Vec<Missing> {
    needs(arch, nodes, cpus)
        .into_iter()
        .filter_map(|need| {
            let v = value(config, need.option);
            let ok = match (need.at_least, v) {
                (Some(n), Some(v)) => v.parse::<u32>().is_ok_and(|v| v >= n),
                (None, Some(v)) => v == "y",
                (_, None) => false,
            };
            (!ok).then(|| Missing {
                need,
                found: v.map_or("not set".into(), |v| format!("={v}")),
            })
        })
        .collect()
}

/// The configuration of an image: `config`/`.config` beside it (or the
/// tree's `.config` for `<tree>/arch/x86/boot/bzImage` and
/// `<tree>/arch/arm64/boot/Image`), else the `IKCONFIG` blob inside a
/// gzip-compressed kernel or an uncompressed arm64 `Image`.
pub fn find_config(image: &Path) -> Option<Config> {
    let beside = crate::kernel::virtiofs::config_beside(image).or_else(|| arm64_tree_config(image));
    if let Some(p) = beside {
        if let Ok(text) = std::fs::read_to_string(&p) {
            return Some(Config {
                source: p.display().to_string(),
                text,
            });
        }
    }
    let bytes = std::fs::read(image).ok()?;
    embedded_config(&bytes).map(|text| Config {
        source: format!("{} (IKCONFIG)", image.display()),
        text,
    })
}

/// The build tree's `.config` of `<tree>/arch/arm64/boot/Image`.
fn arm64_tree_config(image: &Path) -> Option<PathBuf> {
    if !image.ends_with(Arch::Arm64.kernel_image()) {
        return None;
    }
    let c = image.ancestors().nth(4)?.join(".config");
    c.is_file().then_some(c)
}

/// Largest decompressed kernel we look into (a bound on hostile images).
const MAX_KERNEL: u64 = 256 << 20;

/// The `IKCONFIG` blob (`IKCFG_ST` gzip `IKCFG_ED`) of a bzImage whose
/// payload is gzip-compressed, as `scripts/extract-ikconfig` finds it.
pub fn embedded_config(image: &[u8]) -> Option<String> {
    // An arm64 `Image` is the kernel itself, the blob in plain sight.
    if Arch::of_kernel_image(image) == Some(Arch::Arm64) {
        if let Some(cfg) = ikconfig(image) {
            return Some(cfg);
        }
    }
    const GZIP: &[u8] = &[0x1f, 0x8b, 0x08];
    let mut start = 0;
    while let Some(off) = find(&image[start..], GZIP) {
        let at = start + off;
        let mut kernel = Vec::new();
        let r = flate2::read::GzDecoder::new(&image[at..])
            .take(MAX_KERNEL)
            .read_to_end(&mut kernel);
        if r.is_ok() || kernel.len() > (1 << 20) {
            if let Some(cfg) = ikconfig(&kernel) {
                return Some(cfg);
            }
        }
        start = at + 1;
    }
    None
}

fn ikconfig(kernel: &[u8]) -> Option<String> {
    let st = find(kernel, b"IKCFG_ST")? + 8;
    let mut text = String::new();
    flate2::read::GzDecoder::new(&kernel[st..])
        .take(4 << 20)
        .read_to_string(&mut text)
        .ok()?;
    Some(text)
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// Why a kernel is refused before boot.
#[derive(Debug, thiserror::Error)]
#[error("kernel {}: its configuration ({config}) lacks what an {arch} guest needs for {nodes} node(s) x {cpus} vCPU(s); add to the fragment:\n{}", image.display(), lines(missing))]
pub struct Refused {
    /// The image.
    pub image: PathBuf,
    /// Its architecture (from its header; x86-64 when unknown).
    pub arch: Arch,
    /// Where the configuration was read.
    pub config: String,
    /// Nodes of the topology.
    pub nodes: usize,
    /// vCPUs in all.
    pub cpus: u32,
    /// What is missing.
    pub missing: Vec<Missing>,
}

fn lines(missing: &[Missing]) -> String {
    missing
        .iter()
        .map(|m| format!("  {}    # {} (is {})", m.fix(), m.need.why, m.found))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The architecture of the image at `path` from its header (x86-64 when
/// unreadable or unknown: a gzip vmlinuz, a bzImage).
pub fn image_arch(path: &Path) -> Arch {
    let mut head = [0u8; 0x240];
    let n = std::fs::File::open(path)
        .and_then(|mut f| {
            let mut n = 0;
            while n < head.len() {
                match f.read(&mut head[n..])? {
                    0 => break,
                    k => n += k,
                }
            }
            Ok(n)
        })
        .unwrap_or(0);
    Arch::of_kernel_image(&head[..n]).unwrap_or(Arch::X86_64)
}

/// Checks an image for a topology, with the needs of the architecture its
/// header names: `Ok(None)` when its config meets every need,
/// `Ok(Some(note))` when no config was found (boots, with the note), `Err`
/// with every missing option otherwise.
pub fn check(image: &Path, nodes: usize, cpus: u32) -> Result<Option<String>, Refused> {
    check_for(image, image_arch(image), nodes, cpus)
}

/// [`check`] with the needs of a guest of `arch`.
pub fn check_for(
    image: &Path,
    arch: Arch,
    nodes: usize,
    cpus: u32,
) -> Result<Option<String>, Refused> {
    let Some(cfg) = find_config(image) else {
        return Ok(Some(format!(
            "no .config beside {} and no IKCONFIG in it: booting without the pre-boot check",
            image.display()
        )));
    };
    let missing = missing_for(arch, &cfg.text, nodes, cpus);
    if missing.is_empty() {
        Ok(None)
    } else {
        Err(Refused {
            image: image.to_path_buf(),
            arch,
            config: cfg.source,
            nodes,
            cpus,
            missing,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    const GOOD: &str = "CONFIG_BLK_DEV_INITRD=y\nCONFIG_BINFMT_ELF=y\nCONFIG_DEVTMPFS=y\n\
        CONFIG_PROC_FS=y\nCONFIG_SYSFS=y\nCONFIG_TTY=y\nCONFIG_SERIAL_8250=y\n\
        CONFIG_SERIAL_8250_CONSOLE=y\nCONFIG_SERIAL_8250_RUNTIME_UARTS=4\n\
        CONFIG_X86_IOPL_IOPERM=y\nCONFIG_FUTEX=y\nCONFIG_SMP=y\nCONFIG_NUMA=y\n\
        CONFIG_ACPI=y\nCONFIG_ACPI_NUMA=y\nCONFIG_PCI=y\nCONFIG_X86_64_ACPI_NUMA=y\n";

    #[test]
    fn a_complete_config_passes_and_each_gap_is_named_with_its_fix() {
        assert!(missing(GOOD, 2, 4).is_empty());
        let no_ioperm = GOOD.replace(
            "CONFIG_X86_IOPL_IOPERM=y\n",
            "# CONFIG_X86_IOPL_IOPERM is not set\n",
        );
        let m = missing(&no_ioperm, 1, 1);
        assert_eq!(m.len(), 1);
        assert_eq!(m[0].fix(), "CONFIG_X86_IOPL_IOPERM=y");
        assert_eq!(m[0].found, "not set");
        let one_uart = GOOD.replace("RUNTIME_UARTS=4", "RUNTIME_UARTS=1");
        assert_eq!(
            missing(&one_uart, 1, 1)[0].fix(),
            "CONFIG_SERIAL_8250_RUNTIME_UARTS=2"
        );
        // ACPI_NUMA only matters with more than one node.
        let no_acpi_numa = GOOD.replace("CONFIG_ACPI_NUMA=y\n", "CONFIG_ACPI_NUMA=m\n");
        assert!(missing(&no_acpi_numa, 1, 2).is_empty());
        let m = missing(&no_acpi_numa, 2, 2);
        assert_eq!((m[0].need.option, m[0].found.as_str()), ("ACPI_NUMA", "=m"));
    }

    const GOOD_ARM64: &str = "CONFIG_BLK_DEV_INITRD=y\nCONFIG_BINFMT_ELF=y\nCONFIG_DEVTMPFS=y\n\
        CONFIG_PROC_FS=y\nCONFIG_SYSFS=y\nCONFIG_TTY=y\nCONFIG_SERIAL_AMBA_PL011=y\n\
        CONFIG_SERIAL_AMBA_PL011_CONSOLE=y\nCONFIG_PCI=y\nCONFIG_PCI_HOST_GENERIC=y\n\
        CONFIG_VIRTIO_PCI=y\nCONFIG_VIRTIO_CONSOLE=y\nCONFIG_ARM_PSCI_FW=y\n\
        CONFIG_POWER_RESET=y\nCONFIG_FUTEX=y\nCONFIG_SMP=y\nCONFIG_NUMA=y\nCONFIG_OF_NUMA=y\n";

    #[test]
    fn arm64_needs_its_virt_options_and_not_x86s() {
        assert!(missing_for(Arch::Arm64, GOOD_ARM64, 2, 4).is_empty());
        // An x86 config is no arm64 guest, and the other way round.
        let m: Vec<&str> = missing_for(Arch::Arm64, GOOD, 1, 1)
            .iter()
            .map(|m| m.need.option)
            .collect();
        assert!(
            m.contains(&"SERIAL_AMBA_PL011") && m.contains(&"POWER_RESET"),
            "{m:?}"
        );
        assert!(!m
            .iter()
            .any(|o| o.starts_with("X86") || o.starts_with("SERIAL_8250")));
        assert!(missing(GOOD_ARM64, 1, 1)
            .iter()
            .any(|m| m.need.option == "X86_IOPL_IOPERM"));
        // PSCI power-off: without POWER_RESET QEMU never exits.
        let no_reset = GOOD_ARM64.replace("CONFIG_POWER_RESET=y\n", "");
        let m = missing_for(Arch::Arm64, &no_reset, 1, 1);
        assert_eq!(m.len(), 1);
        assert_eq!(m[0].fix(), "CONFIG_POWER_RESET=y");
        // Nodes from the device tree only matter with more than one node.
        let no_of_numa = GOOD_ARM64.replace("CONFIG_OF_NUMA=y\n", "");
        assert!(missing_for(Arch::Arm64, &no_of_numa, 1, 2).is_empty());
        assert_eq!(
            missing_for(Arch::Arm64, &no_of_numa, 2, 2)[0].need.option,
            "OF_NUMA"
        );
    }

    /// An arm64 `Image`: the header's magic at 0x38, then the kernel.
    fn arm64_image(body: &[u8]) -> Vec<u8> {
        let mut image = vec![0u8; 0x40];
        image[0x38..0x3c].copy_from_slice(b"ARM\x64");
        image.extend(body);
        image
    }

    #[test]
    fn an_arm64_image_is_checked_as_arm64_with_its_tree_config() {
        let d = tempfile::tempdir().unwrap();
        let boot = d.path().join("arch/arm64/boot");
        std::fs::create_dir_all(&boot).unwrap();
        let image = boot.join("Image");
        std::fs::write(&image, arm64_image(b"kernel")).unwrap();
        assert_eq!(image_arch(&image), Arch::Arm64);
        // No config anywhere: boots with a note.
        assert!(check(&image, 2, 4).unwrap().is_some());
        // The build tree's .config, four levels up.
        std::fs::write(d.path().join(".config"), GOOD_ARM64).unwrap();
        assert_eq!(check(&image, 2, 4).unwrap(), None);
        let e = check_for(&image, Arch::X86_64, 1, 1).unwrap_err();
        assert_eq!(e.arch, Arch::X86_64);
        std::fs::write(d.path().join(".config"), GOOD).unwrap();
        let e = check(&image, 1, 1).unwrap_err();
        assert_eq!(e.arch, Arch::Arm64);
        assert!(e.to_string().contains("an arm64 guest"), "{e}");
        assert!(e.to_string().contains("CONFIG_SERIAL_AMBA_PL011=y"), "{e}");
        // A bzImage and anything unreadable or unknown: x86-64.
        let mut bz = vec![0u8; 0x300];
        bz[0x202..0x206].copy_from_slice(b"HdrS");
        std::fs::write(d.path().join("bzImage"), bz).unwrap();
        assert_eq!(image_arch(&d.path().join("bzImage")), Arch::X86_64);
        assert_eq!(image_arch(&d.path().join("none")), Arch::X86_64);
    }

    #[test]
    fn the_embedded_config_of_an_uncompressed_arm64_image_is_found() {
        let gz = |b: &[u8]| {
            let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
            e.write_all(b).unwrap();
            e.finish().unwrap()
        };
        let mut kernel = b"text ".to_vec();
        kernel.extend(b"IKCFG_ST");
        kernel.extend(gz(GOOD_ARM64.as_bytes()));
        kernel.extend(b"IKCFG_ED");
        assert_eq!(
            embedded_config(&arm64_image(&kernel)).as_deref(),
            Some(GOOD_ARM64)
        );
    }

    #[test]
    fn the_embedded_config_is_found_in_a_gzip_payload() {
        let gz = |b: &[u8]| {
            let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
            e.write_all(b).unwrap();
            e.finish().unwrap()
        };
        let mut kernel = b"\x7fELF kernel text ".to_vec();
        kernel.extend(b"IKCFG_ST");
        kernel.extend(gz(GOOD.as_bytes()));
        kernel.extend(b"IKCFG_ED more text");
        let mut image = vec![0u8; 0x4000];
        image.extend(gz(&kernel));
        image.extend([0u8; 64]);
        assert_eq!(embedded_config(&image).as_deref(), Some(GOOD));
        assert_eq!(embedded_config(&[0u8; 4096]), None);
    }
}

//! The pre-boot check of a `path:` kernel: read its configuration (the
//! `.config` beside the image, or the `IKCONFIG` blob embedded in a
//! gzip-compressed bzImage) and refuse to boot, naming each missing option
//! and the fragment line that fixes it, when the guest cannot work — rather
//! than finding out after the boot (without `X86_IOPL_IOPERM` guest-init
//! cannot end QEMU through isa-debug-exit; without `ACPI_NUMA` a two-node
//! guest sees one node).
//!
//! Architecture invariant: pure apart from reading the image and its
//! config; it knows what guest-init and the suites need, not how to build.

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

/// What every guest needs.
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

/// What a guest of more than one node needs.
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

/// What a guest of more than one vCPU needs.
pub const MULTI_CPU: &[Need] = &[y("SMP", "more than one vCPU")];

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

/// The needs of a guest of `nodes` nodes and `cpus` vCPUs that `config`
/// does not meet (pure).
pub fn missing(config: &str, nodes: usize, cpus: u32) -> Vec<Missing> {
    let mut needs: Vec<Need> = GUEST.to_vec();
    if nodes > 1 {
        needs.extend_from_slice(MULTI_NODE);
    }
    if cpus > 1 {
        needs.extend_from_slice(MULTI_CPU);
    }
    needs
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
/// tree's `.config` for `<tree>/arch/x86/boot/bzImage`), else the
/// `IKCONFIG` blob inside a gzip-compressed kernel.
pub fn find_config(image: &Path) -> Option<Config> {
    if let Some(p) = crate::kernel::virtiofs::config_beside(image) {
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

/// Largest decompressed kernel we look into (a bound on hostile images).
const MAX_KERNEL: u64 = 256 << 20;

/// The `IKCONFIG` blob (`IKCFG_ST` gzip `IKCFG_ED`) of a bzImage whose
/// payload is gzip-compressed, as `scripts/extract-ikconfig` finds it.
pub fn embedded_config(image: &[u8]) -> Option<String> {
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
#[error("kernel {}: its configuration ({config}) lacks what the guest needs for {nodes} node(s) x {cpus} vCPU(s); add to the fragment:\n{}", image.display(), lines(missing))]
pub struct Refused {
    /// The image.
    pub image: PathBuf,
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

/// Checks an image for a topology: `Ok(None)` when its config meets every
/// need, `Ok(Some(note))` when no config was found (boots, with the note),
/// `Err` with every missing option otherwise.
pub fn check(image: &Path, nodes: usize, cpus: u32) -> Result<Option<String>, Refused> {
    let Some(cfg) = find_config(image) else {
        return Ok(Some(format!(
            "no .config beside {} and no IKCONFIG in it: booting without the pre-boot check",
            image.display()
        )));
    };
    let missing = missing(&cfg.text, nodes, cpus);
    if missing.is_empty() {
        Ok(None)
    } else {
        Err(Refused {
            image: image.to_path_buf(),
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

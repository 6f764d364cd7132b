//! The guest architecture: one value that says which QEMU, which Debian
//! kernel flavour, which Rust target and which kernel image a cell uses.
//! A property of the resolved kernel and of the guest binaries, never a
//! second path through the planner: every per-architecture fact the
//! harness knows is a method here.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// A guest architecture (`--arch`, a kernel's `arch:`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Arch {
    /// x86-64: QEMU's `pc` machine.
    #[serde(rename = "x86_64")]
    X86_64,
    /// 64-bit Arm: QEMU's `virt` machine with GICv3.
    Arm64,
}

/// Every architecture, in the order listings show them.
pub const ALL: [Arch; 2] = [Arch::X86_64, Arch::Arm64];

impl Arch {
    /// The name on the command line, in `matrix.yaml` and in reports
    /// (`x86_64`, `arm64`: the kernel's `ARCH=` names, but x86-64 keeps
    /// `uname -m`'s spelling, which KCIDB uses too).
    pub fn name(self) -> &'static str {
        match self {
            Arch::X86_64 => "x86_64",
            Arch::Arm64 => "arm64",
        }
    }

    /// What `uname -m` prints in the guest.
    pub fn uname_machine(self) -> &'static str {
        match self {
            Arch::X86_64 => "x86_64",
            Arch::Arm64 => "aarch64",
        }
    }

    /// The architecture this harness runs on, when it is one of ours.
    pub fn host() -> Option<Arch> {
        match std::env::consts::ARCH {
            "x86_64" => Some(Arch::X86_64),
            "aarch64" => Some(Arch::Arm64),
            _ => None,
        }
    }

    /// The default `--arch`: the host's, else x86-64.
    pub fn host_or_default() -> Arch {
        Arch::host().unwrap_or(Arch::X86_64)
    }

    /// Debian's architecture name (`amd64`, `arm64`).
    pub fn debian(self) -> &'static str {
        match self {
            Arch::X86_64 => "amd64",
            Arch::Arm64 => "arm64",
        }
    }

    /// The Debian kernel flavour used (`cloud-amd64`, `cloud-arm64`).
    pub fn debian_flavour(self) -> &'static str {
        match self {
            Arch::X86_64 => "cloud-amd64",
            Arch::Arm64 => "cloud-arm64",
        }
    }

    /// The QEMU system emulator.
    pub fn qemu_binary(self) -> &'static str {
        match self {
            Arch::X86_64 => "qemu-system-x86_64",
            Arch::Arm64 => "qemu-system-aarch64",
        }
    }

    /// The Debian package holding [`Arch::qemu_binary`].
    pub fn qemu_package(self) -> &'static str {
        match self {
            Arch::X86_64 => "qemu-system-x86",
            Arch::Arm64 => "qemu-system-arm",
        }
    }

    /// The Rust target the guest binaries are built for.
    pub fn rust_target(self) -> &'static str {
        match self {
            Arch::X86_64 => "x86_64-unknown-linux-gnu",
            Arch::Arm64 => "aarch64-unknown-linux-gnu",
        }
    }

    /// The kernel's `ARCH=` (`x86`, `arm64`).
    pub fn kbuild_arch(self) -> &'static str {
        match self {
            Arch::X86_64 => "x86",
            Arch::Arm64 => "arm64",
        }
    }

    /// The bootable image below a build's output directory.
    pub fn kernel_image(self) -> &'static str {
        match self {
            Arch::X86_64 => "arch/x86/boot/bzImage",
            Arch::Arm64 => "arch/arm64/boot/Image",
        }
    }

    /// The ELF `e_machine` of its binaries.
    pub fn elf_machine(self) -> u16 {
        match self {
            Arch::X86_64 => object::elf::EM_X86_64,
            Arch::Arm64 => object::elf::EM_AARCH64,
        }
    }

    /// The kernel's console device.
    pub fn console_device(self) -> &'static str {
        match self {
            Arch::X86_64 => "ttyS0",
            Arch::Arm64 => "ttyAMA0",
        }
    }

    /// The architecture of a kernel image from its header: an x86 bzImage
    /// (`HdrS` at 0x202) or an arm64 `Image` (`ARM\x64` at 0x38). `None`
    /// for anything else (a compressed or unknown image).
    pub fn of_kernel_image(head: &[u8]) -> Option<Arch> {
        if head.get(0x202..0x206) == Some(b"HdrS") {
            Some(Arch::X86_64)
        } else if head.get(0x38..0x3c) == Some(b"ARM\x64") {
            Some(Arch::Arm64)
        } else {
            None
        }
    }
}

impl fmt::Display for Arch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// An architecture name that is not one of ours.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown architecture {0:?}: expected x86_64 or arm64")]
pub struct UnknownArch(pub String);

impl FromStr for Arch {
    type Err = UnknownArch;

    /// `x86_64`/`amd64`/`x86-64` and `arm64`/`aarch64`.
    fn from_str(s: &str) -> Result<Arch, UnknownArch> {
        match s {
            "x86_64" | "x86-64" | "amd64" => Ok(Arch::X86_64),
            "arm64" | "aarch64" => Ok(Arch::Arm64),
            _ => Err(UnknownArch(s.to_string())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_back() {
        for a in ALL {
            assert_eq!(a.name().parse::<Arch>(), Ok(a));
            assert_eq!(a.uname_machine().parse::<Arch>(), Ok(a));
            assert_eq!(a.debian().parse::<Arch>(), Ok(a));
        }
        let e = "riscv64".parse::<Arch>().unwrap_err().to_string();
        assert_eq!(
            e,
            "unknown architecture \"riscv64\": expected x86_64 or arm64"
        );
    }

    #[test]
    fn serde_uses_the_command_line_names() {
        assert_eq!(serde_json::to_string(&Arch::Arm64).unwrap(), "\"arm64\"");
        assert_eq!(serde_json::to_string(&Arch::X86_64).unwrap(), "\"x86_64\"");
    }

    #[test]
    fn kernel_images_are_told_apart_by_their_headers() {
        let mut bz = vec![0u8; 0x300];
        bz[0x202..0x206].copy_from_slice(b"HdrS");
        assert_eq!(Arch::of_kernel_image(&bz), Some(Arch::X86_64));
        let mut image = vec![0u8; 0x40];
        image[0x38..0x3c].copy_from_slice(b"ARM\x64");
        assert_eq!(Arch::of_kernel_image(&image), Some(Arch::Arm64));
        assert_eq!(Arch::of_kernel_image(b"\x1f\x8b\x08"), None);
    }
}

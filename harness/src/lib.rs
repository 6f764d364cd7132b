//! Host orchestrator: boots kernels under QEMU in declared NUMA topologies,
//! runs KTAP-speaking guest binaries from an initramfs, and turns what
//! happens into JUnit. See ARCHITECTURE.md for the map.
#![deny(missing_docs)]

pub mod console;
pub mod junit;
pub mod kernel;
pub mod ktap;
pub mod result;
pub mod verdict;

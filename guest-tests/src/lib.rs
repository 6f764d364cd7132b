//! Guest side of the harness.
//!
//! Everything here runs inside the VM, as PID 1 (`guest-init`) or as one of
//! its children (the test binaries). Binaries are built static
//! (`-C target-feature=+crt-static`) so any kernel with an initramfs boots
//! them. The host-guest contract lives in [`plan`] (run plan in) and
//! [`ktap`] (results out); the harness crate uses the same code to encode the
//! plan, so both ends are tested together.
#![deny(missing_docs)]

pub mod artifact;
pub mod bench;
pub mod binaries;
pub mod cases;
pub mod clock;
pub mod cpulist;
pub mod expect;
pub mod hash;
pub mod init;
pub mod ktap;
pub mod mapping;
pub mod numa;
pub mod ops;
pub mod plan;
pub mod race;
pub mod sys;
pub mod topology;

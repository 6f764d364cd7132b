//! The core of `guest-init` that does not need to be PID 1.
//!
//! [`lines`] and [`report`] are pure (line splitting, sanitizing, KTAP
//! detection, result lines); [`runner`] spawns each planned binary in its own
//! process group, forwards its output live and judges its ending; [`stuck`]
//! says what a child that outlived its SIGKILL is doing. The binary
//! `guest-init` adds only what needs PID 1 (mounts, the results port, ending
//! the VM), so everything here is tested on the host with real processes;
//! [`shell`] (busybox's links, debugfs, the interactive shell) only in a VM.
//!
//! Architecture invariant: nothing in this module mounts, reboots, touches
//! I/O ports or reaps processes it did not start (unless asked to through
//! [`runner::Options::reap_orphans`]); the one exception is [`modules`]
//! (kernel modules and virtiofs mounts of the plan) and [`shell`], which
//! only guest-init calls.

pub mod lines;
pub mod modules;
pub mod report;
pub mod runner;
pub mod shell;
pub mod stuck;

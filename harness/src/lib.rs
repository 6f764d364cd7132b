//! Host orchestrator: boots kernels under QEMU in declared NUMA topologies,
//! runs KTAP-speaking guest binaries from an initramfs, and turns what
//! happens into JUnit. See ARCHITECTURE.md for the map.
#![deny(missing_docs)]

pub mod arch;
pub mod args;
pub mod bench;
pub mod bisect;
pub mod busybox;
pub mod cases;
pub mod cell;
pub mod compare;
pub mod console;
pub mod console_bridge;
pub mod costs;
pub mod debug;
pub mod doctor;
pub mod dry_run;
pub mod error;
pub mod events;
pub mod fill;
pub mod fuzz;
pub mod glob;
pub mod guestbin;
pub mod history;
pub mod host;
pub mod hostload;
pub mod initramfs;
pub mod junit;
pub mod kernel;
pub mod known;
pub mod outputs;
pub use kernel::spec as kernelspec;
pub mod kselftest;
pub mod ktap;
pub mod matrix;
pub mod planner;
pub mod prepare;
pub mod procs;
pub mod profile;
pub mod qemu;
pub mod repeat;
pub mod reporter;
pub mod result;
pub mod results;
pub mod run;
pub mod runner;
pub mod sched_class;
pub mod schedule;
pub mod setup;
pub mod share;
pub mod shared_boot;
pub mod signals;
pub mod suite;
pub mod topology;
pub mod verdict;
pub mod vm;

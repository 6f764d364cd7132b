//! Kernel images: where a bootable bzImage comes from.

pub mod apt;
pub mod cache;
pub mod deb;
pub mod debian;
pub mod modules;

//! Kernel images: where a bootable bzImage comes from.

pub mod archive;
pub mod build;
pub mod cache;
pub mod config;
pub mod deb;
pub mod debian;
pub mod definition;
pub mod embedded;
pub mod lpj;
pub mod modules;
pub mod patch;
pub mod preboot;
pub mod pvh;
pub mod source;
pub mod spec;
pub mod tree;
pub mod tsc;
pub mod virtiofs;

// The apt format parsers are part of the archive client; the old path stays.
pub use archive::apt;

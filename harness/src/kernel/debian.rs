//! Debian prebuilt kernels.

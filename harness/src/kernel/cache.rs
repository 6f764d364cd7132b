//! The XDG cache: atomic writes, file locks.

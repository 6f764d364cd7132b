//! The Debian archive client. For now only its parsers of apt's formats.

pub mod apt;

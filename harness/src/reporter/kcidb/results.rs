//! The JSON results file as the KCIDB converter reads it: the one model,
//! [`crate::results`], whose readers accept a file written before a field
//! existed (with less in the document). The `--kcidb` reporter reads its
//! cells through the same types, so a run's document and a later
//! `harness report kcidb` of its `--json` file are the same.

pub use crate::results::{
    Bench, Case, Cell, KernelReport, KnownFailureRef, Layout, Node, Results, Run, Vm,
};

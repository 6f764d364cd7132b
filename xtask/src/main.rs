//! `cargo xtask <command>`: project automation (rust-analyzer's convention).
//!
//! - `ci`: what CI runs: rustfmt check, clippy with warnings as errors,
//!   every test including the real-VM ones (`HARNESS_VM_TESTS=1`).
//! - `matrix [ARGS]`: runs `matrix.yaml` (`harness matrix ARGS`, release build).
//! - `test`: the quick tier (no VMs).
//! - `bench-boot`, `bench-peers`: time-to-result against a bare QEMU boot
//!   and against virtme-ng / vmtest (see docs/bench.md).
//! - `bench-matrix [--runs N] [--jobs 1,2] [-- SELECTION]`: matrix cells in
//!   parallel against one at a time (see docs/matrix.md).
//! - `bench-repeat [--times N] [--test GLOB]`: `harness run --repeat N`
//!   against N separate runs of the same case.
//! - `fuzz [--seconds N] [--seed S]`: mutation fuzzing of the KTAP parser and
//!   console scanner on stable Rust (corpus in `harness/tests/fuzz-corpus`).
//! - `soak --minutes M [--matrix FILE]`: a matrix again and again; counts
//!   flaky cases.
//! - `results-schema`: writes `docs/results.schema.json` from the results
//!   model (`harness::results`).
//! - `replay [--only NN,...] [--topology T,...] [--json FILE] [--list]
//!   [--dry-run] [--keep-work]`: the futex suite against the upstream futex bugs of
//!   `kernels/replay/`, each reverted on 7.3 (docs/replay.md).

use anyhow::{bail, Result};
use xshell::{cmd, Shell};

mod bench;
mod bench_matrix;
mod bench_repeat;
mod bench_wedge;
mod ci;
mod fuzz;
mod matrix;
mod replay;
mod results_schema;
mod soak;

fn main() -> Result<()> {
    let sh = Shell::new()?;
    sh.change_dir(project_root());
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("ci") => ci::run(&sh),
        Some("matrix") => matrix::run(&sh, &args[1..]),
        Some("fuzz") => fuzz::run(&sh, &project_root(), &args[1..]),
        Some("fuzz-loop") => fuzz::fuzz_loop(&project_root(), &args[1..]),
        Some("soak") => soak::run(&sh, &project_root(), &args[1..]),
        Some("test") => {
            cmd!(sh, "cargo test --workspace").run()?;
            Ok(())
        }
        Some(c @ ("bench-boot" | "bench-peers")) => bench::run(&sh, c, &args[1..]),
        Some("bench-matrix") => bench_matrix::run(&sh, &args[1..]),
        Some("bench-repeat") => bench_repeat::run(&sh, &args[1..]),
        Some("bench-wedge") => bench_wedge::run(&sh, &args[1..]),
        Some("results-schema") => results_schema::run(&project_root()),
        Some("replay") => {
            let code = replay::run(&sh, &project_root(), &args[1..])?;
            std::process::exit(code)
        }
        Some(other) => bail!(
            "unknown xtask {other:?}; known: ci, matrix, test, fuzz, soak, bench-boot, bench-peers, bench-matrix, bench-repeat, bench-wedge, results-schema, replay"
        ),
        None => bail!("usage: cargo xtask <ci|matrix|test|fuzz|soak|bench-boot|bench-peers|bench-matrix|bench-repeat|bench-wedge|results-schema|replay>"),
    }
}

fn project_root() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(std::path::Path::to_path_buf)
        .unwrap_or_default()
}

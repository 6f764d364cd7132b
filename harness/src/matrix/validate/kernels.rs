//! `kernels:`: names, specs, and the features each kernel is expected to
//! have (the spec's version row with the given features over it).

use super::{Ctx, Declared};
use crate::kernelspec::KernelSpec;
use crate::matrix::model::Kernel;
use crate::matrix::schema::{RawGrowth, RawKernel};
use crate::matrix::MatrixError;
use guest_tests::expect::{Expect, Growth};

/// Validates the `kernels:` list: at least one, names unique.
pub(in crate::matrix) fn kernels(
    cx: &Ctx,
    raw: Vec<RawKernel>,
) -> Result<Vec<Kernel>, MatrixError> {
    let mut kernels = Vec::new();
    let mut declared = Declared::new("kernels", "kernel");
    declared.at_least_one(cx, &raw)?;
    for k in raw {
        declared.add(cx, &k.name)?;
        kernels.push(kernel(cx, k)?);
    }
    Ok(kernels)
}

fn kernel(cx: &Ctx, k: RawKernel) -> Result<Kernel, MatrixError> {
    let at_spec = |e: &dyn std::fmt::Display| {
        cx.at_item(
            "kernels",
            &k.name,
            Some("spec"),
            format!("kernel {:?}: {e}", k.name),
        )
    };
    let spec = KernelSpec::parse(&k.spec).map_err(|e| at_spec(&e))?;
    let expect = expectations(cx, &k, &spec)?;
    // Resolved as far as it can be without work: a `source:` definition
    // loads, a `path:` is a bzImage, a `tree:` is a kernel tree; else a CI
    // plan (`--list`) would pass and every shard fail.
    crate::planner::check_kernel(&spec).map_err(|e| at_spec(&e))?;
    let arch = match k.arch.as_deref() {
        None => crate::arch::Arch::X86_64,
        Some(a) => a.parse().map_err(|e: crate::arch::UnknownArch| {
            cx.at_item(
                "kernels",
                &k.name,
                Some("arch"),
                format!("kernel {:?}: {e}", k.name),
            )
        })?,
    };
    Ok(Kernel {
        name: k.name,
        spec_text: k.spec,
        spec,
        arch,
        expect,
    })
}

/// The version's row of `Expect` with the given features over it.
fn expectations(cx: &Ctx, k: &RawKernel, spec: &KernelSpec) -> Result<Expect, MatrixError> {
    let f = &k.features;
    let base = spec.version().map(Expect::for_release);
    let missing: Vec<&str> = [
        ("prctl", f.prctl.is_none()),
        ("private_hash", f.private_hash.is_none()),
        ("immutable", f.immutable.is_none()),
        ("numa", f.numa.is_none()),
        ("mpol", f.mpol.is_none()),
        ("growth", f.growth.is_none()),
        ("requeue_same_flags", f.requeue_same_flags.is_none()),
        ("robust_pending_owned", f.robust_pending_owned.is_none()),
    ]
    .into_iter()
    .filter(|(_, m)| *m)
    .map(|(n, _)| n)
    .collect();
    let base = match base {
        Some(b) => b,
        None if missing.is_empty() => Expect::for_release("0"),
        None => {
            return Err(cx.at_item(
                "kernels",
                &k.name,
                Some("spec"),
                format!(
                    "kernel {:?}: spec {:?} names no version, so features must give {}",
                    k.name,
                    k.spec,
                    missing.join(", ")
                ),
            ))
        }
    };
    // Given features over the version's row, in dependency order so
    // that `prctl: false` alone also means no private hash (see
    // `Expect::apply`); a dependent given back on is an error at it.
    let b = |v: Option<bool>| v.map(|v| if v { "1" } else { "0" });
    let given = [
        ("prctl", b(f.prctl)),
        ("private_hash", b(f.private_hash)),
        ("immutable", b(f.immutable)),
        ("numa", b(f.numa)),
        ("mpol", b(f.mpol)),
        ("growth", f.growth.map(|g| growth(g).name())),
        ("requeue_same_flags", b(f.requeue_same_flags)),
        ("robust_pending_owned", b(f.robust_pending_owned)),
    ];
    let mut expect = base;
    for (key, value) in given.iter().filter_map(|(k, v)| Some((*k, (*v)?))) {
        expect
            .set(key, value)
            .map_err(|m| cx.at_item("kernels", &k.name, Some(key), m))?;
    }
    // The version the row was written for, which
    // `futex-prctl/kernel-version-matches` checks the booted kernel against.
    if let Some(v) = spec.version() {
        let _ = expect.set("version", v);
    }
    if let Some(c) = expect.contradiction() {
        // The key of a contradiction is the one expected on.
        let value = if c.key == "growth" {
            expect.growth.name()
        } else {
            "true"
        };
        return Err(cx.at_item(
            "kernels",
            &k.name,
            Some(c.key),
            format!(
                "kernel {:?}: {}: {value} needs {}: true",
                k.name, c.key, c.needs
            ),
        ));
    }
    Ok(expect)
}

fn growth(g: RawGrowth) -> Growth {
    match g {
        RawGrowth::None => Growth::None,
        RawGrowth::Thread => Growth::Thread,
        RawGrowth::VmNotVfork => Growth::VmNotVfork,
        RawGrowth::AnyVm => Growth::AnyVm,
    }
}

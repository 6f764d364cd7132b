//! Kernel modules and virtiofs shares of the run plan: loaded and mounted
//! by guest-init before the first test.
//!
//! Modules are uncompressed `.ko` files (the host decompresses them, so the
//! guest kernel needs no `CONFIG_MODULE_DECOMPRESS`) loaded in the plan's
//! order with `finit_module(2)` (`init_module(2)` where that is missing);
//! no modprobe, no modules.dep in the guest. `EEXIST` (already loaded or
//! built in) is success.
//!
//! The only part of [`crate::init`] that changes the system (loads modules,
//! mounts): only guest-init calls [`setup`].

use crate::plan::{PlannedShare, RunPlan};
use std::ffi::CString;
use std::io;
use std::os::fd::AsRawFd;

/// How loading one module went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Loaded {
    /// The kernel took it.
    Loaded,
    /// It was already there (`EEXIST`).
    AlreadyThere,
}

/// Loads one uncompressed module file.
pub fn load_module(path: &str) -> Result<Loaded, String> {
    let f = std::fs::File::open(path).map_err(|e| format!("open {path}: {e}"))?;
    let params = c"";
    // SAFETY: a plain syscall on an open fd and a NUL-terminated string.
    let r = unsafe {
        libc::syscall(
            libc::SYS_finit_module,
            f.as_raw_fd(),
            params.as_ptr(),
            0 as libc::c_int,
        )
    };
    let err = if r == 0 {
        return Ok(Loaded::Loaded);
    } else {
        io::Error::last_os_error()
    };
    let err = if err.raw_os_error() == Some(libc::ENOSYS) {
        let image = std::fs::read(path).map_err(|e| format!("read {path}: {e}"))?;
        // SAFETY: image is a live buffer of image.len() bytes.
        let r = unsafe {
            libc::syscall(
                libc::SYS_init_module,
                image.as_ptr(),
                image.len() as libc::c_ulong,
                params.as_ptr(),
            )
        };
        if r == 0 {
            return Ok(Loaded::Loaded);
        }
        io::Error::last_os_error()
    } else {
        err
    };
    if err.raw_os_error() == Some(libc::EEXIST) {
        return Ok(Loaded::AlreadyThere);
    }
    Err(format!("load module {path}: {err}"))
}

/// Mount flags of a share.
pub fn mount_flags(share: &PlannedShare) -> libc::c_ulong {
    let mut f = libc::MS_NOSUID | libc::MS_NODEV;
    if share.read_only {
        f |= libc::MS_RDONLY;
    }
    f
}

/// `mount -t virtiofs TAG PATH` (creating PATH).
pub fn mount_share(share: &PlannedShare) -> Result<(), String> {
    let what = format!("mount -t virtiofs {} {}", share.tag, share.path);
    std::fs::create_dir_all(&share.path).map_err(|e| format!("{what}: mkdir: {e}"))?;
    let cstr = |s: &str| CString::new(s).map_err(|e| format!("{what}: {e}"));
    let (src, target, fstype, data) = (
        cstr(&share.tag)?,
        cstr(&share.path)?,
        cstr("virtiofs")?,
        cstr("")?,
    );
    // SAFETY: all pointers are live NUL-terminated strings.
    let r = unsafe {
        libc::mount(
            src.as_ptr(),
            target.as_ptr(),
            fstype.as_ptr(),
            mount_flags(share),
            data.as_ptr().cast(),
        )
    };
    if r != 0 {
        let e = io::Error::last_os_error();
        let hint = if e.raw_os_error() == Some(libc::ENODEV) {
            " (no virtiofs in this kernel: CONFIG_VIRTIO_FS)"
        } else if e.raw_os_error() == Some(libc::ENOENT) {
            " (no device with that tag: CONFIG_VIRTIO_PCI, or the daemon is gone)"
        } else {
            ""
        };
        return Err(format!("{what}: {e}{hint}"));
    }
    Ok(())
}

/// The log line for a share that could not be mounted (the host looks for
/// it on the console: see `harness::share`).
pub fn not_mounted_line(share: &PlannedShare, why: &str) -> String {
    format!("share {} not mounted: {why}", share.tag)
}

/// Loads the plan's modules and mounts its shares, logging each step.
/// Module failures are logged (a share that needs the module then fails to
/// mount with its own error). Errors only for a required share.
pub fn setup(plan: &RunPlan, log: &mut dyn FnMut(&str)) -> Result<(), String> {
    let mut module_errors = Vec::new();
    for m in &plan.modules {
        match load_module(m) {
            Ok(Loaded::Loaded) => log(&format!("module {m} loaded")),
            Ok(Loaded::AlreadyThere) => log(&format!("module {m} already loaded")),
            Err(e) => {
                log(&e);
                module_errors.push(e);
            }
        }
    }
    for s in &plan.shares {
        match mount_share(s) {
            Ok(()) => log(&format!(
                "share {} mounted on {}{}",
                s.tag,
                s.path,
                if s.read_only { " (read-only)" } else { "" }
            )),
            Err(e) => {
                let why = if module_errors.is_empty() {
                    e
                } else {
                    format!("{e}; after: {}", module_errors.join("; "))
                };
                log(&not_mounted_line(s, &why));
                if s.required {
                    return Err(why);
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn share(ro: bool) -> PlannedShare {
        PlannedShare {
            tag: "t".into(),
            path: "/nonexistent-harness-test/x".into(),
            read_only: ro,
            required: false,
        }
    }

    #[test]
    fn read_only_shares_mount_read_only() {
        assert_ne!(mount_flags(&share(true)) & libc::MS_RDONLY, 0);
        assert_eq!(mount_flags(&share(false)) & libc::MS_RDONLY, 0);
    }

    #[test]
    fn a_missing_module_file_is_named() {
        let e = load_module("/nonexistent/fuse.ko").unwrap_err();
        assert!(e.contains("/nonexistent/fuse.ko"), "{e}");
    }

    #[test]
    fn optional_failures_are_logged_required_ones_fail() {
        let dir = tempfile_dir();
        let mut s = share(false);
        s.tag = "harness-test-no-such-tag".into();
        s.path = format!("{dir}/mnt");
        let mut plan = RunPlan {
            modules: vec!["/nonexistent/virtiofs.ko".into()],
            shares: vec![s],
            ..RunPlan::default()
        };
        let mut lines = Vec::new();
        setup(&plan, &mut |l| lines.push(l.to_string())).unwrap();
        assert!(lines[0].contains("/nonexistent/virtiofs.ko"), "{lines:?}");
        assert!(
            lines[1].starts_with("share harness-test-no-such-tag not mounted: ")
                && lines[1].contains("; after: open /nonexistent/virtiofs.ko"),
            "{lines:?}"
        );
        plan.shares[0].required = true;
        let e = setup(&plan, &mut |_| {}).unwrap_err();
        assert!(
            e.contains("mount -t virtiofs harness-test-no-such-tag"),
            "{e}"
        );
        let _ = std::fs::remove_dir_all(dir);
    }

    fn tempfile_dir() -> String {
        let d = std::env::temp_dir().join(format!("guest-modules-test-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        d.to_string_lossy().into_owned()
    }
}

//! Memory mappings for futex words: one `mmap` that is `munmap`ped on drop
//! (or leaked on purpose when waiter threads may outlive its owner), used by
//! the classic, private-hash, NUMA and upstream-gap tests alike.

use std::io;
use std::sync::atomic::AtomicU32;

/// One `mmap` of `len` bytes, unmapped on drop.
pub struct Mapping {
    addr: *mut u8,
    len: usize,
}

// SAFETY: the mapping is plain memory; threads access it only through
// atomics and syscalls.
unsafe impl Send for Mapping {}
// SAFETY: as above.
unsafe impl Sync for Mapping {}

impl Mapping {
    /// `mmap(NULL, len, prot, flags, fd, 0)`; the error is the call's errno.
    pub fn new(len: usize, prot: i32, flags: i32, fd: i32) -> io::Result<Mapping> {
        // SAFETY: a fresh mapping at an address the kernel picks; no
        // existing memory is touched.
        let p = unsafe { libc::mmap(std::ptr::null_mut(), len, prot, flags, fd, 0) };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Mapping {
            addr: p as *mut u8,
            len,
        })
    }

    /// `len` bytes of zeroed anonymous memory, private or `MAP_SHARED`
    /// (shared survives fork as memory both processes see).
    pub fn anon(len: usize, prot: i32, shared: bool) -> io::Result<Mapping> {
        let kind = if shared {
            libc::MAP_SHARED
        } else {
            libc::MAP_PRIVATE
        };
        Mapping::new(len, prot, kind | libc::MAP_ANONYMOUS, -1)
    }

    /// Never unmapped: for words that waiter threads may still hold when
    /// the case's process exits.
    pub fn leak(self) -> &'static Mapping {
        Box::leak(Box::new(self))
    }

    /// Start address.
    pub fn addr(&self) -> *mut u8 {
        self.addr
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Always false (`mmap` refuses a length of 0).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The u32 at byte offset `off` (4-aligned; readable when used).
    pub fn word(&self, off: usize) -> &AtomicU32 {
        assert!(off & 3 == 0 && off + 4 <= self.len);
        // SAFETY: in bounds, aligned, and the mapping outlives the borrow;
        // AtomicU32 has u32 layout.
        unsafe { &*(self.addr.add(off) as *const AtomicU32) }
    }

    /// `mprotect` of `len` bytes at byte offset `off`.
    pub fn protect(&self, off: usize, len: usize, prot: i32) -> io::Result<()> {
        assert!(off + len <= self.len);
        // SAFETY: the range lies inside our own mapping.
        let r = unsafe { libc::mprotect(self.addr.add(off) as *mut _, len, prot) };
        if r != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: we own the mapping.
        unsafe { libc::munmap(self.addr as *mut _, self.len) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::Ordering;

    #[test]
    fn words_and_protection() {
        let rw = libc::PROT_READ | libc::PROT_WRITE;
        let m = Mapping::anon(4096, rw, false).unwrap();
        assert_eq!(m.word(8).load(Ordering::SeqCst), 0);
        m.word(8).store(7, Ordering::SeqCst);
        assert_eq!(m.word(8).load(Ordering::SeqCst), 7);
        m.protect(0, 4096, libc::PROT_READ).unwrap();
        assert_eq!(m.word(8).load(Ordering::SeqCst), 7);
        assert!(Mapping::anon(0, rw, true).is_err());
    }
}

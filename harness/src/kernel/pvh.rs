//! The uncompressed kernel inside a bzImage, booted through its PVH entry
//! point when it has one (QEMU's `-kernel` given an ELF).
//!
//! Why: a bzImage decompresses itself in the guest, and under TCG that is
//! emulated work at every boot. Measured on QEMU 10 under TCG, Debian's
//! 7.3.4 cloud kernel (zstd, 14 MB to 62 MB): 2.8 s from QEMU's start to a
//! kernel panic with no init as a bzImage, 1.85 s as the ELF. QEMU boots an
//! ELF kernel that has a PVH note (`XEN_ELFNOTE_PHYS32_ENTRY`, the kernel's
//! `CONFIG_PVH`) without the decompressor. The ELF is extracted on the
//! host once per image into `<cache>/pvh/<sha256 of the bzImage>/vmlinux`;
//! an image without the note, or compressed in a way not read here (gzip,
//! xz and zstd are), boots as the bzImage. PVH boots without KASLR.

use crate::kernel::cache::{sha256_file, Cache};
use object::read::elf::{ElfFile64, FileHeader, ProgramHeader};
use object::Endianness;
use std::collections::HashMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// The directory under the cache root.
pub const DIR: &str = "pvh";

/// The largest uncompressed kernel read (a bound on hostile images).
const MAX_KERNEL: u64 = 512 << 20;

/// `XEN_ELFNOTE_PHYS32_ENTRY`: the 32-bit PVH entry point.
const PHYS32_ENTRY: u32 = 18;

/// The compressed kernel of a bzImage, per its setup header (boot protocol
/// 2.08 or later: `payload_offset`, `payload_length`).
pub fn payload(image: &[u8]) -> Option<&[u8]> {
    if image.get(0x202..0x206)? != b"HdrS" {
        return None;
    }
    let le16 = |at: usize| Some(u16::from_le_bytes(image.get(at..at + 2)?.try_into().ok()?));
    let le32 = |at: usize| Some(u32::from_le_bytes(image.get(at..at + 4)?.try_into().ok()?));
    if le16(0x206)? < 0x208 {
        return None;
    }
    let setup_sects = match *image.get(0x1f1)? {
        0 => 4,
        n => n as usize,
    };
    let start = (setup_sects + 1) * 512 + le32(0x248)? as usize;
    image.get(start..start.checked_add(le32(0x24c)? as usize)?)
}

/// `payload` uncompressed (gzip, xz or zstd; `None` for anything else).
pub fn decompress(payload: &[u8]) -> Option<Vec<u8>> {
    let reader: Box<dyn Read + '_> = if payload.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
        Box::new(ruzstd::decoding::StreamingDecoder::new(payload).ok()?)
    } else if payload.starts_with(&[0x1f, 0x8b]) {
        Box::new(flate2::read::GzDecoder::new(payload))
    } else if payload.starts_with(&[0xfd, b'7', b'z', b'X', b'Z', 0]) {
        Box::new(liblzma::read::XzDecoder::new(payload))
    } else {
        return None;
    };
    let mut out = Vec::new();
    // The build appends the uncompressed size after the stream: a decoder
    // may complain about it after the whole kernel was read.
    let read = reader.take(MAX_KERNEL).read_to_end(&mut out);
    (read.is_ok() || has_pvh_note(&out)).then_some(out)
}

/// Whether `elf` is an x86-64 ELF kernel with a PVH entry note.
pub fn has_pvh_note(elf: &[u8]) -> bool {
    let Ok(file) = ElfFile64::<Endianness>::parse(elf) else {
        return false;
    };
    let endian = file.endian();
    if file.elf_header().e_machine(endian) != object::elf::EM_X86_64 {
        return false;
    }
    file.elf_program_headers().iter().any(|ph| {
        let Ok(Some(mut notes)) = ph.notes(endian, elf) else {
            return false;
        };
        while let Ok(Some(note)) = notes.next() {
            if note.name() == b"Xen" && note.n_type(endian) == PHYS32_ENTRY {
                return true;
            }
        }
        false
    })
}

/// The ELF of `image` in `cache` (extracted now if need be), or `None`
/// when it has no PVH entry (remembered with an empty `none` file).
pub fn extract(cache: &Cache, image: &Path) -> Option<PathBuf> {
    let dir = Path::new(DIR).join(sha256_file(image).ok()?);
    let elf = cache.path(dir.join("vmlinux"));
    if elf.is_file() {
        return Some(elf);
    }
    if cache.path(dir.join("none")).is_file() {
        return None;
    }
    let bytes = std::fs::read(image).ok()?;
    let kernel = payload(&bytes)
        .and_then(decompress)
        .filter(|k| has_pvh_note(k));
    let Some(kernel) = kernel else {
        let _ = cache.write_atomic(dir.join("none"), &mut std::io::empty());
        return None;
    };
    match cache.write_atomic(dir.join("vmlinux"), &mut kernel.as_slice()) {
        Ok(p) => Some(p),
        Err(e) => {
            tracing::debug!("pvh: {} not kept: {e}", image.display());
            None
        }
    }
}

static BOOT: Mutex<Option<HashMap<PathBuf, PathBuf>>> = Mutex::new(None);

/// What QEMU's `-kernel` gets for `image`: its PVH ELF (from the default
/// cache, looked up once per image and process), else `image` itself.
pub fn boot_image(image: &Path) -> PathBuf {
    let mut memo = BOOT.lock().unwrap_or_else(|p| p.into_inner());
    let memo = memo.get_or_insert_with(HashMap::new);
    if let Some(p) = memo.get(image) {
        return p.clone();
    }
    let chosen = Cache::from_env()
        .ok()
        .and_then(|c| extract(&c, image))
        .unwrap_or_else(|| image.to_path_buf());
    memo.insert(image.to_path_buf(), chosen.clone());
    chosen
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A minimal x86-64 ELF with one PT_NOTE holding `name`/`n_type`.
    fn elf_with_note(name: &[u8], n_type: u32) -> Vec<u8> {
        let mut note = Vec::new();
        note.extend_from_slice(&(name.len() as u32 + 1).to_le_bytes());
        note.extend_from_slice(&4u32.to_le_bytes());
        note.extend_from_slice(&n_type.to_le_bytes());
        note.extend_from_slice(name);
        note.push(0);
        while note.len() % 4 != 0 {
            note.push(0);
        }
        note.extend_from_slice(&0x0100_0000u32.to_le_bytes());
        let (ehsize, phsize) = (64usize, 56usize);
        let note_off = ehsize + phsize;
        let mut e = vec![0u8; note_off];
        e[..4].copy_from_slice(b"\x7fELF");
        e[4] = 2; // 64-bit
        e[5] = 1; // little endian
        e[6] = 1;
        e[16..18].copy_from_slice(&2u16.to_le_bytes()); // ET_EXEC
        e[18..20].copy_from_slice(&62u16.to_le_bytes()); // EM_X86_64
        e[20..24].copy_from_slice(&1u32.to_le_bytes());
        e[32..40].copy_from_slice(&(ehsize as u64).to_le_bytes()); // e_phoff
        e[52..54].copy_from_slice(&(ehsize as u16).to_le_bytes());
        e[54..56].copy_from_slice(&(phsize as u16).to_le_bytes());
        e[56..58].copy_from_slice(&1u16.to_le_bytes()); // e_phnum
        let ph = &mut e[ehsize..note_off];
        ph[..4].copy_from_slice(&4u32.to_le_bytes()); // PT_NOTE
        ph[8..16].copy_from_slice(&(note_off as u64).to_le_bytes());
        ph[32..40].copy_from_slice(&(note.len() as u64).to_le_bytes());
        ph[40..48].copy_from_slice(&(note.len() as u64).to_le_bytes());
        ph[48..56].copy_from_slice(&4u64.to_le_bytes());
        e.extend_from_slice(&note);
        e
    }

    /// A bzImage-shaped file: setup header, then `payload` at offset 0.
    fn bzimage(payload: &[u8]) -> Vec<u8> {
        let mut img = vec![0u8; 5 * 512];
        img[0x1f1] = 4;
        img[0x202..0x206].copy_from_slice(b"HdrS");
        img[0x206..0x208].copy_from_slice(&0x020fu16.to_le_bytes());
        img[0x248..0x24c].copy_from_slice(&0u32.to_le_bytes());
        img[0x24c..0x250].copy_from_slice(&(payload.len() as u32).to_le_bytes());
        img.extend_from_slice(payload);
        img.extend_from_slice(&[0xaa; 64]); // the rest of the image
        img
    }

    fn gzip(b: &[u8]) -> Vec<u8> {
        use std::io::Write;
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        e.write_all(b).unwrap();
        e.finish().unwrap()
    }

    #[test]
    fn the_note_is_found_only_with_its_name_and_type_on_x86_64() {
        assert!(has_pvh_note(&elf_with_note(b"Xen", PHYS32_ENTRY)));
        assert!(!has_pvh_note(&elf_with_note(b"Xen", 6)));
        assert!(!has_pvh_note(&elf_with_note(b"GNU", PHYS32_ENTRY)));
        let mut arm = elf_with_note(b"Xen", PHYS32_ENTRY);
        arm[18..20].copy_from_slice(&183u16.to_le_bytes()); // EM_AARCH64
        assert!(!has_pvh_note(&arm));
        assert!(!has_pvh_note(b"not an elf"));
    }

    #[test]
    fn the_payload_is_where_the_setup_header_says_and_decompresses() {
        let elf = elf_with_note(b"Xen", PHYS32_ENTRY);
        let z = gzip(&elf);
        let img = bzimage(&z);
        assert_eq!(payload(&img), Some(z.as_slice()));
        assert_eq!(decompress(payload(&img).unwrap()), Some(elf.clone()));
        let zst = ruzstd::encoding::compress_to_vec(
            elf.as_slice(),
            ruzstd::encoding::CompressionLevel::Fastest,
        );
        assert_eq!(decompress(&zst), Some(elf));
        // Not a bzImage, an old boot protocol, a truncated payload, an
        // unknown compression.
        assert_eq!(payload(b"short"), None);
        let mut old = img.clone();
        old[0x206..0x208].copy_from_slice(&0x0206u16.to_le_bytes());
        assert_eq!(payload(&old), None);
        assert_eq!(payload(&img[..img.len() - 64 - 10]), None);
        assert_eq!(decompress(b"BZh91AY&SY"), None);
    }

    #[test]
    fn extracted_once_into_the_cache_or_remembered_as_none() {
        let dir = tempfile::tempdir().unwrap();
        let cache = Cache::at(dir.path().join("cache"));
        let good = dir.path().join("good");
        std::fs::write(&good, bzimage(&gzip(&elf_with_note(b"Xen", PHYS32_ENTRY)))).unwrap();
        let elf = extract(&cache, &good).expect("has the note");
        assert!(has_pvh_note(&std::fs::read(&elf).unwrap()));
        assert_eq!(extract(&cache, &good), Some(elf), "from the cache");
        let plain = dir.path().join("plain");
        std::fs::write(&plain, bzimage(&gzip(&elf_with_note(b"GNU", 1)))).unwrap();
        assert_eq!(extract(&cache, &plain), None);
        let sha = sha256_file(&plain).unwrap();
        assert!(cache.path(Path::new(DIR).join(sha).join("none")).is_file());
        assert_eq!(extract(&cache, &dir.path().join("missing")), None);
    }
}

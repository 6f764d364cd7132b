//! Test support: a tiny HTTP/1.1 file server on 127.0.0.1 standing in for a
//! mirror (no network), a published suite `test` to fetch from, and the
//! fixture files.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering as AtomicOrdering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::{DebianMirror, MirrorOrigin};
use crate::kernel::cache::sha256_hex;
use crate::kernel::deb::testdeb::{self, Comp};

/// `harness/tests/fixtures/debian/<name>`.
pub(crate) fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/debian")
        .join(name)
}

/// A tiny HTTP/1.1 file server on 127.0.0.1 (no network).
pub(crate) struct FakeMirror {
    url: String,
    files: Arc<Mutex<HashMap<String, Vec<u8>>>>,
    requests: Arc<AtomicUsize>,
}

impl FakeMirror {
    pub(crate) fn start() -> FakeMirror {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/debian", listener.local_addr().unwrap());
        let files: Arc<Mutex<HashMap<String, Vec<u8>>>> = Arc::default();
        let requests = Arc::new(AtomicUsize::new(0));
        let (f, r) = (files.clone(), requests.clone());
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(mut conn) = conn else { continue };
                r.fetch_add(1, AtomicOrdering::SeqCst);
                let mut reader = BufReader::new(conn.try_clone().unwrap());
                let mut line = String::new();
                let _ = reader.read_line(&mut line);
                let path = line.split_whitespace().nth(1).unwrap_or("").to_string();
                loop {
                    let mut h = String::new();
                    if reader.read_line(&mut h).unwrap_or(0) == 0 || h == "\r\n" {
                        break;
                    }
                }
                let body = f.lock().unwrap().get(&path).cloned();
                let _ = match body {
                    Some(b) => conn
                        .write_all(
                            format!(
                                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                                b.len()
                            )
                            .as_bytes(),
                        )
                        .and_then(|_| conn.write_all(&b)),
                    None => conn.write_all(
                        b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                    ),
                };
            }
        });
        FakeMirror {
            url,
            files,
            requests,
        }
    }

    pub(crate) fn put(&self, path: &str, data: Vec<u8>) {
        self.files
            .lock()
            .unwrap()
            .insert(format!("/debian/{path}"), data);
    }

    pub(crate) fn requests(&self) -> usize {
        self.requests.load(AtomicOrdering::SeqCst)
    }
}

/// `data` xz-compressed.
fn xz(data: &[u8]) -> Vec<u8> {
    let mut e = liblzma::write::XzEncoder::new(Vec::new(), 1);
    e.write_all(data).unwrap();
    e.finish().unwrap()
}

/// A `Packages` stanza for `data` published at `filename`.
fn stanza(package: &str, filename: &str, data: &[u8]) -> String {
    format!(
        "Package: {package}\nVersion: 1.0-1\nArchitecture: amd64\nFilename: {filename}\nSize: {}\nSHA256: {}\nDescription: test\n continuation line\n\n",
        data.len(),
        sha256_hex(data)
    )
}

/// Publishes a suite "test" with a 7.3.4 linux-binary (new layout) and a
/// 6.18.15 linux-image (old layout) plus a linux-modules package. Returns
/// the two .deb files.
pub(crate) fn publish(m: &FakeMirror, tamper_packages_sha: bool) -> (Vec<u8>, Vec<u8>) {
    let new = testdeb::build(
        &[(
            "./usr/lib/modules/7.3.4+deb13-cloud-amd64/vmlinuz",
            b"BZIMAGE-7.3.4",
        )],
        Comp::Xz,
    );
    let old = testdeb::build(
        &[
            ("./boot/config-6.18.15+deb13-cloud-amd64", b"CONFIG"),
            (
                "./boot/vmlinuz-6.18.15+deb13-cloud-amd64",
                b"BZIMAGE-6.18.15",
            ),
        ],
        Comp::Zst,
    );
    let modules = testdeb::build(&[("./usr/lib/modules/x/kernel/a.ko", b"KO")], Comp::Xz);
    let f_new = "pool/main/l/linux-signed-amd64/linux-binary-7.3.4+deb13-cloud-amd64_7.3.4-1~bpo13+1_amd64.deb";
    let f_meta = "pool/main/l/linux-signed-amd64/linux-image-7.3.4+deb13-cloud-amd64_7.3.4-1~bpo13+1_amd64.deb";
    let f_old = "pool/main/l/linux-signed-amd64/linux-image-6.18.15+deb13-cloud-amd64_6.18.15-1~bpo13+1_amd64.deb";
    let f_mod = "pool/main/l/linux/linux-modules-7.3.4+deb13-cloud-amd64_7.3.4-1~bpo13+1_amd64.deb";
    let packages = [
        stanza("bash", "pool/main/b/bash/bash_5.2_amd64.deb", b"x"),
        stanza("linux-image-7.3.4+deb13-cloud-amd64", f_meta, b"meta"),
        stanza("linux-binary-7.3.4+deb13-cloud-amd64", f_new, &new),
        stanza("linux-image-6.18.15+deb13-cloud-amd64", f_old, &old),
        stanza("linux-modules-7.3.4+deb13-cloud-amd64", f_mod, &modules),
    ]
    .concat();
    let pxz = xz(packages.as_bytes());
    let sha = if tamper_packages_sha {
        "0".repeat(64)
    } else {
        sha256_hex(&pxz)
    };
    let inrelease = format!(
        "-----BEGIN PGP SIGNED MESSAGE-----\nHash: SHA512\n\nSuite: test\nSHA256:\n {} {} main/binary-amd64/Packages\n {sha} {} main/binary-amd64/Packages.xz\n-----BEGIN PGP SIGNATURE-----\n\nfake\n-----END PGP SIGNATURE-----\n",
        sha256_hex(packages.as_bytes()),
        packages.len(),
        pxz.len()
    );
    m.put("dists/test/InRelease", inrelease.into_bytes());
    m.put("dists/test/main/binary-amd64/Packages.xz", pxz);
    m.put(f_new, new.clone());
    m.put(f_old, old.clone());
    m.put(f_mod, modules);
    (new, old)
}

/// A mirror client for `m` searching `missing-suite` then `test`, without
/// signature check or retries.
pub(crate) fn mirror(m: &FakeMirror) -> DebianMirror {
    DebianMirror::new(&m.url, MirrorOrigin::Explicit)
        .unwrap()
        .with_suites(["missing-suite", "test"])
        .with_keyring("/nonexistent/keyring.gpg")
        .with_retries(0, Duration::ZERO)
}

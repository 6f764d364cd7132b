//! `harness report kcidb --submit` against a local KCIDB-ng stand-in on
//! 127.0.0.1 that checks method, path, bearer token and body (with
//! KernelCI's validator) and answers like kcidb-restd-rs: accepted and
//! polled until processed, 401, 500; the token never shows.

mod kcidb_common;

use kcidb_common::*;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

const TOKEN: &str = "kcidb-test-token-4f9a1c7e";

/// What the stand-in answers.
#[derive(Clone, Copy, PartialEq)]
enum Service {
    /// Takes the submission, says `ready`, then `processed`.
    Accepts,
    /// 401 to everything.
    Unauthorized,
    /// 500 to everything.
    Broken,
}

/// One request the stand-in saw.
#[derive(Debug, Clone)]
struct Seen {
    method: String,
    target: String,
    authorization: Option<String>,
    content_type: Option<String>,
    body: Vec<u8>,
}

fn read_request(s: &mut std::net::TcpStream) -> Option<Seen> {
    s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    let head_end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i;
        }
        let n = s.read(&mut chunk).ok()?;
        if n == 0 || buf.len() > 1 << 20 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let mut lines = head.split("\r\n");
    let mut first = lines.next()?.split(' ');
    let (method, target) = (first.next()?.to_string(), first.next()?.to_string());
    let mut seen = Seen {
        method,
        target,
        authorization: None,
        content_type: None,
        body: Vec::new(),
    };
    let mut length = 0usize;
    for l in lines {
        let (k, v) = l.split_once(':')?;
        let v = v.trim().to_string();
        match k.to_ascii_lowercase().as_str() {
            "authorization" => seen.authorization = Some(v),
            "content-type" => seen.content_type = Some(v),
            "content-length" => length = v.parse().ok()?,
            _ => {}
        }
    }
    let mut body = buf[head_end + 4..].to_vec();
    while body.len() < length {
        let n = s.read(&mut chunk).ok()?;
        if n == 0 {
            break;
        }
        body.extend_from_slice(&chunk[..n]);
    }
    seen.body = body;
    Some(seen)
}

/// A KCIDB-ng stand-in on 127.0.0.1: answers like kcidb-restd-rs, at most
/// 10 requests and 60 s, then stops by itself. Returns its URL and what
/// it saw.
fn stand_in(service: Service) -> (String, std::thread::JoinHandle<Vec<Seen>>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let url = format!("http://{}/", listener.local_addr().unwrap());
    let handle = std::thread::spawn(move || {
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut seen: Vec<Seen> = Vec::new();
        let mut polls = 0;
        while Instant::now() < deadline && seen.len() < 10 {
            let Ok((mut s, _)) = listener.accept() else {
                std::thread::sleep(Duration::from_millis(20));
                continue;
            };
            let _ = s.set_nonblocking(false);
            let Some(req) = read_request(&mut s) else {
                continue;
            };
            let authorized = req.authorization.as_deref() == Some(&format!("Bearer {TOKEN}"));
            let (code, body) = match service {
                Service::Broken => (500, "Internal Server Error".to_string()),
                Service::Unauthorized => (
                    401,
                    r#"{"id":"0","status":"error","message":"Missing or invalid JWT"}"#.into(),
                ),
                Service::Accepts if !authorized => (
                    401,
                    r#"{"id":"0","status":"error","message":"JWT is required"}"#.into(),
                ),
                Service::Accepts if req.method == "POST" && req.target == "/submit" => (
                    200,
                    format!(
                        r#"{{"id":"wvTu6myNQOlM","status":"ok","message":"Received submission wvTu6myNQOlM with size {} bytes"}}"#,
                        req.body.len()
                    ),
                ),
                Service::Accepts
                    if req.method == "GET" && req.target == "/status?id=wvTu6myNQOlM" =>
                {
                    polls += 1;
                    if polls == 1 {
                        (200, r#"{"id":"wvTu6myNQOlM","status":"ready","message":"File waiting for processing"}"#.into())
                    } else {
                        (200, r#"{"id":"wvTu6myNQOlM","status":"processed","message":"File archived"}"#.into())
                    }
                }
                Service::Accepts => (
                    404,
                    r#"{"id":"0","status":"error","message":"no such endpoint"}"#.into(),
                ),
            };
            let reason = match code {
                200 => "OK",
                401 => "Unauthorized",
                404 => "Not Found",
                _ => "Internal Server Error",
            };
            let _ = write!(
                s,
                "HTTP/1.1 {code} {reason}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
            let processed = body.contains("processed");
            seen.push(req);
            if processed || service != Service::Accepts {
                break;
            }
        }
        seen
    });
    (url, handle)
}

/// A small valid results file.
fn results_file(dir: &Path) -> PathBuf {
    let started = SystemTime::UNIX_EPOCH + Duration::from_secs(1_764_583_200);
    let path = dir.join("results.json");
    let mut j = harness::reporter::json::Json::new(&path);
    run_events(&outcomes(dir, started)[..2], started, &mut [&mut j]);
    path
}

fn submit(results: &Path, url: &str, token: Option<&str>) -> (Option<i32>, String) {
    let mut c = harness();
    c.args([
        "report",
        "kcidb",
        "--origin",
        ORIGIN,
        "--wait",
        "10",
        "--results",
    ])
    .arg(results)
    .arg("--submit")
    .arg(url)
    // The wire-level log would show headers: the binary caps it.
    .env("HARNESS_LOG", "trace")
    .env_remove("KCIDB_TOKEN");
    if let Some(t) = token {
        c.env("KCIDB_TOKEN", t);
    }
    let r = c.output().unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&r.stdout),
        String::from_utf8_lossy(&r.stderr)
    );
    assert!(!text.contains(TOKEN), "the token leaked:\n{text}");
    // ureq's wire-level log dumps the request in hex: never on.
    assert!(!text.contains("TRACE ureq"), "wire-level log:\n{text}");
    (r.status.code(), text)
}

#[test]
fn submission_posts_with_the_token_then_polls_until_processed() {
    let d = tempfile::tempdir().unwrap();
    let results = results_file(d.path());
    let (url, server) = stand_in(Service::Accepts);
    let (code, text) = submit(&results, &url, Some(TOKEN));
    let seen = server.join().unwrap();
    assert_eq!(code, Some(0), "{text}");
    assert!(
        text.contains("id wvTu6myNQOlM") && text.contains("processed"),
        "{text}"
    );
    assert_eq!(seen.len(), 3, "{seen:?}");
    let post = &seen[0];
    assert_eq!(
        (post.method.as_str(), post.target.as_str()),
        ("POST", "/submit")
    );
    assert_eq!(
        post.authorization.as_deref(),
        Some(format!("Bearer {TOKEN}").as_str())
    );
    assert_eq!(post.content_type.as_deref(), Some("application/json"));
    validate(&post.body);
    for poll in &seen[1..] {
        assert_eq!(
            (poll.method.as_str(), poll.target.as_str()),
            ("GET", "/status?id=wvTu6myNQOlM")
        );
        assert!(poll.authorization.is_some());
    }
}

#[test]
fn refused_and_failed_submissions_are_clear_errors_without_the_token() {
    let d = tempfile::tempdir().unwrap();
    let results = results_file(d.path());

    let (url, server) = stand_in(Service::Unauthorized);
    let (code, text) = submit(&results, &url, Some(TOKEN));
    assert_eq!(server.join().unwrap().len(), 1, "not retried");
    assert_eq!(code, Some(2), "{text}");
    assert!(
        text.contains("HTTP 401") && text.contains("Missing or invalid JWT"),
        "{text}"
    );

    let (url, server) = stand_in(Service::Broken);
    let (code, text) = submit(&results, &url, Some(TOKEN));
    assert_eq!(server.join().unwrap().len(), 1, "not retried");
    assert_eq!(code, Some(69), "{text}");
    assert!(text.contains("HTTP 500"), "{text}");

    // No token, or one in the URL: refused before anything is sent.
    let (code, text) = submit(&results, "http://127.0.0.1:9/", None);
    assert_eq!(code, Some(2), "{text}");
    assert!(text.contains("$KCIDB_TOKEN"), "{text}");
    let (code, text) = submit(&results, &format!("https://{TOKEN}@db.example/"), Some("x"));
    assert_eq!(code, Some(2), "{text}");
    assert!(text.contains("credentials"), "{text}");
}

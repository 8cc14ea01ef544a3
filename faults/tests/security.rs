//! Security against real etcd: server-only TLS and mutual TLS with a CA made
//! by the test (openssl CLI), fail-closed behaviour (wrong CA, https without
//! a CA, TLS options against a plaintext server: never a plaintext fallback),
//! username/password with `--auth-token-ttl=5` held across token expiries,
//! RBAC confined to `/app/locks/` giving a typed PermissionDenied, and no
//! password, token or key material in any error message or log line (every
//! tracing event of the run, at TRACE level, goes to a buffer that is grepped).
//!
//! It is one test so that the final grep sees everything the suite printed.

use std::io::Write;
use std::path::Path;
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use etcdlock::{Client, ClientOptions, ErrorCode, LockOptions, TlsOptions};
use etcdlock_faults::infra::{make_pki, Pki};
use etcdlock_testkit::{connections_to, etcdctl_bin, Config, Etcd};

#[derive(Clone, Default)]
struct Buf(Arc<Mutex<Vec<u8>>>);

impl Write for Buf {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Everything printed: the captured log and every error message we saw.
struct Printed {
    log: Buf,
    errors: Mutex<Vec<String>>,
}

impl Printed {
    fn err(&self, e: &etcdlock::Error) {
        self.errors.lock().unwrap().push(format!("{e} | {e:?}"));
    }
    fn all(&self) -> String {
        let mut s = String::from_utf8_lossy(&self.log.0.lock().unwrap()).into_owned();
        for e in self.errors.lock().unwrap().iter() {
            s.push('\n');
            s.push_str(e);
        }
        s
    }
}

fn https(etcd: &Etcd) -> Vec<String> {
    etcd.members
        .iter()
        .map(|m| format!("https://127.0.0.1:{}", m.client_port))
        .collect()
}

fn tls(ca: Option<&Path>, cert: Option<&Path>, key: Option<&Path>) -> TlsOptions {
    TlsOptions {
        ca: ca.map(Into::into),
        cert: cert.map(Into::into),
        key: key.map(Into::into),
        domain: None,
    }
}

fn base(endpoints: Vec<String>, ns: &str) -> ClientOptions {
    ClientOptions::new(endpoints)
        .with_ttl(3)
        .with_namespace(ns)
        .with_connect_timeout(Duration::from_secs(3))
        .with_request_timeout(Duration::from_secs(3))
}

async fn lock_roundtrip(c: &Client, name: &str) -> etcdlock::Result<i64> {
    let g = c
        .lock_with(name, LockOptions::timeout(Duration::from_secs(5)))
        .await?;
    g.put("tls-res", g.fencing_token().to_string()).await?;
    let t = g.fencing_token();
    g.unlock().await?;
    Ok(t)
}

/// Connect must fail; returns the error (recorded).
async fn refused(p: &Printed, o: ClientOptions, what: &str) -> etcdlock::Error {
    let t = Instant::now();
    match Client::connect(o).await {
        Ok(c) => {
            c.close().await;
            panic!("{what}: connected, but it must fail closed");
        }
        Err(e) => {
            p.err(&e);
            assert!(
                t.elapsed() < Duration::from_secs(10),
                "{what}: took {:?}",
                t.elapsed()
            );
            e
        }
    }
}

async fn tls_section(p: &Printed, pki: &Pki, other: &Pki) -> String {
    let etcd = Etcd::start(Config {
        members: 1,
        scheme: Some("https".into()),
        hosts: Vec::new(),
        cgroups: Vec::new(),
        bin: None,
        extra_args: vec![
            format!("--cert-file={}", pki.server_cert.display()),
            format!("--key-file={}", pki.server_key.display()),
        ],
    });
    let eps = https(&etcd);
    // Works with the right CA.
    let c = Client::connect(base(eps.clone(), "tls/").with_tls(tls(Some(&pki.ca), None, None)))
        .await
        .expect("TLS connect");
    let token = lock_roundtrip(&c, "a").await.expect("lock over TLS");
    assert!(token > 0);
    // close() closes the TLS connection while a handle to the client lives on
    // (a binding's object that garbage collection has not freed yet).
    let port = etcd.members[0].client_port;
    let alive = c.clone();
    assert_eq!(
        connections_to(port),
        1,
        "one TLS connection for requests, keep-alives and watches"
    );
    c.close().await;
    let until = Instant::now() + Duration::from_secs(2);
    while connections_to(port) > 0 && Instant::now() < until {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(
        connections_to(port),
        0,
        "the TLS connection outlived close() by 2 s"
    );
    assert_eq!(alive.lock("a").await.unwrap_err().code(), ErrorCode::Closed);
    assert!(
        alive.etcd().await.unwrap().get("a", None).await.is_err(),
        "the raw client of a closed client fails"
    );
    assert_eq!(
        connections_to(port),
        0,
        "nothing connects again through the closed client"
    );
    drop(alive);
    // host:port with TLS options is upgraded to https and works too.
    let hp = format!("127.0.0.1:{}", etcd.members[0].client_port);
    let c =
        Client::connect(base(vec![hp.clone()], "tls/").with_tls(tls(Some(&pki.ca), None, None)))
            .await
            .expect("host:port TLS");
    lock_roundtrip(&c, "b")
        .await
        .expect("lock over TLS (host:port)");
    c.close().await;
    let mut codes = Vec::new();
    // https endpoint without any TLS options: refused before connecting.
    let e = refused(p, base(eps.clone(), "tls/"), "https without CA").await;
    assert_eq!(e.code(), ErrorCode::InvalidArgument, "{e}");
    assert!(e.message().contains("plaintext"), "{e}");
    codes.push(format!("https without CA: {}", e.code()));
    // Wrong CA: the handshake fails; no fallback.
    let e = refused(
        p,
        base(eps.clone(), "tls/").with_tls(tls(Some(&other.ca), None, None)),
        "wrong CA",
    )
    .await;
    assert!(matches!(e.code(), ErrorCode::Unavailable), "{e}");
    codes.push(format!("wrong CA: {}", e.code()));
    // Plaintext client against the TLS port: fails.
    let e = refused(
        p,
        base(vec![etcd.members[0].endpoint()], "tls/"),
        "plaintext to TLS port",
    )
    .await;
    assert!(matches!(e.code(), ErrorCode::Unavailable), "{e}");
    codes.push(format!("plaintext to TLS port: {}", e.code()));
    // http:// endpoint together with TLS options: refused (no silent downgrade).
    let e = refused(
        p,
        base(vec![etcd.members[0].endpoint()], "tls/").with_tls(tls(Some(&pki.ca), None, None)),
        "http with TLS",
    )
    .await;
    assert_eq!(e.code(), ErrorCode::InvalidArgument, "{e}");
    codes.push(format!("http:// endpoint with TLS options: {}", e.code()));
    // TLS options against a plaintext etcd: the TLS handshake fails, never a plaintext fallback.
    let plain = Etcd::single();
    let php = format!("127.0.0.1:{}", plain.members[0].client_port);
    let e = refused(
        p,
        base(vec![php], "tls/").with_tls(tls(Some(&pki.ca), None, None)),
        "TLS to plaintext server",
    )
    .await;
    assert!(matches!(e.code(), ErrorCode::Unavailable), "{e}");
    codes.push(format!(
        "TLS options against a plaintext server: {}",
        e.code()
    ));
    // A CA file that is not PEM: refused up front.
    let e = refused(
        p,
        base(eps.clone(), "tls/").with_tls(tls(
            Some(&pki.server_key.with_extension("ext")),
            None,
            None,
        )),
        "bad CA file",
    )
    .await;
    assert_eq!(e.code(), ErrorCode::InvalidArgument, "{e}");
    codes.push(format!("CA file not PEM: {}", e.code()));
    // A PEM file that is not a certificate (a CSR) as CA: the handshake fails.
    let e = refused(
        p,
        base(eps.clone(), "tls/").with_tls(tls(
            Some(&pki.server_key.with_extension("csr")),
            None,
            None,
        )),
        "CSR as CA",
    )
    .await;
    assert!(
        matches!(
            e.code(),
            ErrorCode::Unavailable | ErrorCode::InvalidArgument
        ),
        "{e}"
    );
    codes.push(format!("CSR given as CA: {}", e.code()));
    format!("server-only TLS: lock/put/unlock ok (https and host:port), close() closes the connection; fail closed: {}", codes.join(", "))
}

async fn mtls_section(p: &Printed, pki: &Pki, other: &Pki) -> String {
    let etcd = Etcd::start(Config {
        members: 1,
        scheme: Some("https".into()),
        hosts: Vec::new(),
        cgroups: Vec::new(),
        bin: None,
        extra_args: vec![
            format!("--cert-file={}", pki.server_cert.display()),
            format!("--key-file={}", pki.server_key.display()),
            format!("--trusted-ca-file={}", pki.ca.display()),
            "--client-cert-auth".into(),
        ],
    });
    let eps = https(&etcd);
    let c = Client::connect(base(eps.clone(), "mtls/").with_tls(tls(
        Some(&pki.ca),
        Some(&pki.client_cert),
        Some(&pki.client_key),
    )))
    .await
    .expect("mTLS connect");
    lock_roundtrip(&c, "a").await.expect("lock over mTLS");
    c.close().await;
    let e1 = refused(
        p,
        base(eps.clone(), "mtls/").with_tls(tls(Some(&pki.ca), None, None)),
        "mTLS without client cert",
    )
    .await;
    assert!(
        matches!(e1.code(), ErrorCode::Unavailable | ErrorCode::AuthFailed),
        "{e1}"
    );
    let e2 = refused(
        p,
        base(eps.clone(), "mtls/").with_tls(tls(
            Some(&pki.ca),
            Some(&other.client_cert),
            Some(&other.client_key),
        )),
        "client cert from another CA",
    )
    .await;
    assert!(
        matches!(e2.code(), ErrorCode::Unavailable | ErrorCode::AuthFailed),
        "{e2}"
    );
    let e3 = refused(
        p,
        base(eps.clone(), "mtls/").with_tls(tls(Some(&pki.ca), Some(&pki.client_cert), None)),
        "cert without key",
    )
    .await;
    assert_eq!(e3.code(), ErrorCode::InvalidArgument, "{e3}");
    format!(
        "mTLS: lock ok with the client cert; refused without a client cert ({}), with a cert from another CA ({}), cert without key ({})",
        e1.code(),
        e2.code(),
        e3.code()
    )
}

fn ctl(etcd: &Etcd, root_pw: &str, args: &[&str]) {
    let out = Command::new(etcdctl_bin())
        .env("ETCDCTL_API", "3")
        .arg(format!("--endpoints={}", etcd.endpoints_csv()))
        .arg(format!("--user=root:{root_pw}"))
        .args(args)
        .output()
        .expect("etcdctl");
    assert!(
        out.status.success(),
        "etcdctl {:?}: {}",
        args.first(),
        String::from_utf8_lossy(&out.stderr)
    );
}

fn secret(tag: &str) -> String {
    let n = etcdlock::runtime::clock_monotonic_ns();
    format!("{tag}-S3cr3t-{n:x}")
}

/// An etcd with auth enabled: root, and user `app` confined to `/app/locks/`.
fn auth_etcd(root_pw: &str, app_pw: &str) -> Etcd {
    let etcd = Etcd::start(Config {
        members: 1,
        extra_args: vec!["--auth-token-ttl=5".into()],
        scheme: None,
        ..Default::default()
    });
    etcd.etcdctl(&[
        "user",
        "add",
        "root",
        &format!("--new-user-password={root_pw}"),
    ]);
    etcd.etcdctl(&["role", "add", "root"]);
    etcd.etcdctl(&["user", "grant-role", "root", "root"]);
    etcd.etcdctl(&["auth", "enable"]);
    ctl(
        &etcd,
        root_pw,
        &[
            "user",
            "add",
            "app",
            &format!("--new-user-password={app_pw}"),
        ],
    );
    ctl(&etcd, root_pw, &["role", "add", "app-role"]);
    ctl(
        &etcd,
        root_pw,
        &[
            "role",
            "grant-permission",
            "app-role",
            "--prefix=true",
            "readwrite",
            "/app/locks/",
        ],
    );
    ctl(&etcd, root_pw, &["user", "grant-role", "app", "app-role"]);
    etcd
}

async fn rbac_section(p: &Printed, etcd: &Etcd, app_pw: &str) -> String {
    let eps = etcd.endpoints();
    let o = |user: &str, pw: &str| {
        ClientOptions::new(eps.clone())
            .with_ttl(3)
            .with_user(user, pw)
            .with_request_timeout(Duration::from_secs(3))
    };
    let c = Client::connect(o("app", app_pw))
        .await
        .expect("app connect");
    let g = c
        .lock("/app/locks/orders")
        .await
        .expect("lock inside the granted prefix");
    g.put("/app/locks/orders-res", "1")
        .await
        .expect("guarded put inside the prefix");
    let mut denied = 0;
    // A guarded write outside the prefix is denied, and the hold is not lost by it.
    match g.put("/elsewhere", "x").await {
        Err(e) => {
            p.err(&e);
            assert_eq!(e.code(), ErrorCode::PermissionDenied, "{e}");
            denied += 1;
        }
        Ok(()) => panic!("guarded put outside the prefix was accepted"),
    }
    assert!(g.is_held());
    g.unlock().await.expect("unlock");
    for name in ["orders", "/app/other/x", "/app/locksmith"] {
        let e = c
            .lock_with(name, LockOptions::timeout(Duration::from_secs(5)))
            .await
            .expect_err(name);
        p.err(&e);
        assert_eq!(e.code(), ErrorCode::PermissionDenied, "lock {name}: {e}");
        let e = c.try_lock(name).await.expect_err(name);
        p.err(&e);
        assert_eq!(
            e.code(),
            ErrorCode::PermissionDenied,
            "try_lock {name}: {e}"
        );
        denied += 2;
    }
    // The lock inside the prefix still works after the denials.
    let g = c.lock("/app/locks/orders").await.expect("lock again");
    g.unlock().await.unwrap();
    c.close().await;
    // Bad credentials.
    let e = refused(p, o("app", "wrong-password-Zz9"), "wrong password").await;
    assert_eq!(e.code(), ErrorCode::AuthFailed, "{e}");
    let e2 = refused(p, o("nobody", app_pw), "unknown user").await;
    assert_eq!(e2.code(), ErrorCode::AuthFailed, "{e2}");
    // Without credentials etcd 3.4 still grants a lease, so connect may succeed; the lock must not.
    let e3 = match Client::connect(ClientOptions::new(eps.clone()).with_ttl(3)).await {
        Err(e) => e,
        Ok(c) => {
            let e = c
                .lock_with(
                    "/app/locks/orders",
                    LockOptions::timeout(Duration::from_secs(5)),
                )
                .await
                .expect_err("lock without credentials");
            c.close().await;
            e
        }
    };
    p.err(&e3);
    assert!(
        matches!(
            e3.code(),
            ErrorCode::AuthFailed | ErrorCode::PermissionDenied
        ),
        "{e3}"
    );
    format!(
        "RBAC: user confined to /app/locks/ locks inside it; {denied} operations outside it gave PermissionDenied (lock, try_lock, guarded put; the hold survived); wrong password {}, unknown user {}, no credentials {}",
        e.code(),
        e2.code(),
        e3.code()
    )
}

async fn token_expiry_section(etcd: &Etcd, app_pw: &str, expiries: u32) -> String {
    let eps = etcd.endpoints();
    // Proof that the token does expire after 5 s idle: a raw client without auto refresh.
    let mut rawc = etcd_client::Client::connect(
        &eps,
        Some(
            etcd_client::ConnectOptions::new()
                .with_user("app", app_pw)
                .with_auto_token_refresh(false),
        ),
    )
    .await
    .expect("raw connect");
    rawc.get("/app/locks/probe", None)
        .await
        .expect("fresh token works");
    tokio::time::sleep(Duration::from_millis(6500)).await;
    let raw_err = rawc
        .get("/app/locks/probe", None)
        .await
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(
        raw_err.contains("invalid auth token"),
        "a 6.5 s idle token still worked: {raw_err:?}"
    );

    let c = Client::connect(
        ClientOptions::new(eps.clone())
            .with_ttl(3)
            .with_user("app", app_pw),
    )
    .await
    .expect("connect");
    let g = c.lock("/app/locks/long").await.expect("lock");
    let start = Instant::now();
    for i in 0..expiries {
        // Idle (apart from keep-alives) past the token TTL, then a guarded write.
        tokio::time::sleep(Duration::from_millis(5500)).await;
        g.put("/app/locks/long-res", i.to_string())
            .await
            .unwrap_or_else(|e| panic!("guarded put after token expiry {i}: {e}"));
        assert!(
            g.is_held(),
            "hold lost after token expiry {i}: {:?}",
            g.loss()
        );
    }
    let other = Client::connect(ClientOptions::new(eps).with_ttl(3).with_user("app", app_pw))
        .await
        .expect("connect 2");
    assert_eq!(
        other
            .try_lock("/app/locks/long")
            .await
            .expect_err("still held")
            .code(),
        ErrorCode::WouldBlock
    );
    g.unlock().await.expect("unlock");
    other.close().await;
    c.close().await;
    format!(
        "auth-token-ttl=5: a raw client's token expired after 6.5 s idle ({raw_err:?}); the lock was held across {expiries} idle periods of 5.5 s ({:.0} s) with a guarded put after each, never lost, still exclusive",
        start.elapsed().as_secs_f64()
    )
}

/// Secret material found in `text`: the given strings, PEM private keys, and
/// etcd simple tokens (16 letters, a dot, digits).
fn find_secrets(text: &str, secrets: &[String]) -> Vec<String> {
    let mut found = Vec::new();
    for s in secrets {
        if !s.is_empty() && text.contains(s.as_str()) {
            found.push(format!("secret {}...", &s[..s.len().min(6)]));
        }
    }
    for marker in ["PRIVATE KEY", "BEGIN CERTIFICATE"] {
        if text.contains(marker) {
            found.push(marker.to_string());
        }
    }
    let b = text.as_bytes();
    let mut i = 0;
    while i + 18 <= b.len() {
        let boundary = i == 0 || !b[i - 1].is_ascii_alphanumeric();
        if boundary
            && b[i..i + 16].iter().all(u8::is_ascii_alphabetic)
            && b[i + 16] == b'.'
            && b[i + 17].is_ascii_digit()
        {
            found.push(format!(
                "token-like {:?}",
                String::from_utf8_lossy(&b[i..(i + 20).min(b.len())])
            ));
            i += 16;
        }
        i += 1;
    }
    found
}

#[test]
fn security_suite() {
    let printed = Arc::new(Printed {
        log: Buf::default(),
        errors: Mutex::new(Vec::new()),
    });
    let w = printed.log.clone();
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::new("trace"))
        .with_ansi(false)
        .with_writer(move || w.clone())
        .init();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_all()
        .build()
        .unwrap();
    let dir = std::env::temp_dir().join(format!("etcdlock-faults-pki-{}", std::process::id()));
    let pki = make_pki(&dir, "good");
    let other = make_pki(&dir, "other");
    let (root_pw, app_pw) = (secret("root"), secret("app"));
    let expiries: u32 = std::env::var("ETCDLOCK_FAULTS_TOKEN_EXPIRIES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(10);
    let figures = rt.block_on(async {
        let auth = tokio::task::block_in_place(|| auth_etcd(&root_pw, &app_pw));
        let (t, m, r, x) = tokio::join!(
            tls_section(&printed, &pki, &other),
            mtls_section(&printed, &pki, &other),
            rbac_section(&printed, &auth, &app_pw),
            token_expiry_section(&auth, &app_pw, expiries),
        );
        vec![t, m, r, x]
    });
    drop(rt);
    // Key material: the private keys' base64 bodies (first line of each).
    let mut secrets = vec![root_pw.clone(), app_pw.clone()];
    for k in [
        &pki.client_key,
        &pki.server_key,
        &pki.ca.with_file_name("ca.key"),
    ] {
        let pem = std::fs::read_to_string(k).unwrap();
        if let Some(line) = pem
            .lines()
            .find(|l| !l.starts_with("-----") && l.len() > 20)
        {
            secrets.push(line.to_string());
        }
    }
    let all = printed.all();
    let lines = all.lines().count();
    let found = find_secrets(&all, &secrets);
    let _ = std::fs::remove_dir_all(&dir);
    for f in &figures {
        println!("security: {f}");
    }
    println!(
        "security: secrets: {lines} log lines and error messages grepped for the 2 passwords, 3 private keys, PEM markers and etcd token shapes: {} found",
        found.len()
    );
    assert!(found.is_empty(), "secret material printed: {found:?}");
    assert!(lines > 100, "the log capture saw only {lines} lines");
    assert!(
        find_secrets("x abcdefghijklmnop.42 y", &[]).len() == 1,
        "the token detector must detect a token"
    );
}

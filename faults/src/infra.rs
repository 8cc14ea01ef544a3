//! The test CA (openssl CLI) that signs etcd's and nginx's certificates in
//! the TLS scenarios and the security suite. The processes in front of etcd
//! (etcd's gRPC proxy, nginx) are testkit's [`etcdlock_testkit::Front`]s.

use std::path::{Path, PathBuf};
use std::process::Command;

use etcdlock_testkit::ServerTls;

fn scratch_dir(tag: &str) -> PathBuf {
    let root = crate::history::target_dir().join("faults-infra");
    let d = root.join(format!(
        "{tag}-{}-{}",
        std::process::id(),
        crate::unique_ns("d").trim_end_matches('/')
    ));
    std::fs::create_dir_all(&d).unwrap_or_else(|e| panic!("mkdir {}: {e}", d.display()));
    d
}

fn openssl(dir: &Path, args: &[&str]) {
    let out = Command::new("openssl")
        .current_dir(dir)
        .args(args)
        .output()
        .expect("run openssl");
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A test CA with a server certificate (127.0.0.1, localhost) and a client
/// certificate, as PEM files (P-256, made with the openssl CLI).
#[derive(Debug, Clone)]
pub struct Pki {
    /// The CA certificate.
    pub ca: PathBuf,
    /// The server certificate.
    pub server_cert: PathBuf,
    /// Its key.
    pub server_key: PathBuf,
    /// The client certificate (mutual TLS).
    pub client_cert: PathBuf,
    /// Its key.
    pub client_key: PathBuf,
}

impl Pki {
    /// The server certificate as testkit takes it.
    pub fn server(&self) -> ServerTls {
        ServerTls {
            cert: self.server_cert.clone(),
            key: self.server_key.clone(),
        }
    }
}

/// Make a CA named `name` under `dir` (`dir/name/`), with its server and client certificates.
pub fn make_pki(dir: &Path, name: &str) -> Pki {
    let d = dir.join(name);
    std::fs::create_dir_all(&d).unwrap();
    let ec = [
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
    ];
    let mut a: Vec<&str> = vec!["req", "-x509"];
    a.extend(ec);
    a.extend([
        "-keyout",
        "ca.key",
        "-out",
        "ca.pem",
        "-days",
        "2",
        "-subj",
        "/CN=etcdlock-test-ca",
    ]);
    openssl(&d, &a);
    std::fs::write(
        d.join("server.ext"),
        "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n",
    )
    .unwrap();
    std::fs::write(d.join("client.ext"), "extendedKeyUsage=clientAuth\n").unwrap();
    for who in ["server", "client"] {
        let (key, csr, pem, ext, subj) = (
            format!("{who}.key"),
            format!("{who}.csr"),
            format!("{who}.pem"),
            format!("{who}.ext"),
            format!("/CN={who}"),
        );
        let mut a: Vec<&str> = vec!["req"];
        a.extend(ec);
        a.extend(["-keyout", &key, "-out", &csr, "-subj", &subj]);
        openssl(&d, &a);
        openssl(
            &d,
            &[
                "x509",
                "-req",
                "-in",
                &csr,
                "-CA",
                "ca.pem",
                "-CAkey",
                "ca.key",
                "-CAcreateserial",
                "-out",
                &pem,
                "-days",
                "2",
                "-extfile",
                &ext,
            ],
        );
    }
    Pki {
        ca: d.join("ca.pem"),
        server_cert: d.join("server.pem"),
        server_key: d.join("server.key"),
        client_cert: d.join("client.pem"),
        client_key: d.join("client.key"),
    }
}

/// A test CA for one scenario, in a scratch dir removed on drop.
pub struct TestCa {
    /// The certificates.
    pub pki: Pki,
    dir: PathBuf,
}

impl TestCa {
    /// Make a fresh CA.
    pub fn new() -> TestCa {
        let dir = scratch_dir("pki");
        TestCa {
            pki: make_pki(&dir, "ca"),
            dir,
        }
    }
}

impl Default for TestCa {
    fn default() -> Self {
        TestCa::new()
    }
}

impl Drop for TestCa {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

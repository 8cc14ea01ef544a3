//! How a scenario's clients reach etcd: the plaintext and TLS runs of one scenario.

use std::time::Duration;

use etcdlock_testkit::Etcd;

use crate::{opts, Proxy};

/// How a scenario's clients reach etcd: plaintext, or TLS with a test CA
/// (etcd serves TLS on a port of its own per member; the harness and the
/// observers keep the plaintext port, every lock client uses TLS).
pub struct Net {
    ca: Option<crate::infra::TestCa>,
}

impl Net {
    /// Plaintext, or TLS with a fresh test CA.
    pub fn new(tls: bool) -> Net {
        Net {
            ca: tls.then(crate::infra::TestCa::new),
        }
    }
    /// Whether clients use TLS.
    pub fn tls(&self) -> bool {
        self.ca.is_some()
    }
    /// The CA certificate (TLS only).
    pub fn ca(&self) -> Option<&std::path::Path> {
        self.ca.as_ref().map(|c| c.pki.ca.as_path())
    }
    /// The test CA's certificates (TLS only).
    pub fn pki(&self) -> Option<&crate::infra::Pki> {
        self.ca.as_ref().map(|c| &c.pki)
    }
    /// Start etcd with `n` members, serving TLS too when this is a TLS run.
    pub fn etcd(&self, n: usize) -> Etcd {
        let cfg = etcdlock_testkit::Config {
            members: n,
            ..Default::default()
        };
        match &self.ca {
            Some(ca) => Etcd::start_tls(cfg, &ca.pki.server()),
            None => Etcd::start(cfg),
        }
    }
    /// The endpoints lock clients use (`https://` in a TLS run).
    pub fn eps(&self, etcd: &Etcd) -> Vec<String> {
        if self.tls() {
            etcd.tls_endpoints()
        } else {
            etcd.endpoints()
        }
    }
    /// A TCP fault proxy's endpoint in this run's scheme.
    pub fn via(&self, proxy: &Proxy) -> String {
        format!(
            "{}://{}",
            if self.tls() { "https" } else { "http" },
            proxy.addr()
        )
    }
    /// [`opts`] in this run's scheme.
    pub fn opts(
        &self,
        endpoints: &[String],
        ns: &str,
        ttl: i64,
        request_timeout: Duration,
    ) -> etcdlock::ClientOptions {
        crate::with_ca(opts(endpoints, ns, ttl, request_timeout), self.ca())
    }
    /// A name with `-tls` appended in a TLS run.
    pub fn name(&self, plain: &'static str, tls: &'static str) -> &'static str {
        if self.tls() {
            tls
        } else {
            plain
        }
    }
}

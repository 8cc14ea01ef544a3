//! Options as text: key=value pairs and ETCDLOCK_* environment variables, in core's one syntax for every language.

use super::*;

/// Every key [`ClientOptions::from_pairs`] accepts.
pub const OPTION_KEYS: [&str; 15] = [
    "endpoints",
    "ttl",
    "namespace",
    "username",
    "password",
    "tls_ca",
    "tls_cert",
    "tls_key",
    "tls_domain",
    "connect_timeout",
    "request_timeout",
    "margin",
    "watch_held_keys",
    "keepalive_interval",
    "lazy_connect",
];

/// The environment variable of each key (`ETCDLOCK_` + upper case).
pub fn env_var(key: &str) -> String {
    format!("ETCDLOCK_{}", key.to_ascii_uppercase())
}

/// Variables read for one more release with a deprecation warning. Not
/// `ETCDLOCK_KEY`: `etcdlock run` exports the lock key under that name.
pub(super) const DEPRECATED: [(&str, &str); 2] =
    [("ETCDLOCK_CA", "tls_ca"), ("ETCDLOCK_CERT", "tls_cert")];

/// Parse a duration: `250ms`, `5s`, `2m`, `1h` (also `us`, `ns`), or a plain
/// number of seconds. The number may have a fraction or an exponent
/// (`1.5s`, `1e-3`). NaN, infinities and negatives are refused.
pub fn parse_duration(what: &str, v: &str) -> Result<Duration> {
    let v = v.trim();
    let (num, scale) = UNITS
        .iter()
        .find_map(|(unit, scale)| v.strip_suffix(unit).map(|n| (n, *scale)))
        .filter(|(n, _)| !n.is_empty())
        .unwrap_or((v, 1.0));
    let n: f64 = num.trim().parse().map_err(|_| {
        Error::invalid(format!(
            "{what}: {v:?} is not a duration (e.g. 250ms, 5s, 2m; units ns, us, ms, s, m, h)"
        ))
    })?;
    let secs = n * scale;
    if !secs.is_finite() || secs < 0.0 {
        return Err(Error::invalid(format!(
            "{what}: {v:?} must be a finite, non-negative duration"
        )));
    }
    Duration::try_from_secs_f64(secs)
        .map_err(|_| Error::invalid(format!("{what}: {v:?} is too large")))
}

/// Duration units, longest suffix first so `ms` is not read as `s`.
pub(super) const UNITS: [(&str, f64); 6] = [
    ("ns", 1e-9),
    ("us", 1e-6),
    ("ms", 1e-3),
    ("s", 1.0),
    ("m", 60.0),
    ("h", 3600.0),
];

pub(super) fn parse_bool(what: &str, v: &str) -> Result<bool> {
    match v.trim().to_ascii_lowercase().as_str() {
        "true" | "1" | "yes" | "on" => Ok(true),
        "false" | "0" | "no" | "off" => Ok(false),
        _ => Err(Error::invalid(format!("{what}: {v:?} is not a boolean"))),
    }
}

impl ClientOptions {
    /// Options from string pairs (see the module docs for keys and syntax),
    /// starting from the defaults. Unknown keys are `InvalidArgument`, so a
    /// typo never silently falls back to a default.
    pub fn from_pairs<K: AsRef<str>, V: AsRef<str>>(
        pairs: impl IntoIterator<Item = (K, V)>,
    ) -> Result<ClientOptions> {
        let mut o = ClientOptions::default();
        o.apply_pairs(pairs)?;
        Ok(o)
    }

    /// Apply string pairs over these options (later pairs win).
    pub fn apply_pairs<K: AsRef<str>, V: AsRef<str>>(
        &mut self,
        pairs: impl IntoIterator<Item = (K, V)>,
    ) -> Result<()> {
        for (k, v) in pairs {
            let (k, v) = (k.as_ref(), v.as_ref());
            if v.is_empty() {
                continue;
            }
            self.apply_one(k, v)?;
        }
        Ok(())
    }

    pub(super) fn tls_mut(&mut self) -> &mut TlsOptions {
        self.tls.get_or_insert_with(TlsOptions::default)
    }

    pub(super) fn apply_one(&mut self, k: &str, v: &str) -> Result<()> {
        match k {
            "endpoints" => {
                self.endpoints = v
                    .split(',')
                    .map(|s| s.trim().to_string())
                    .filter(|s| !s.is_empty())
                    .collect();
            }
            "ttl" => {
                let d = parse_duration("ttl", v)?;
                if d.subsec_nanos() != 0 || d.is_zero() {
                    return Err(Error::invalid(format!(
                        "ttl: {v:?} must be a whole, positive number of seconds"
                    )));
                }
                self.ttl_secs = i64::try_from(d.as_secs())
                    .map_err(|_| Error::invalid(format!("ttl: {v:?} is too large")))?;
            }
            "namespace" => self.namespace = Some(v.to_string()),
            "username" => self.username = Some(v.to_string()),
            "password" => self.password = Some(v.to_string()),
            "tls_ca" => self.tls_mut().ca = Some(PathBuf::from(v)),
            "tls_cert" => self.tls_mut().cert = Some(PathBuf::from(v)),
            "tls_key" => self.tls_mut().key = Some(PathBuf::from(v)),
            // Any TLS option turns TLS on, the domain too (it names the server to verify).
            "tls_domain" => self.tls_mut().domain = Some(v.to_string()),
            "connect_timeout" => self.connect_timeout = parse_duration("connect_timeout", v)?,
            "request_timeout" => self.request_timeout = parse_duration("request_timeout", v)?,
            "margin" => self.margin = Some(parse_duration("margin", v)?),
            "watch_held_keys" => self.watch_held_keys = parse_bool("watch_held_keys", v)?,
            "keepalive_interval" => {
                self.keepalive_interval = Some(parse_duration("keepalive_interval", v)?)
            }
            "lazy_connect" => self.lazy_connect = parse_bool("lazy_connect", v)?,
            other => {
                return Err(Error::invalid(format!(
                    "unknown option {other:?}; the options are {}",
                    OPTION_KEYS.join(", ")
                )))
            }
        }
        Ok(())
    }

    /// The `ETCDLOCK_*` variables as pairs (deprecated names mapped, with a warning).
    pub fn env_pairs() -> Vec<(String, String)> {
        let mut out = Vec::new();
        for (var, key) in DEPRECATED {
            if let Ok(v) = std::env::var(var) {
                if !v.is_empty() {
                    tracing::warn!("{var} is deprecated; use {}", env_var(key));
                    out.push((key.to_string(), v));
                }
            }
        }
        for key in OPTION_KEYS {
            if let Ok(v) = std::env::var(env_var(key)) {
                out.push((key.to_string(), v));
            }
        }
        out
    }

    /// Options from the environment, leaving out the keys a binding was
    /// given explicitly (it sets those itself, typed): a malformed variable for
    /// such a key is then ignored, as [`ClientOptions::from_env_and_pairs`] does.
    pub fn from_env_except(given: &[&str]) -> Result<ClientOptions> {
        let mut o = ClientOptions::default();
        for (k, v) in ClientOptions::env_pairs() {
            if given.contains(&k.as_str()) {
                continue;
            }
            o.apply_pairs([(k.as_str(), v.as_str())])
                .map_err(|e| e.context(format!("environment variable {}", env_var(&k))))?;
        }
        Ok(o)
    }

    /// Options from the environment, overridden key by key by `explicit`
    /// pairs: the one rule every language follows. A malformed variable is
    /// ignored when its key is given explicitly.
    pub fn from_env_and_pairs<K: AsRef<str>, V: AsRef<str>>(
        explicit: impl IntoIterator<Item = (K, V)>,
    ) -> Result<ClientOptions> {
        let explicit: Vec<(String, String)> = explicit
            .into_iter()
            .map(|(k, v)| (k.as_ref().to_string(), v.as_ref().to_string()))
            .collect();
        let given = |k: &str| explicit.iter().any(|(e, v)| e == k && !v.is_empty());
        let mut o = ClientOptions::default();
        for (k, v) in ClientOptions::env_pairs() {
            if given(&k) {
                continue;
            }
            o.apply_pairs([(k.as_str(), v.as_str())])
                .map_err(|e| e.context(format!("environment variable {}", env_var(&k))))?;
        }
        o.apply_pairs(explicit)?;
        Ok(o)
    }
}

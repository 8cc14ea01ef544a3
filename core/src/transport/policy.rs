//! What a request may do: how an etcd error is handled (another member, back
//! off, or give up), what an endpoint may look like, and the one time bound
//! every request of a call runs under.

use std::time::{Duration, Instant};

use crate::error::{Error, Result};

/// How an etcd error should be handled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// The member is down, silent or not an etcd: try another member.
    MemberDown,
    /// etcd is busy or between leaders: back off and try again.
    Overloaded,
    /// Retrying cannot help.
    Final,
}

/// etcd's own errors that say what to do next, by their description as etcd
/// defines it (api/v3rpc/rpctypes/error.go), matched whole, as Go's client
/// does (`rpctypes.Error`). The gRPC code is not part of the match: etcd's
/// gRPC proxy passes etcd's errors on with the description intact but the
/// code `Unknown`.
const ETCD_ERRORS: &[(&str, Kind)] = &[
    ("etcdserver: too many requests", Kind::Overloaded),
    ("etcdserver: no leader", Kind::Overloaded),
    ("etcdserver: leader changed", Kind::Overloaded),
    ("etcdserver: request timed out", Kind::Overloaded),
    (
        "etcdserver: request timed out, possibly due to previous leader failure",
        Kind::Overloaded,
    ),
    (
        "etcdserver: request timed out, possibly due to connection lost",
        Kind::Overloaded,
    ),
    (
        "etcdserver: request timed out, leader transfer took too long",
        Kind::Overloaded,
    ),
    (
        "etcdserver: request timed out, waiting for the applied index took too long",
        Kind::Overloaded,
    ),
    ("etcdserver: unhealthy cluster", Kind::Overloaded),
    // A cluster mid-upgrade whose version is not settled yet.
    ("etcdserver: not capable", Kind::Overloaded),
    // The member is stopping (graceful stop, a rolling restart) or is a learner.
    ("etcdserver: server stopped", Kind::MemberDown),
    (
        "etcdserver: rpc not supported for learner",
        Kind::MemberDown,
    ),
];

/// Classify an etcd-client error: etcd's own errors by their definition
/// ([`ETCD_ERRORS`]), anything else by its gRPC status code.
pub(crate) fn classify(e: &etcd_client::Error) -> Kind {
    use etcd_client::Error as E;
    match e {
        E::GRpcStatus(st) => classify_status(st.code(), st.message()),
        E::TransportError(_) | E::IoError(_) | E::WatchError(_) | E::LeaseKeepAliveError(_) => {
            Kind::MemberDown
        }
        _ => Kind::Final,
    }
}

fn classify_status(code: tonic::Code, message: &str) -> Kind {
    if let Some((_, kind)) = ETCD_ERRORS.iter().find(|(desc, _)| *desc == message) {
        return *kind;
    }
    match code {
        // The connection or the peer failed (tonic's and hyper's own
        // statuses), or the server gave up on the request.
        tonic::Code::Unavailable | tonic::Code::DeadlineExceeded | tonic::Code::Cancelled => {
            Kind::MemberDown
        }
        // Not an etcd error (etcd's all begin "etcdserver: "): a peer that
        // speaks HTTP/2 but not etcd's gRPC (a plain web server, a proxy's
        // own failure).
        tonic::Code::Unknown | tonic::Code::Internal | tonic::Code::Unimplemented
            if !message.starts_with("etcdserver: ") =>
        {
            Kind::MemberDown
        }
        _ => Kind::Final,
    }
}

/// The store an in-process endpoint names: `mem://` is the process-wide
/// default store (`""`), `mem://NAME` the store NAME. `None` for any other
/// scheme; `Some(Err)` for a `mem://` endpoint with a port, path, query or
/// a name that is not 1 to 64 of `A-Z a-z 0-9 . _ -`.
pub(crate) fn mem_store(e: &str) -> Option<Result<&str>> {
    let (scheme, name) = e.split_once("://")?;
    if !scheme.eq_ignore_ascii_case("mem") {
        return None;
    }
    let ok = name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    Some(if ok {
        Ok(name)
    } else {
        Err(Error::invalid(format!(
            "bad endpoint {e:?}: an in-process endpoint is mem:// or mem://NAME, NAME being up to 64 of A-Z a-z 0-9 . _ - (no port, path or query)"
        )))
    })
}

/// Split and check one endpoint: `http://host:port`, `https://host:port`,
/// `host:port`, or the in-process `mem://` / `mem://NAME`. Anything else is
/// the caller's mistake, not etcd's absence.
pub(crate) fn check_endpoint(e: &str) -> Result<()> {
    let bad = |why: &str| Error::invalid(format!("bad endpoint {e:?}: {why}"));
    if e.trim().is_empty() || e.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(bad("empty or contains whitespace"));
    }
    if let Some(m) = mem_store(e) {
        return m.map(|_| ());
    }
    let rest = match e.split_once("://") {
        Some(("http" | "https", rest)) => rest,
        Some((scheme, _)) => {
            return Err(bad(&format!("scheme {scheme:?} is not http, https or mem")))
        }
        None => e,
    };
    let hostport = rest.strip_suffix('/').unwrap_or(rest);
    if hostport.contains('/') || hostport.contains('?') || hostport.contains('@') {
        return Err(bad("expected host:port with no path, query or user info"));
    }
    let (host, port) = if let Some(v6) = hostport.strip_prefix('[') {
        match v6.split_once(']') {
            Some((h, p)) => (h, p.strip_prefix(':')),
            None => return Err(bad("unclosed [")),
        }
    } else {
        match hostport.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (hostport, None),
        }
    };
    if host.is_empty() {
        return Err(bad("no host"));
    }
    match port {
        None => Err(bad("no port (etcd's client port is usually 2379)")),
        Some(p) => match p.parse::<u16>() {
            Ok(n) if n > 0 => Ok(()),
            _ => Err(bad(&format!(
                "port {p:?} is not a number between 1 and 65535"
            ))),
        },
    }
}

/// `d` scaled to a random-ish point of its upper half (backoff jitter).
pub(crate) fn jitter(d: Duration) -> Duration {
    // Cheap jitter (no RNG dependency): the low bits of the clock.
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let frac = nanos % 1000; // 0..1000
    d / 2 + d * frac / 2000
}

/// The one time bound of a public call, carried into every request it makes
/// (Go's `context.Context` deadline): each retry, backoff and failover runs
/// under what is left of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Bound {
    /// A call that waits for a lock (lock, acquire, campaign, the recipes):
    /// until the caller's deadline, `None` for as long as it takes (also for
    /// etcd to come back). Running out is the caller's `Timeout`.
    Wait(Option<Instant>),
    /// Any other call (try_lock, unlock, guarded operations, status, ping):
    /// until this instant, the client's request timeout after the call
    /// began. Running out means no member answered: `Unavailable`.
    Request(Instant),
}

impl Bound {
    /// When the bound ends (`None`: never).
    pub(crate) fn end(self) -> Option<Instant> {
        match self {
            Bound::Wait(d) => d,
            Bound::Request(e) => Some(e),
        }
    }
}

/// What one request came to: its result, and whether an attempt may have
/// reached etcd without us learning its outcome (timed out or cut off after
/// sending). A write in an uncertain request may still land, which cleanup
/// code must allow for (`wait::Pending`, `keys::delete_incarnation`).
#[must_use]
pub(crate) struct Answer<T> {
    pub(crate) result: Result<T>,
    pub(crate) uncertain: bool,
}

impl<T> Answer<T> {
    /// An answer whose outcome is known (nothing was sent, or etcd answered).
    pub(crate) fn sure(result: Result<T>) -> Answer<T> {
        Answer {
            result,
            uncertain: false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorCode;

    #[test]
    fn a_bound_ends_at_its_deadline_or_never() {
        let at = Instant::now() + Duration::from_secs(1);
        assert_eq!(Bound::Wait(Some(at)).end(), Some(at));
        assert_eq!(Bound::Wait(None).end(), None);
        assert_eq!(Bound::Request(at).end(), Some(at));
    }

    #[test]
    fn an_answer_nothing_was_sent_for_is_certain() {
        let a: Answer<()> = Answer::sure(Err(Error::new(ErrorCode::Closed, "closed")));
        assert!(!a.uncertain);
        assert_eq!(a.result.unwrap_err().code(), ErrorCode::Closed);
    }

    #[test]
    fn a_mem_endpoint_names_one_store() {
        assert_eq!(mem_store("mem://").map(|r| r.unwrap()), Some(""));
        assert_eq!(
            mem_store("MEM://unit-1.a_b").map(|r| r.unwrap()),
            Some("unit-1.a_b")
        );
        assert_eq!(
            mem_store(&format!("mem://{}", "n".repeat(64))).map(|r| r.is_ok()),
            Some(true)
        );
        for bad in [
            "mem://a:1",
            "mem://a/b",
            "mem://a?x",
            "mem://a b".to_string().as_str(),
        ] {
            assert!(matches!(mem_store(bad), Some(Err(_))), "{bad}");
        }
        let long = format!("mem://{}", "n".repeat(65));
        assert!(matches!(mem_store(&long), Some(Err(_))));
        assert!(mem_store("http://127.0.0.1:2379").is_none());
        assert!(mem_store("127.0.0.1:2379").is_none());
    }

    #[test]
    fn jitter_stays_in_the_upper_half() {
        for d in [
            Duration::ZERO,
            Duration::from_millis(1),
            Duration::from_millis(20),
            Duration::from_secs(1),
        ] {
            for _ in 0..100 {
                let j = jitter(d);
                assert!(j >= d / 2 && j <= d, "{j:?} for {d:?}");
            }
        }
    }

    #[test]
    fn endpoints_are_checked_before_anything_is_dialled() {
        for ok in [
            "http://127.0.0.1:2379",
            "https://etcd.example:2379",
            "127.0.0.1:2379",
            "http://[::1]:2379",
            "http://h:1/",
        ] {
            assert!(check_endpoint(ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            " ",
            "ftp://127.0.0.1:2379",
            "http://127.0.0.1:99999",
            "http://127.0.0.1:0",
            "127.0.0.1",
            "http://:2379",
            "http://h:2379/v3",
            "http://u@h:2379",
            "[::1",
        ] {
            let e = check_endpoint(bad).unwrap_err();
            assert_eq!(e.code(), ErrorCode::InvalidArgument, "{bad}");
        }
    }

    #[test]
    fn errors_are_classified_for_retry() {
        let st = |code, msg: &str| {
            etcd_client::Error::GRpcStatus(tonic::Status::new(code, msg.to_string()))
        };
        assert_eq!(
            classify(&st(
                tonic::Code::ResourceExhausted,
                "etcdserver: too many requests"
            )),
            Kind::Overloaded
        );
        assert_eq!(
            classify(&st(tonic::Code::Unavailable, "etcdserver: leader changed")),
            Kind::Overloaded
        );
        assert_eq!(
            classify(&st(tonic::Code::Unavailable, "etcdserver: no leader")),
            Kind::Overloaded
        );
        assert_eq!(
            classify(&st(tonic::Code::Unavailable, "connection refused")),
            Kind::MemberDown
        );
        assert_eq!(
            classify(&st(tonic::Code::Unknown, "h2 protocol error")),
            Kind::MemberDown
        );
        assert_eq!(
            classify(&st(
                tonic::Code::PermissionDenied,
                "etcdserver: permission denied"
            )),
            Kind::Final
        );
        assert_eq!(
            classify(&st(
                tonic::Code::NotFound,
                "etcdserver: requested lease not found"
            )),
            Kind::Final
        );
        // etcd's gRPC proxy passes etcd's errors on as `Unknown`.
        assert_eq!(
            classify(&st(tonic::Code::Unknown, "etcdserver: leader changed")),
            Kind::Overloaded
        );
        assert_eq!(
            classify(&st(tonic::Code::Unknown, "etcdserver: permission denied")),
            Kind::Final
        );
        assert_eq!(
            classify(&st(tonic::Code::Unavailable, "etcdserver: server stopped")),
            Kind::MemberDown
        );
        assert_eq!(
            classify(&st(
                tonic::Code::FailedPrecondition,
                "etcdserver: not capable"
            )),
            Kind::Overloaded
        );
        // Whole descriptions only: a message that merely mentions one is not it.
        assert_eq!(
            classify(&st(
                tonic::Code::InvalidArgument,
                "key \"etcdserver: no leader\" is bad"
            )),
            Kind::Final
        );
    }

    #[test]
    fn jitter_stays_within_half_to_whole() {
        for _ in 0..100 {
            let j = jitter(Duration::from_millis(100));
            assert!(
                j >= Duration::from_millis(50) && j <= Duration::from_millis(100),
                "{j:?}"
            );
        }
    }
}

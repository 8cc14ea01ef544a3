//! The one error type of etcdlock. Every binding mirrors [`ErrorCode`] one-to-one:
//! C status codes, Java exception subclasses, Python exception classes, JS `error.code`.

use std::fmt;

/// What went wrong, as a stable code. The numeric values are the C ABI's status codes
/// (0 is success there) and never change once released.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(i32)]
pub enum ErrorCode {
    /// Empty or oversized name, TTL out of range, bad endpoint, bad TLS file, misuse.
    InvalidArgument = 1,
    /// The lock was not acquired within the caller's deadline.
    Timeout = 2,
    /// `try_lock` found the lock held by someone else.
    WouldBlock = 3,
    /// The hold ended (see [`Error::loss_reason`]), or the waiter's session died.
    LockLost = 4,
    /// Unlock or guarded operation on a lock this handle does not hold (e.g. after unlock).
    NotHeld = 5,
    /// The caller cancelled the wait.
    Cancelled = 6,
    /// etcd unreachable after retries (the message names the endpoints).
    Unavailable = 7,
    /// Credentials rejected.
    AuthFailed = 8,
    /// RBAC denies access to the key range.
    PermissionDenied = 9,
    /// The client was closed (or belongs to the parent of a forked process).
    Closed = 10,
    /// A bug in etcdlock; never a crash.
    Internal = 11,
    /// The wait would close a cycle of clients waiting on each other's
    /// holds (only with [`crate::LockOptions::detect_deadlock`]); the message
    /// names the cycle. Give up a hold and try again.
    Deadlock = 12,
}

impl ErrorCode {
    /// Every code, in numeric order (for bindings that generate their mirrors).
    pub const ALL: [ErrorCode; 12] = [
        ErrorCode::InvalidArgument,
        ErrorCode::Timeout,
        ErrorCode::WouldBlock,
        ErrorCode::LockLost,
        ErrorCode::NotHeld,
        ErrorCode::Cancelled,
        ErrorCode::Unavailable,
        ErrorCode::AuthFailed,
        ErrorCode::PermissionDenied,
        ErrorCode::Closed,
        ErrorCode::Internal,
        ErrorCode::Deadlock,
    ];

    /// The name every language uses for this code (`"LockLost"`, ...).
    pub fn name(self) -> &'static str {
        match self {
            ErrorCode::InvalidArgument => "InvalidArgument",
            ErrorCode::Timeout => "Timeout",
            ErrorCode::WouldBlock => "WouldBlock",
            ErrorCode::LockLost => "LockLost",
            ErrorCode::NotHeld => "NotHeld",
            ErrorCode::Cancelled => "Cancelled",
            ErrorCode::Unavailable => "Unavailable",
            ErrorCode::AuthFailed => "AuthFailed",
            ErrorCode::PermissionDenied => "PermissionDenied",
            ErrorCode::Closed => "Closed",
            ErrorCode::Internal => "Internal",
            ErrorCode::Deadlock => "Deadlock",
        }
    }

    /// The code for a C status value, if any.
    pub fn from_i32(v: i32) -> Option<ErrorCode> {
        ErrorCode::ALL.iter().copied().find(|c| *c as i32 == v)
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Why a held lock ended without the holder unlocking it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(i32)]
pub enum LossReason {
    /// etcd reported the session's lease gone (expired or revoked).
    LeaseExpired = 1,
    /// Our lock key was deleted (by an operator, a revoke, or a compare that failed).
    KeyDeleted = 2,
    /// No keep-alive was acknowledged in time: the local validity window
    /// (last acknowledged keep-alive send time + TTL - margin) ran out.
    ConnectionLost = 3,
    /// The client was closed while the lock was held.
    ClientClosed = 4,
}

impl LossReason {
    /// Every reason, in numeric order (for bindings that generate their mirrors).
    pub const ALL: [LossReason; 4] = [
        LossReason::LeaseExpired,
        LossReason::KeyDeleted,
        LossReason::ConnectionLost,
        LossReason::ClientClosed,
    ];

    /// The name every language uses for this reason.
    pub fn name(self) -> &'static str {
        match self {
            LossReason::LeaseExpired => "LeaseExpired",
            LossReason::KeyDeleted => "KeyDeleted",
            LossReason::ConnectionLost => "ConnectionLost",
            LossReason::ClientClosed => "ClientClosed",
        }
    }

    /// The reason for a C value, if any.
    pub fn from_i32(v: i32) -> Option<LossReason> {
        LossReason::ALL.into_iter().find(|r| *r as i32 == v)
    }
}

impl fmt::Display for LossReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// An etcdlock error: a [`ErrorCode`], a message that names the lock and the
/// endpoints (never a password, token or key material), and for
/// [`ErrorCode::LockLost`] the [`LossReason`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{code}: {message}")]
pub struct Error {
    code: ErrorCode,
    message: String,
    reason: Option<LossReason>,
}

/// `Result<T, etcdlock::Error>`.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// A new error with this code and message.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Error {
        Error {
            code,
            message: message.into(),
            reason: None,
        }
    }

    /// An error with a loss reason (bindings rebuilding a core error).
    pub fn with_reason(
        code: ErrorCode,
        reason: Option<LossReason>,
        message: impl Into<String>,
    ) -> Error {
        Error {
            code,
            message: message.into(),
            reason,
        }
    }

    /// Whether the same call may succeed if made again: the lock was busy or
    /// etcd did not answer in time (`Timeout`, `WouldBlock`, `Unavailable`).
    /// Everything else needs a change first (arguments, credentials, a new
    /// acquisition after a loss).
    pub fn retryable(&self) -> bool {
        matches!(
            self.code,
            ErrorCode::Timeout | ErrorCode::WouldBlock | ErrorCode::Unavailable
        )
    }

    pub(crate) fn lost(reason: LossReason, message: impl Into<String>) -> Error {
        Error {
            code: ErrorCode::LockLost,
            message: message.into(),
            reason: Some(reason),
        }
    }

    pub(crate) fn invalid(message: impl Into<String>) -> Error {
        Error::new(ErrorCode::InvalidArgument, message)
    }

    /// The stable code.
    pub fn code(&self) -> ErrorCode {
        self.code
    }

    /// The message alone, without the code prefix.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// For `LockLost`: why the hold ended.
    pub fn loss_reason(&self) -> Option<LossReason> {
        self.reason
    }

    /// Prefix the message with context such as `lock "orders"`.
    pub(crate) fn context(mut self, ctx: impl fmt::Display) -> Error {
        self.message = format!("{ctx}: {}", self.message);
        self
    }

    /// Map an etcd-client error. `endpoints` is the redacted endpoint list for the message.
    pub(crate) fn from_etcd(e: etcd_client::Error, endpoints: &str) -> Error {
        use etcd_client::Error as E;
        match e {
            E::GRpcStatus(st) => {
                let msg = st.message().to_string();
                let lower = msg.to_ascii_lowercase();
                let code = match st.code() {
                    _ if lower.contains("authentication failed")
                        || lower.contains("invalid auth token")
                        || lower.contains("user name is empty")
                        || lower.contains("user name not found")
                        // Credentials given to an etcd that has auth off.
                        || lower.contains("authentication is not enabled") =>
                    {
                        ErrorCode::AuthFailed
                    }
                    _ if lower.contains("permission denied") => ErrorCode::PermissionDenied,
                    _ if lower.contains("request is too large")
                        || lower.contains("too many operations") =>
                    {
                        ErrorCode::InvalidArgument
                    }
                    _ if lower.contains("requested lease not found") => ErrorCode::LockLost,
                    tonic::Code::Unauthenticated => ErrorCode::AuthFailed,
                    tonic::Code::PermissionDenied => ErrorCode::PermissionDenied,
                    tonic::Code::InvalidArgument | tonic::Code::OutOfRange => {
                        ErrorCode::InvalidArgument
                    }
                    tonic::Code::ResourceExhausted => ErrorCode::InvalidArgument,
                    tonic::Code::Unavailable
                    | tonic::Code::DeadlineExceeded
                    | tonic::Code::Aborted
                    | tonic::Code::Cancelled
                    | tonic::Code::Unknown => ErrorCode::Unavailable,
                    _ => ErrorCode::Internal,
                };
                let mut err = Error::new(code, format!("etcd at {endpoints}: {}", redact(&msg)));
                if code == ErrorCode::LockLost {
                    err.reason = Some(LossReason::LeaseExpired);
                }
                err
            }
            E::InvalidArgs(m) => Error::invalid(redact(&m)),
            E::InvalidUri(u) => Error::invalid(format!("bad endpoint: {u}")),
            E::EndpointError(m) => Error::invalid(format!("bad endpoint: {}", redact(&m))),
            E::TransportError(t) => Error::new(
                ErrorCode::Unavailable,
                format!("etcd at {endpoints}: {}", transport_msg(&t)),
            ),
            E::IoError(io) => {
                Error::new(ErrorCode::Unavailable, format!("etcd at {endpoints}: {io}"))
            }
            E::LeaseKeepAliveError(m) | E::WatchError(m) => Error::new(
                ErrorCode::Unavailable,
                format!("etcd at {endpoints}: {}", redact(&m)),
            ),
            other => Error::new(ErrorCode::Internal, redact(&other.to_string())),
        }
    }
}

fn transport_msg(t: &dyn std::error::Error) -> String {
    // tonic's transport errors hide the cause one or two levels down.
    let mut out = t.to_string();
    let mut src = t.source();
    while let Some(s) = src {
        out.push_str(": ");
        out.push_str(&s.to_string());
        src = s.source();
    }
    redact(&out)
}

/// Messages from etcd never carry passwords, but tokens can appear in some gRPC
/// metadata errors; strip anything that looks like one.
fn redact(msg: &str) -> String {
    let mut out = String::with_capacity(msg.len());
    for (i, word) in msg.split(' ').enumerate() {
        if i > 0 {
            out.push(' ');
        }
        let looks_secret = word.len() >= 16
            && word.contains('.')
            && word
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c));
        if looks_secret {
            out.push_str("<redacted>");
        } else {
            out.push_str(word);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_and_reasons_round_trip_through_their_numbers_and_names() {
        for c in ErrorCode::ALL {
            assert_eq!(ErrorCode::from_i32(c as i32), Some(c));
        }
        for r in LossReason::ALL {
            assert_eq!(LossReason::from_i32(r as i32), Some(r));
            assert!(!r.name().is_empty());
        }
        assert_eq!(ErrorCode::from_i32(0), None);
    }

    #[test]
    fn redaction_hides_token_shaped_words_only() {
        assert_eq!(
            redact("bad token abcdefghij.klmnopqrstu here"),
            "bad token <redacted> here"
        );
        assert_eq!(
            redact("etcdserver: too many requests"),
            "etcdserver: too many requests"
        );
    }

    #[test]
    fn grpc_statuses_map_to_codes() {
        let st = |code, msg: &str| {
            etcd_client::Error::GRpcStatus(tonic::Status::new(code, msg.to_string()))
        };
        let cases = [
            (
                st(
                    tonic::Code::InvalidArgument,
                    "etcdserver: authentication failed, invalid user ID or password",
                ),
                ErrorCode::AuthFailed,
            ),
            (
                st(
                    tonic::Code::FailedPrecondition,
                    "etcdserver: authentication is not enabled",
                ),
                ErrorCode::AuthFailed,
            ),
            (
                st(
                    tonic::Code::PermissionDenied,
                    "etcdserver: permission denied",
                ),
                ErrorCode::PermissionDenied,
            ),
            (
                st(
                    tonic::Code::NotFound,
                    "etcdserver: requested lease not found",
                ),
                ErrorCode::LockLost,
            ),
            (
                st(tonic::Code::Unavailable, "etcdserver: leader changed"),
                ErrorCode::Unavailable,
            ),
            (
                st(
                    tonic::Code::InvalidArgument,
                    "etcdserver: request is too large",
                ),
                ErrorCode::InvalidArgument,
            ),
        ];
        for (e, want) in cases {
            let got = Error::from_etcd(e, "http://127.0.0.1:1");
            assert_eq!(got.code(), want, "{got}");
            assert!(
                got.message().contains("127.0.0.1:1") || want == ErrorCode::InvalidArgument,
                "{got}"
            );
        }
    }
}

//! Behind real etcd infrastructure: etcd's gRPC proxy (26), nginx as a gRPC
//! load balancer sending GOAWAY every 50 requests (27), and a client's
//! `close()` while it is cut off (28); 32 and 33 are 27 and 28 over TLS.

use super::*;

mod balancer;
mod close;
mod proxy;

pub use balancer::grpc_lb_goaway;
pub use close::close_during_fault;
pub use proxy::grpc_proxy;

/// A lost hold, recorded with its loss.
fn record_lost(
    checker: &Checker,
    lock: &str,
    g: &etcdlock::Guard,
    acquired_ns: u64,
    loss: &etcdlock::Loss,
    reported_ns: u64,
    client: String,
) {
    let at = instant_to_mono_ns(loss.at);
    checker.record(Hold {
        lock: lock.into(),
        token: g.fencing_token(),
        acquired_ns,
        ended_ns: at,
        client,
        loss: Some(LossInfo {
            reason: loss.reason.name().into(),
            at_ns: at,
            reported_ns,
        }),
        ..Default::default()
    });
}

/// The request timeout of the client cut off by a fault (26 and 28).
const A_REQUEST_TIMEOUT: Duration = Duration::from_secs(1);

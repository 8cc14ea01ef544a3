//! The one list of metric names, and the Prometheus text form of a
//! snapshot. Every exporter uses these names: the CLI's `/metrics`, Java's
//! Micrometer binder (dotted names; Micrometer's Prometheus registry turns
//! them into the same underscored names), and the Python and Node exporters.

use std::fmt::Write;

use super::{AcquireResult, Metrics};
use crate::error::LossReason;

/// Upper bounds (seconds) of the acquisition wait histogram's buckets.
pub const WAIT_BUCKETS: [f64; 12] = [
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0, 30.0,
];

/// One metric: its dotted name (Micrometer), its Prometheus name, type and help.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MetricInfo {
    /// Micrometer's name (`etcdlock.acquire`).
    pub name: &'static str,
    /// The Prometheus family name (`etcdlock_acquire_seconds`).
    pub prometheus: &'static str,
    /// `counter`, `gauge`, `histogram` or `summary` (a sum and a count, no
    /// quantiles): the Prometheus type its samples are written as.
    pub kind: &'static str,
    /// One line of help.
    pub help: &'static str,
    /// The label its series carry, if any (`result`, `reason`).
    pub label: Option<&'static str>,
}

/// Every metric an etcdlock client exposes.
pub const METRICS: [MetricInfo; 8] = [
    MetricInfo {
        name: "etcdlock.acquire",
        prometheus: "etcdlock_acquire_seconds",
        kind: "histogram",
        help: "Acquisition calls by result, and how long their callers waited.",
        label: Some("result"),
    },
    MetricInfo {
        name: "etcdlock.waiting",
        prometheus: "etcdlock_waiting",
        kind: "gauge",
        help: "Acquisition calls in progress.",
        label: None,
    },
    MetricInfo {
        name: "etcdlock.held",
        prometheus: "etcdlock_held",
        kind: "gauge",
        help: "Locks, permits and leaderships held now.",
        label: None,
    },
    MetricInfo {
        name: "etcdlock.hold",
        prometheus: "etcdlock_hold_seconds",
        kind: "summary",
        help: "Ended holds (released or lost) and how long they lasted in all.",
        label: None,
    },
    MetricInfo {
        name: "etcdlock.lost",
        prometheus: "etcdlock_lost_total",
        kind: "counter",
        help: "Holds lost, by reason.",
        label: Some("reason"),
    },
    MetricInfo {
        name: "etcdlock.keepalive",
        prometheus: "etcdlock_keepalive_total",
        kind: "counter",
        help: "Session keep-alives acknowledged by etcd.",
        label: None,
    },
    MetricInfo {
        name: "etcdlock.keepalive.rtt",
        prometheus: "etcdlock_keepalive_rtt_seconds",
        kind: "gauge",
        help: "Round trip of the last acknowledged keep-alive.",
        label: None,
    },
    MetricInfo {
        name: "etcdlock.etcd.member.failures",
        prometheus: "etcdlock_etcd_member_failures_total",
        kind: "counter",
        help: "Requests that failed on an etcd member (the member is then avoided for a while).",
        label: None,
    },
];

fn info(name: &str) -> &'static MetricInfo {
    METRICS
        .iter()
        .find(|m| m.name == name)
        .expect("a listed metric")
}

fn head(out: &mut String, m: &MetricInfo) {
    let _ = writeln!(out, "# HELP {} {}", m.prometheus, m.help);
    let _ = writeln!(out, "# TYPE {} {}", m.prometheus, m.kind);
}

/// `{a="x",b="y"}` with the values escaped, or nothing.
fn labels(pairs: &[(&str, &str)]) -> String {
    if pairs.is_empty() {
        return String::new();
    }
    let inner: Vec<String> = pairs
        .iter()
        .map(|(k, v)| {
            format!(
                "{k}=\"{}\"",
                v.replace('\\', "\\\\")
                    .replace('"', "\\\"")
                    .replace('\n', "\\n")
            )
        })
        .collect();
    format!("{{{}}}", inner.join(","))
}

impl Metrics {
    /// This snapshot in the Prometheus text exposition format (version
    /// 0.0.4), with `extra` labels on every series (e.g. `[("lock", "nightly")]`).
    pub fn to_prometheus(&self, extra: &[(&str, &str)]) -> String {
        let mut out = String::new();
        let with = |more: &[(&str, &str)]| {
            let mut v: Vec<(&str, &str)> = extra.to_vec();
            v.extend_from_slice(more);
            labels(&v)
        };
        let m = info("etcdlock.acquire");
        head(&mut out, m);
        for (i, r) in AcquireResult::ALL.iter().enumerate() {
            let mut cumulative = 0;
            for (b, le) in WAIT_BUCKETS
                .iter()
                .map(|le| le.to_string())
                .chain(["+Inf".to_string()])
                .enumerate()
            {
                cumulative += self.wait_histogram[i][b];
                let _ = writeln!(
                    out,
                    "{}_bucket{} {cumulative}",
                    m.prometheus,
                    with(&[("result", r.name()), ("le", &le)])
                );
            }
            let a = self.acquisitions[i];
            let _ = writeln!(
                out,
                "{}_sum{} {}",
                m.prometheus,
                with(&[("result", r.name())]),
                a.wait_total.as_secs_f64()
            );
            let _ = writeln!(
                out,
                "{}_count{} {}",
                m.prometheus,
                with(&[("result", r.name())]),
                a.count
            );
        }
        for (name, v) in [
            ("etcdlock.waiting", self.waiting),
            ("etcdlock.held", self.held),
        ] {
            let m = info(name);
            head(&mut out, m);
            let _ = writeln!(out, "{}{} {v}", m.prometheus, with(&[]));
        }
        let m = info("etcdlock.hold");
        head(&mut out, m);
        let _ = writeln!(
            out,
            "{}_sum{} {}",
            m.prometheus,
            with(&[]),
            self.hold_total.as_secs_f64()
        );
        let _ = writeln!(
            out,
            "{}_count{} {}",
            m.prometheus,
            with(&[]),
            self.holds_ended
        );
        let m = info("etcdlock.lost");
        head(&mut out, m);
        for r in LossReason::ALL {
            let _ = writeln!(
                out,
                "{}{} {}",
                m.prometheus,
                with(&[("reason", r.name())]),
                self.lost(r)
            );
        }
        let m = info("etcdlock.keepalive");
        head(&mut out, m);
        let _ = writeln!(out, "{}{} {}", m.prometheus, with(&[]), self.keepalives);
        let m = info("etcdlock.keepalive.rtt");
        head(&mut out, m);
        let rtt = self
            .keepalive_rtt
            .map(|d| d.as_secs_f64())
            .unwrap_or(f64::NAN);
        let _ = writeln!(out, "{}{} {rtt}", m.prometheus, with(&[]));
        let m = info("etcdlock.etcd.member.failures");
        head(&mut out, m);
        let _ = writeln!(
            out,
            "{}{} {}",
            m.prometheus,
            with(&[]),
            self.member_failures
        );
        out
    }
}

#[cfg(test)]
mod tests {
    use super::super::Recorder;
    use super::*;
    use crate::error::{Error, ErrorCode};

    #[test]
    fn every_family_has_help_type_and_consistent_buckets() {
        let r = Recorder::new();
        r.acquiring().finish(&Ok(()));
        r.acquiring()
            .finish(&Err::<(), _>(Error::new(ErrorCode::Timeout, "t")));
        let text = r.snapshot().to_prometheus(&[("lock", "a\"b")]);
        for m in METRICS {
            assert!(
                text.contains(&format!("# TYPE {} {}\n", m.prometheus, m.kind)),
                "{}",
                m.prometheus
            );
        }
        assert!(
            text.contains(
                "etcdlock_acquire_seconds_count{lock=\"a\\\"b\",result=\"acquired\"} 1\n"
            ),
            "{text}"
        );
        assert!(text.contains("etcdlock_acquire_seconds_bucket{lock=\"a\\\"b\",result=\"timeout\",le=\"+Inf\"} 1\n"), "{text}");
        assert!(text.contains("etcdlock_keepalive_rtt_seconds{lock=\"a\\\"b\"} NaN\n"));
        // Buckets only grow toward +Inf.
        let mut last = 0;
        for line in text.lines().filter(|l| {
            l.starts_with("etcdlock_acquire_seconds_bucket") && l.contains("result=\"acquired\"")
        }) {
            let v: u64 = line.rsplit(' ').next().unwrap().parse().unwrap();
            assert!(v >= last, "{line}");
            last = v;
        }
        assert_eq!(last, 1);
    }

    /// Every sample belongs to the family declared just above it, with a
    /// suffix its type allows (a `_sum` under a counter would be a family of
    /// its own, of unknown type, to a parser).
    #[test]
    fn every_sample_has_a_suffix_its_declared_type_allows() {
        let text = Recorder::new().snapshot().to_prometheus(&[]);
        let (mut family, mut kind) = ("", "");
        let mut families = Vec::new();
        for line in text.lines() {
            if let Some(rest) = line.strip_prefix("# TYPE ") {
                (family, kind) = rest.split_once(' ').unwrap();
                families.push((family, kind));
                continue;
            }
            if line.starts_with('#') {
                continue;
            }
            let name = line.split(['{', ' ']).next().unwrap();
            let suffix = name
                .strip_prefix(family)
                .unwrap_or_else(|| panic!("{name} outside family {family}"));
            let allowed: &[&str] = match kind {
                "histogram" => &["_bucket", "_sum", "_count"],
                "summary" => &["_sum", "_count"],
                _ => &[""],
            };
            assert!(
                allowed.contains(&suffix),
                "{name}: a {kind} has no {suffix:?} samples"
            );
        }
        let declared: Vec<(&str, &str)> = METRICS.iter().map(|m| (m.prometheus, m.kind)).collect();
        assert_eq!(families, declared);
    }
}

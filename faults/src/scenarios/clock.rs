//! Wall-clock jumps in the client processes (libfaketime): the lock's
//! timing must follow the monotonic clock only.

use super::*;

/// The libfaketime preload library, if installed.
pub fn libfaketime() -> Option<String> {
    for p in [
        "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1",
        "/usr/lib/aarch64-linux-gnu/faketime/libfaketime.so.1",
        "/usr/lib/faketime/libfaketime.so.1",
        "/usr/local/lib/faketime/libfaketime.so.1",
    ] {
        if std::path::Path::new(p).is_file() {
            return Some(p.to_string());
        }
    }
    None
}

/// 11. The wall clock of a holder process jumps by ±262 s (libfaketime), repeatedly.
pub async fn wall_clock_jumps(p: &Profile) -> Outcome {
    let mut o = Outcome::new(11, "wall-clock-jumps");
    let Some(lib) = libfaketime() else {
        o.fail("libfaketime is not installed (apt-get install faketime)".to_string());
        o.figure = "not run".into();
        return o;
    };
    let etcd = Etcd::single();
    let eps = etcd.endpoints();
    let ns = unique_ns("clock");
    let mut rawc = raw(&eps).await;
    let from = current_revision(&mut rawc).await;
    let checker = Arc::new(Checker::new());
    let counters = Arc::new(Counters::default());
    let file = etcd.dir().join("faketime.rc");
    std::fs::write(&file, "+0\n").expect("write faketime file");
    let secs_run = p.fault_secs.max(8);
    let mut child = ChildProc::spawn(
        json!({"mode": "workload", "endpoints": eps, "ns": ns, "ttl": TTL, "secs": secs_run, "clients": 2, "locks": 2, "hold_ms": 10}),
        &[
            ("LD_PRELOAD", lib.clone()),
            ("FAKETIME_TIMESTAMP_FILE", file.display().to_string()),
            ("FAKETIME_NO_CACHE", "1".into()),
            ("FAKETIME_DONT_FAKE_MONOTONIC", "1".into()),
            ("DONT_FAKE_MONOTONIC", "1".into()),
        ],
    );
    let mut w = Workload::new(eps.clone(), &ns);
    w.clients = 2;
    w.locks = 2;
    w.hold = Duration::from_millis(10);
    w.client_prefix = "parent-c".into();
    let (stop, h) = start_workload(w, checker.clone(), counters.clone());
    let rounds = run_rounds(
        &mut ClockJump::new(file.clone()),
        Duration::from_secs(secs_run),
        0,
    )
    .await;
    o.failures.extend(rounds.failures);
    let jumps = rounds.faults;
    stop.cancel();
    let _ = h.await;
    o.faults = jumps;
    let lines = child.rest(Duration::from_secs(30)).await;
    child.wait().await;
    let (mut child_acq, mut child_losses, mut long) = (0u64, 0u64, None);
    let (mut off_min, mut off_max) = (i64::MAX, i64::MIN);
    let mut done = false;
    for l in &lines {
        let parts: Vec<String> = l.split_whitespace().map(String::from).collect();
        match parts.first().map(|s| s.as_str()) {
            Some("HOLD") => match parse_hold(&parts) {
                Some(h) => {
                    if h.loss.is_some() {
                        child_losses += 1;
                    }
                    checker.record(h)
                }
                None => o.fail(format!("bad HOLD line {l}")),
            },
            Some("WALL") if parts.len() == 3 => {
                let wall: i64 = parts[1].parse().unwrap_or(0);
                let mono: i64 = parts[2].parse::<i64>().unwrap_or(0) / 1_000_000;
                off_min = off_min.min(wall - mono);
                off_max = off_max.max(wall - mono);
            }
            Some("LONG") if parts.len() == 3 => long = Some((parts[1].clone(), parts[2].clone())),
            Some("DONE") if parts.len() >= 2 => {
                done = true;
                child_acq = parts[1].parse().unwrap_or(0);
            }
            _ => {}
        }
    }
    let span_s = if off_max >= off_min {
        (off_max - off_min) as f64 / 1000.0
    } else {
        0.0
    };
    let r = finish(&mut o, &checker, &mut rawc, &ns, Some(from)).await;
    let parent_losses = counters.losses.load(Ordering::Relaxed);
    o.acquisitions = counters.acquisitions.load(Ordering::Relaxed) + child_acq + 1;
    let long_ok = matches!(&long, Some((_, l)) if l == "none");
    let false_losses = child_losses + parent_losses + u64::from(!long_ok);
    o.expect(done, || "the child did not finish".into());
    o.expect(span_s >= 500.0, || {
        format!("the child's wall clock moved by only {span_s:.0} s: libfaketime not effective")
    });
    o.expect(false_losses == 0, || format!("{false_losses} false losses (child {child_losses}, parent {parent_losses}, long hold {long:?})"));
    o.expect(child_acq > 0, || "the child acquired nothing".into());
    o.figure = format!(
        "{jumps} wall-clock jumps (+262 s / -262 s / 0) in a holder process under libfaketime (observed wall-clock span {span_s:.0} s), {} acquisitions across 2 processes ({child_acq} by the jumping one), one hold kept across all jumps ({} checks), {false_losses} false losses; {}",
        o.acquisitions,
        long.as_ref().map(|l| l.0.as_str()).unwrap_or("?"),
        r.summary()
    );
    o
}

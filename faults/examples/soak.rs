//! Soak profile: loop the fault scenarios for a while and print the totals.
//!
//! ```text
//! cargo run -p etcdlock-faults --release --example soak -- --soak 10m
//! ```
//! DURATION is `90s`, `10m`, `2h` or plain seconds. `--scenarios 1,4,8` picks
//! scenarios (default: all; 12 and 13 are scenarios 2 and 3 with a Python
//! holder process, 20-22 and 23-25 with a Java, Node and C one). Exits
//! non-zero if any round failed.

use std::time::{Duration, Instant};

use etcdlock_faults::scenarios::{self, Profile};

fn parse_duration(s: &str) -> Option<Duration> {
    let (num, mul) = match s.chars().last()? {
        's' => (&s[..s.len() - 1], 1),
        'm' => (&s[..s.len() - 1], 60),
        'h' => (&s[..s.len() - 1], 3600),
        _ => (s, 1),
    };
    num.parse::<u64>()
        .ok()
        .map(|n| Duration::from_secs(n * mul))
}

fn main() {
    etcdlock_faults::set_child_args(&[]);
    if etcdlock_faults::child_main_if_requested() {
        return;
    }
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut soak = Duration::from_secs(600);
    let mut ids: Vec<u32> = scenarios::ALL
        .iter()
        .chain(scenarios::PARTITIONS.iter())
        .chain(scenarios::INFRA.iter())
        .chain(scenarios::FLEET.iter())
        .copied()
        .collect();
    let mut i = 0;
    while i < args.len() {
        match args[i].as_str() {
            "--soak" => {
                soak = args
                    .get(i + 1)
                    .and_then(|s| parse_duration(s))
                    .unwrap_or_else(|| {
                        eprintln!("usage: soak --soak DURATION [--scenarios 1,2,...]");
                        std::process::exit(2)
                    });
                i += 1;
            }
            "--scenarios" => {
                ids = args
                    .get(i + 1)
                    .map(|s| s.split(',').filter_map(|x| x.trim().parse().ok()).collect())
                    .unwrap_or_default();
                i += 1;
            }
            other => {
                eprintln!(
                    "unknown argument {other}; usage: soak --soak DURATION [--scenarios 1,2,...]"
                );
                std::process::exit(2);
            }
        }
        i += 1;
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_all()
        .build()
        .expect("runtime");
    let profile = Profile::soak();
    let start = Instant::now();
    let mut outcomes = Vec::new();
    let (mut rounds, mut acquisitions, mut faults, mut violations, mut failed) =
        (0u64, 0u64, 0u64, 0u64, 0u64);
    println!(
        "soak: {soak:?}, scenarios {ids:?}, seed {}",
        etcdlock_faults::seed()
    );
    'outer: loop {
        for &id in &ids {
            if start.elapsed() >= soak {
                break 'outer;
            }
            let o = rt.block_on(scenarios::run(id, &profile));
            println!("[{:>6.0}s] {}", start.elapsed().as_secs_f64(), o.line());
            rounds += 1;
            acquisitions += o.acquisitions;
            faults += o.faults;
            violations += o.violations;
            if !o.passed() {
                failed += 1;
            }
            outcomes.push(o.to_json());
        }
    }
    println!(
        "soak totals: {:.0} s, {rounds} scenario runs, {acquisitions} acquisitions, {faults} faults injected, {violations} violations, {failed} failed runs",
        start.elapsed().as_secs_f64()
    );
    println!(
        "{}",
        etcdlock_faults::report::write("soak", &outcomes, start.elapsed().as_secs_f64())
    );
    println!(
        "report: {}",
        etcdlock_faults::report::report_dir().display()
    );
    if failed > 0 || violations > 0 {
        std::process::exit(1);
    }
}

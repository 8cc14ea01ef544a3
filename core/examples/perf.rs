// Throwaway profiling harness (not committed).
use std::time::{Duration, Instant};
use etcdlock::{Client, ClientOptions};
fn p50(mut v: Vec<Duration>) -> f64 { v.sort(); v[v.len()/2].as_secs_f64()*1000.0 }
fn cpu() -> f64 { let s = std::fs::read_to_string("/proc/self/stat").unwrap(); let f: Vec<&str> = s.rsplit(')').next().unwrap().split_whitespace().collect(); (f[11].parse::<f64>().unwrap() + f[12].parse::<f64>().unwrap()) * 10.0 }
#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let eps = vec!["127.0.0.1:23790".to_string()];
    let n = 4000;
    let mode = std::env::args().nth(1).unwrap_or_default();
    let mut o = ClientOptions::new(eps.clone()).with_namespace("perf/");
    o.watch_held_keys = std::env::var("NOWATCH").is_err();
    let c = Client::connect(o).await.unwrap();
    if mode == "floor" || mode.is_empty() {
        let c0 = cpu(); let f = etcdlock::bench_floor::txn_delete(&eps, n).await.unwrap(); let c1 = cpu();
        println!("floor p50 {:.3} cpu/op {:.1} us", p50(f), (c1-c0)*1000.0/(n as f64*1.1));
    }
    if mode == "ours" || mode.is_empty() {
        let c0 = cpu(); let v = etcdlock::bench_floor::lock_unlock(&c, "x", n).await.unwrap(); let c1 = cpu();
        println!("ours p50 {:.3} cpu/op {:.1} us", p50(v), (c1-c0)*1000.0/(n as f64));
    }
    if mode == "inter" || mode.is_empty() {
        let (f, o) = etcdlock::bench_floor::interleaved(&eps, &c, "y", n).await.unwrap();
        let (a, b) = (p50(f), p50(o)); println!("interleaved floor {a:.3} ours {b:.3} ratio {:.3}", b/a);
    }
}

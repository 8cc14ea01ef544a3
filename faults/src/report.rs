//! The run's report: `summary.json` and `SUMMARY.md` (a table a user can
//! read) under `<target>/faults-report/`, from every scenario's outcome.
//! The tests write one outcome file per scenario run
//! (`faults-report/outcomes/`); the soak hands its outcomes over directly.

use std::path::PathBuf;

use serde_json::{json, Value};

use crate::history::target_dir;
use crate::scenarios::Outcome;

/// Where the report goes.
pub fn report_dir() -> PathBuf {
    target_dir().join("faults-report")
}

/// Keep one scenario run's outcome for the report (tests: one file each).
pub fn save_outcome(o: &Outcome) {
    let dir = report_dir().join("outcomes");
    let _ = std::fs::create_dir_all(&dir);
    let path = dir.join(format!(
        "{:02}-{}-{}.json",
        o.id,
        o.name,
        std::process::id()
    ));
    let _ = std::fs::write(path, o.to_json().to_string());
}

/// The outcomes saved by [`save_outcome`], by scenario id.
pub fn saved_outcomes() -> Vec<Value> {
    let mut v: Vec<Value> = std::fs::read_dir(report_dir().join("outcomes"))
        .map(|d| {
            d.filter_map(|e| e.ok())
                .filter_map(|e| std::fs::read_to_string(e.path()).ok())
                .filter_map(|s| serde_json::from_str(&s).ok())
                .collect()
        })
        .unwrap_or_default();
    v.sort_by_key(|o| {
        (
            o["id"].as_u64().unwrap_or(0),
            o["name"].as_str().unwrap_or("").to_string(),
        )
    });
    v
}

fn sum(outcomes: &[Value], field: &str) -> u64 {
    outcomes
        .iter()
        .map(|o| o[field].as_u64().unwrap_or(0))
        .sum()
}

/// `summary.json` of the outcomes.
pub fn summary(profile: &str, outcomes: &[Value], wall_secs: f64) -> Value {
    let max_detect = outcomes
        .iter()
        .filter_map(|o| o["max_loss_detect_ms"].as_i64())
        .max();
    let min_gap = outcomes
        .iter()
        .filter_map(|o| o["min_loss_gap_ms"].as_i64())
        .min();
    let porcupine_failed = outcomes
        .iter()
        .filter(|o| o["checkers"]["porcupine"]["result"] != "ok")
        .count();
    json!({
        "profile": profile,
        "wall_secs": (wall_secs * 10.0).round() / 10.0,
        "scenarios": outcomes,
        "scenario_runs": outcomes.len(),
        "acquisitions": sum(outcomes, "acquisitions"),
        "holds": sum(outcomes, "holds"),
        "losses": sum(outcomes, "losses"),
        "faults": sum(outcomes, "faults"),
        "violations": sum(outcomes, "violations"),
        "checkers": {
            "porcupine": {
                "what": "github.com/anishathalye/porcupine v1.3.1 on each scenario's history, partitioned per lock (faults/porcupine: a fenced lock guarding a register)",
                "ops": outcomes.iter().map(|o| o["checkers"]["porcupine"]["ops"].as_u64().unwrap_or(0)).sum::<u64>(),
                "ms": outcomes.iter().map(|o| o["checkers"]["porcupine"]["ms"].as_u64().unwrap_or(0)).sum::<u64>(),
                "not_linearizable": porcupine_failed,
            },
            "ours": {
                "what": "etcdlock-faults checker (faults/src/checker.rs): no overlapping holds, rising tokens, no stale write in etcd's history, losses end before the next holder",
                "violations": outcomes.iter().map(|o| o["checkers"]["ours"]["violations"].as_u64().unwrap_or(0)).sum::<u64>(),
            },
        },
        "max_loss_detect_ms": max_detect,
        "min_loss_gap_ms": min_gap,
        "failed_runs": outcomes.iter().filter(|o| o["passed"] != true).count(),
    })
}

fn ms(v: &Value) -> String {
    v.as_i64()
        .map(|x| format!("{x} ms"))
        .unwrap_or_else(|| "-".into())
}

fn thousands(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// The Markdown table of a summary.
pub fn markdown(s: &Value) -> String {
    let mut t = String::from(
        "| # | scenario | languages | faults injected | acquisitions | our checker | porcupine (ops) | longest loss detection | tightest gap after a loss |\n|---|---|---|---:|---:|---|---|---:|---:|\n",
    );
    let empty = Vec::new();
    for o in s["scenarios"].as_array().unwrap_or(&empty) {
        let ours = o["checkers"]["ours"]["violations"].as_u64().unwrap_or(0);
        let p = &o["checkers"]["porcupine"];
        t.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} ({}) | {} | {} |\n",
            o["id"],
            o["name"].as_str().unwrap_or(""),
            o["languages"]
                .as_array()
                .map(|l| l
                    .iter()
                    .filter_map(|x| x.as_str())
                    .collect::<Vec<_>>()
                    .join(", "))
                .unwrap_or_default(),
            o["faults"],
            thousands(o["acquisitions"].as_u64().unwrap_or(0)),
            if ours == 0 {
                "0 violations".to_string()
            } else {
                format!("**{ours} violations**")
            },
            if p["result"] == "ok" {
                "linearizable".to_string()
            } else {
                format!("**{}**", p["result"].as_str().unwrap_or("?"))
            },
            thousands(p["ops"].as_u64().unwrap_or(0)),
            ms(&o["max_loss_detect_ms"]),
            ms(&o["min_loss_gap_ms"]),
        ));
    }
    let c = &s["checkers"];
    t.push_str(&format!(
        "| | **total** ({} runs, {:.0} s) | | {} | {} | {} violations | {} not linearizable ({} ops, {} ms) | {} | {} |\n",
        s["scenario_runs"],
        s["wall_secs"].as_f64().unwrap_or(0.0),
        s["faults"],
        thousands(s["acquisitions"].as_u64().unwrap_or(0)),
        c["ours"]["violations"],
        c["porcupine"]["not_linearizable"],
        thousands(c["porcupine"]["ops"].as_u64().unwrap_or(0)),
        c["porcupine"]["ms"],
        ms(&s["max_loss_detect_ms"]),
        ms(&s["min_loss_gap_ms"]),
    ));
    t.push_str("\nLongest loss detection: from a lost hold's local end to the moment the holder's code saw the loss. Tightest gap: between a lost hold's local end and the next acquisition of that lock (the safety margin left).\n");
    t
}

/// Write `summary.json` and `SUMMARY.md`; returns the Markdown.
pub fn write(profile: &str, outcomes: &[Value], wall_secs: f64) -> String {
    let s = summary(profile, outcomes, wall_secs);
    let md = markdown(&s);
    let dir = report_dir();
    let _ = std::fs::create_dir_all(&dir);
    let _ = std::fs::write(
        dir.join("summary.json"),
        serde_json::to_string_pretty(&s).unwrap_or_default(),
    );
    let _ = std::fs::write(dir.join("SUMMARY.md"), &md);
    md
}

//! Reports rendered from the real H100 run directories in tests/runs/ (no GPU needed).

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

/// A scratch copy of a sample run (rendering writes into the run directory).
fn sample(name: &str) -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join(name);
    common::copy_dir(&common::root().join("tests/runs").join(name), &dir);
    (tmp, dir)
}

fn nightshift(args: &[&std::ffi::OsStr]) -> (i32, String, String) {
    let out = Command::new(common::nightshift_bin()).args(args).current_dir(common::root()).output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn node_ids(dir: &Path) -> Vec<u64> {
    let log = std::fs::read_to_string(dir.join("events.jsonl")).unwrap();
    let mut ids: Vec<u64> = log
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|e| e["event"] == "node-finished")
        .filter_map(|e| e["id"].as_u64())
        .collect();
    ids.push(0);
    ids.sort_unstable();
    ids
}

#[test]
fn the_replay_run_report_has_the_best_the_certificate_and_every_node() {
    let (_tmp, dir) = sample("softmax-replay");
    let (code, out, err) = nightshift(&["report".as_ref(), dir.as_os_str()]);
    assert_eq!(code, 0, "{out}{err}");
    let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
    let md = std::fs::read_to_string(dir.join("report.md")).unwrap();

    // One set of numbers: the final check's speedup and interval in the headline and the
    // certificate alike (the search measured 1.254x; the final check 1.251x).
    assert!(html.contains("<b>1.251x [1.248, 1.254]</b>"), "headline");
    assert!(md.contains("## Best: node 1, 1.251x [1.248, 1.254] the baseline (re-verified)"), "{md}");
    assert!(md.contains("| best | 0.0889 ms (CV 0.82%), 1.251x [1.248, 1.254] |"), "{md}");
    assert!(!html.contains("<b>1.254x"), "the search-time number is not a headline");

    // Every certificate field, with the values of this run.
    for (field, value) in [
        ("task", "softmax"),
        ("check sizes", "rows=67 cols=4099"),
        ("bench size", "rows=8192 cols=4096"),
        ("seeds", "8 per size, drawn afresh, in the final check"),
        ("tolerance", "1e-8 + 1e-5 x |ref|"),
        ("max errors", "40 cases"),
        ("GPU", "NVIDIA H100 80GB HBM3"),
        ("toolkit", "V13.0.88"),
        ("baseline", "0.1113 ms"),
        ("best", "0.0889 ms"),
        ("sanitizers", "memcheck clean, racecheck clean, initcheck clean, synccheck clean"),
        ("energy", "not measured"),
        ("final check", "passed 8 check seeds"),
        ("sandbox", "landlock on"),
    ] {
        let row = html
            .lines()
            .find(|l| l.contains(&format!("<tr><th>{field}</th>")))
            .unwrap_or_else(|| panic!("no certificate row {field}"));
        assert!(row.contains(value), "{field}: {row}");
    }

    // One tree entry and one reachable report per node.
    let tree = &html[html.find("id=\"tree\"").unwrap()..html.find("id=\"outcomes\"").unwrap()];
    for id in node_ids(&dir) {
        assert_eq!(tree.matches(&format!("href=\"#node-{id}\"")).count(), 1, "node {id} in the tree");
        assert!(html.contains(&format!("<details id=\"node-{id}\"")), "node {id}'s section");
        let report = dir.join(format!("nodes/{id:04}/report.md"));
        assert!(report.is_file(), "{}", report.display());
        assert!(dir.join(format!("nodes/{id:04}/report.json")).is_file());
        assert!(md.contains(&format!("(nodes/{id:04}/report.md)")), "node {id} linked from report.md");
    }

    // Failures by class, and a failure's report says where it failed.
    for class in ["wrong-answer", "out-of-bounds-write", "unwritten-output", "build-error", "no-code", "process-exit"] {
        assert!(md.contains(&format!("- {class}: 1")), "{class} counted");
    }
    let wrong = std::fs::read_to_string(dir.join("nodes/0004/report.md")).unwrap();
    assert!(wrong.contains("**Outcome: wrong-answer**") && wrong.contains("At size rows=1 cols=1 seed"), "{wrong}");
    let best = std::fs::read_to_string(dir.join("nodes/0001/report.md")).unwrap();
    assert!(best.contains("## SASS facts") && best.contains("void softmax_vec4<4>"), "SASS facts per kernel: {best}");
    assert!(best.contains("| parent 0 |") && best.contains("| baseline |"), "numbers beside parent and baseline");
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("nodes/0001/report.json")).unwrap()).unwrap();
    assert_eq!(json["node"]["outcome"], "passed");
    assert!(json["diff"].as_str().unwrap().starts_with("--- node 0"), "the diff against the parent");

    // Self-contained: inline SVG plots, no scripts, nothing fetched.
    assert_eq!(html.matches("<svg").count(), 2, "two plots");
    assert!(!html.contains("<script"), "no scripts");
    for attr in ["src=\"http", "href=\"http", "url(http", "@import"] {
        assert!(!html.contains(attr), "external resource: {attr}");
    }
}

#[test]
fn a_run_still_going_renders_and_shows() {
    let (_tmp, dir) = sample("softmax-tune");
    // Cut the log where node 4 has just finished, as a run in progress would leave it.
    let log = std::fs::read_to_string(dir.join("events.jsonl")).unwrap();
    let mut kept = Vec::new();
    for line in log.lines() {
        kept.push(line);
        if line.contains("\"event\":\"node-finished\"") && line.contains("\"id\":4,") {
            break;
        }
    }
    // Its session's process is this test, alive.
    let cut = kept.join("\n").replacen("\"pid\":", &format!("\"pid\":{},\"was\":", std::process::id()), 1);
    std::fs::write(dir.join("events.jsonl"), cut + "\n").unwrap();
    std::fs::remove_file(dir.join("best.json")).ok();
    std::fs::remove_file(dir.join("summary.json")).ok();
    let (code, out, err) = nightshift(&["report".as_ref(), dir.as_os_str()]);
    assert_eq!(code, 0, "{out}{err}");
    let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
    assert!(html.contains("This run is still going"));
    assert!(html.contains("so far (not re-verified)"), "a best so far is not called re-verified");
    let (code, out, _) = nightshift(&["show".as_ref(), dir.as_os_str()]);
    assert_eq!(code, 0);
    assert!(out.contains("**Still running.**") && out.contains("| 4 |"), "{out}");
    let (code, out, _) = nightshift(&["show".as_ref(), dir.as_os_str(), "3".as_ref()]);
    assert_eq!(code, 0);
    assert!(out.starts_with("# softmax: node 3 (BLOCK-down)"), "{out}");
    let (code, _, err) = nightshift(&["show".as_ref(), dir.as_os_str(), "99".as_ref()]);
    assert_eq!(code, 2);
    assert!(err.contains("no node 99"), "{err}");

    // The same log whose process is gone: stopped, not running, with the way on.
    let log = std::fs::read_to_string(dir.join("events.jsonl")).unwrap();
    std::fs::write(
        dir.join("events.jsonl"),
        log.replacen(&format!("\"pid\":{}", std::process::id()), "\"pid\":4194999", 1),
    )
    .unwrap();
    let (_, out, _) = nightshift(&["show".as_ref(), dir.as_os_str()]);
    assert!(out.contains("**Stopped before it finished**") && out.contains("--resume"), "{out}");
    assert!(!out.contains("Still running"), "{out}");
    let (code, _, err) = nightshift(&["report".as_ref(), "/nonexistent/run".as_ref()]);
    assert_eq!(code, 2);
    assert!(err.contains("run.json"), "{err}");
}

#[test]
fn an_energy_run_gets_the_time_energy_plot_with_its_pareto_front() {
    let (_tmp, dir) = sample("softmax-tune");
    // The sample run measured time only: give each correct node an energy per call, as
    // an --objective energy run records it, cheaper for faster nodes but not strictly.
    let log = std::fs::read_to_string(dir.join("events.jsonl")).unwrap();
    let mut k = 0;
    let edited: Vec<String> = log
        .lines()
        .map(|l| {
            if l.contains("\"passed\":true") && l.contains("\"candidate_ms\":") {
                k += 1;
                let mj = 0.5 + 0.05 * ((k * 7) % 5) as f64;
                l.replacen("\"candidate_ms\":", &format!("\"joules_per_call\":{},\"candidate_ms\":", mj / 1e3), 1)
            } else {
                l.to_string()
            }
        })
        .collect();
    std::fs::write(dir.join("events.jsonl"), edited.join("\n") + "\n").unwrap();
    let (code, out, err) = nightshift(&["report".as_ref(), dir.as_os_str()]);
    assert_eq!(code, 0, "{out}{err}");
    let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
    let plot = &html[html.find("id=\"energy-plot\"").expect("the energy plot")..];
    assert!(plot.contains("Time against energy per call"));
    assert!(plot.matches("<circle").count() >= 8, "one point per correct node");
    let node = std::fs::read_to_string(dir.join("nodes/0005/report.md")).unwrap();
    assert!(node.contains("| node 5 |") && node.contains("energy (mJ/call)"), "{node}");
}

/// The cells of one markdown table row, split where GitHub splits them: at pipes that no
/// backslash escapes.
fn markdown_cells(row: &str) -> usize {
    let inner = row.trim().trim_start_matches('|').trim_end_matches('|');
    let (mut cells, mut escaped) = (1, false);
    for c in inner.chars() {
        if c == '|' && !escaped {
            cells += 1;
        }
        escaped = c == '\\' && !escaped;
    }
    cells
}

/// Every markdown table in `md` (outside fenced blocks): each row has as many cells as
/// the header. Returns how many rows were checked.
fn assert_tables_hold_together(md: &str, what: &str) -> usize {
    let mut header: Option<usize> = None;
    let (mut fenced, mut rows) = (false, 0);
    for line in md.lines() {
        if line.starts_with("```") {
            fenced = !fenced;
        }
        if fenced || !line.starts_with('|') {
            header = None;
            continue;
        }
        match header {
            None => header = Some(markdown_cells(line)),
            Some(n) => {
                assert_eq!(markdown_cells(line), n, "{what}: a row with the wrong number of cells:\n{line}");
                rows += 1;
            }
        }
    }
    rows
}

#[test]
fn markdown_tables_keep_their_shape_when_cells_hold_pipes() {
    for run in ["softmax-replay", "softmax-tune"] {
        let (_tmp, dir) = sample(run);
        let (code, out, err) = nightshift(&["report".as_ref(), dir.as_os_str()]);
        assert_eq!(code, 0, "{out}{err}");
        let md = std::fs::read_to_string(dir.join("report.md")).unwrap();
        // The tolerance is `|out - ref| <= ...`: its pipes must not open new cells.
        let tolerance = md.lines().find(|l| l.starts_with("| tolerance |")).expect("a tolerance row");
        assert_eq!(markdown_cells(tolerance), 2, "{tolerance}");
        assert!(assert_tables_hold_together(&md, run) > 10, "{run}: the certificate and node tables were checked");
        // The certificate is one table from its task to its sandbox: an optional row left
        // out (served shapes, on a task with one size) must not leave a blank line that
        // ends the table there.
        let cert = &md[md.find("## Certificate").expect("a certificate")..];
        let rows: Vec<&str> =
            cert.lines().skip_while(|l| !l.starts_with('|')).take_while(|l| l.starts_with('|')).collect();
        assert!(rows.iter().any(|l| l.starts_with("| sandbox |")), "{run}: the certificate is split:\n{cert}");
        for id in node_ids(&dir) {
            let node = std::fs::read_to_string(dir.join(format!("nodes/{id:04}/report.md"))).unwrap();
            assert_tables_hold_together(&node, &format!("{run} node {id}"));
        }
        let (_, shown, _) = nightshift(&["show".as_ref(), dir.as_os_str()]);
        assert_tables_hold_together(&shown, &format!("{run} show"));
    }
}

#[test]
fn every_report_with_a_best_shows_it_against_the_baseline_in_colour() {
    // The tuner's best (node 5) has the baseline's own kernel.cu and differs in its build
    // options only; the replay's best (node 1) has a new source.
    for (run, changed) in [("softmax-tune", "+-maxrregcount=32"), ("softmax-replay", "+  float4")] {
        let (_tmp, dir) = sample(run);
        let (code, out, err) = nightshift(&["report".as_ref(), dir.as_os_str()]);
        assert_eq!(code, 0, "{out}{err}");
        let md = std::fs::read_to_string(dir.join("report.md")).unwrap();
        let section = &md[md.find("## The best kernel against the baseline").expect(run)..];
        let fenced = &section[section.find("```diff\n").expect("a diff block")..];
        assert!(fenced.contains("\n+++ node ") && fenced.contains(changed), "{run}: {section}");

        let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
        let best = &html[html.find("id=\"best-diff\"").expect(run)..];
        let best = &best[..best.find("</div>").unwrap()];
        assert!(best.contains("<pre class=\"diff\">"), "{run}: {best}");
        assert!(best.contains("<span class=\"d-add\">+"), "{run}: added lines are coloured: {best}");
        assert!(best.contains("<span class=\"d-hunk\">@@"), "{run}: {best}");
    }
    // A node that moved a build option away from its parent's shows that as its diff.
    let (_tmp, dir) = sample("softmax-tune");
    nightshift(&["report".as_ref(), dir.as_os_str()]);
    let node = std::fs::read_to_string(dir.join("nodes/0005/report.md")).unwrap();
    assert!(node.contains("+++ node 5 build options") && node.contains("\n+-maxrregcount=32\n"), "{node}");
}

#[test]
fn the_run_report_counts_the_nodes_within_their_parents_interval() {
    // softmax-tune: nodes 5 and 8, register caps, ran within 1% of their parents (its
    // verdicts have no intervals: the margin alone decides).
    for (run, within) in [("softmax-replay", 0), ("softmax-tune", 2)] {
        let (_tmp, dir) = sample(run);
        let (code, out, err) = nightshift(&["report".as_ref(), dir.as_os_str()]);
        assert_eq!(code, 0, "{out}{err}");
        let line = format!("{within} landed within their parent's interval (no gain that clears the noise)");
        let md = std::fs::read_to_string(dir.join("report.md")).unwrap();
        assert!(md.contains(&line), "{run}: {md}");
        let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
        assert!(html.contains(&format!("<p id=\"within-parent\">{line}")), "{run}");
    }
}

#[test]
fn no_report_shows_an_empty_value_in_parentheses() {
    for run in ["softmax-replay", "softmax-tune"] {
        let (_tmp, dir) = sample(run);
        let (code, out, err) = nightshift(&["report".as_ref(), dir.as_os_str()]);
        assert_eq!(code, 0, "{out}{err}");
        let mut files = vec![dir.join("report.md"), dir.join("report.html")];
        files.extend(node_ids(&dir).iter().map(|id| dir.join(format!("nodes/{id:04}/report.md"))));
        for f in files {
            let text = std::fs::read_to_string(&f).unwrap();
            // A diagnosis without a source line (the roofline has none) once read `roofline ()`.
            for empty in [" ()", "( ", "(, ", ", )", " ` `"] {
                assert!(
                    !text.contains(empty),
                    "{}: `{empty}` in\n{}",
                    f.display(),
                    text.lines().find(|l| l.contains(empty)).unwrap()
                );
            }
        }
    }
}

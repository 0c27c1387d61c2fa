//! The HTML report in a real browser: Debian's headless Chromium (installed by .ci/run)
//! loads the report of a sample GPU run; any console message (a failed load, a parse
//! error) fails the test, and so does a rendered page without the tree, the plots or the
//! certificate. The screenshot stays in target/report-screenshot.png.

mod common;

use std::path::PathBuf;
use std::process::Command;

fn chromium() -> PathBuf {
    which::which("chromium")
        .or_else(|_| which::which("chromium-browser"))
        .expect("this test needs Debian's chromium (.ci/run installs it: apt-get install chromium)")
}

fn headless(extra: &[&str], page: &str) -> (String, String) {
    let profile = tempfile::tempdir().unwrap();
    let out = Command::new(chromium())
        .args(["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run"])
        .args(["--disable-background-networking", "--disable-component-update", "--disable-sync"])
        .args(["--enable-logging=stderr", "--v=0", "--window-size=1200,1800"])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .args(extra)
        .arg(page)
        .output()
        .expect("chromium runs");
    (String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn the_html_report_renders_in_chromium_without_console_errors() {
    let tmp = tempfile::tempdir().unwrap();
    let run = tmp.path().join("softmax-replay");
    let status = Command::new("cp")
        .args(["-r"])
        .arg(common::root().join("tests/runs/softmax-replay"))
        .arg(&run)
        .status()
        .unwrap();
    assert!(status.success());
    let out = Command::new(common::nightshift_bin()).arg("report").arg(&run).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let page = format!("file://{}", run.join("report.html").display());

    let (dom, log) = headless(&["--dump-dom"], &page);
    let console: Vec<&str> = log.lines().filter(|l| l.contains(":CONSOLE")).collect();
    assert!(console.is_empty(), "console messages: {console:#?}");
    for (what, marker) in [
        ("the search tree", "id=\"tree\""),
        ("the plots", "<svg"),
        ("the certificate", "id=\"certificate\""),
        ("the headline", "id=\"headline\""),
    ] {
        assert!(dom.contains(marker), "the rendered page lacks {what}");
    }
    assert!(dom.contains("href=\"#node-10\""), "the tree reaches the last node");

    let shot = common::root().join("target").join("report-screenshot.png");
    let (_, log) = headless(&[&format!("--screenshot={}", shot.display())], &page);
    let bytes = std::fs::read(&shot).unwrap_or_else(|e| panic!("no screenshot ({e}): {log}"));
    assert!(bytes.starts_with(b"\x89PNG") && bytes.len() > 20_000, "a real screenshot");
}

//! The HTML report in a real browser: Debian's headless Chromium (installed by .ci/run)
//! loads the report of a sample GPU run at 1400 px, the width it is read at; any console
//! message (a failed load, a parse error) fails the test, and so does a rendered page
//! without the tree, the plots or the certificate, or plots narrower than the page or with
//! labels too small to read. The screenshot stays in target/report-screenshot.png.

mod common;

use std::path::PathBuf;
use std::process::Command;

/// Measures the column and every plot: its width on screen and its smallest text's size
/// on screen (the SVG's font size times the scale the viewBox is drawn at).
const MEASURE: &str = r#"<script>
const column = document.body.clientWidth - parseFloat(getComputedStyle(document.body).paddingLeft)
  - parseFloat(getComputedStyle(document.body).paddingRight);
const plots = [...document.querySelectorAll('#plots svg')].map(svg => ({
  width: svg.getBoundingClientRect().width,
  smallest_font_px: Math.min(...[...svg.querySelectorAll('text')]
    .map(t => parseFloat(getComputedStyle(t).fontSize) * svg.getScreenCTM().a)),
}));
document.body.setAttribute('data-measured', JSON.stringify({ column, plots }));
</script>"#;

fn chromium() -> PathBuf {
    which::which("chromium")
        .or_else(|_| which::which("chromium-browser"))
        .expect("this test needs Debian's chromium (.ci/run installs it: apt-get install chromium)")
}

/// The window the report is read in.
const WINDOW: &str = "--window-size=1400,1800";

fn headless(extra: &[&str], page: &str) -> (String, String) {
    let profile = tempfile::tempdir().unwrap();
    let out = Command::new(chromium())
        .args(["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run"])
        .args(["--disable-background-networking", "--disable-component-update", "--disable-sync"])
        .args(["--enable-logging=stderr", "--v=0", WINDOW])
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

    // Layout, measured by the browser: a copy of the page with a script that writes what
    // it measured into the DOM (the report itself has no scripts).
    let html = std::fs::read_to_string(run.join("report.html")).unwrap();
    let measuring = run.join("measure.html");
    std::fs::write(&measuring, html.replace("</body>", &format!("{MEASURE}</body>"))).unwrap();
    let (dom, _) = headless(&["--dump-dom"], &format!("file://{}", measuring.display()));
    let measured = dom.split("data-measured=\"").nth(1).and_then(|r| r.split('"').next()).expect("the measurement");
    let m: serde_json::Value = serde_json::from_str(&measured.replace("&quot;", "\"")).unwrap();
    let (column, plots) = (m["column"].as_f64().unwrap(), m["plots"].as_array().unwrap());
    assert!(column >= 1200.0, "the report's column at 1400 px: {m}");
    assert_eq!(plots.len(), 2, "{m}");
    for p in plots {
        assert!(p["width"].as_f64().unwrap() >= 0.98 * column, "a plot as wide as the column: {m}");
        assert!(p["smallest_font_px"].as_f64().unwrap() >= 14.0, "axis labels of 14 px or more on screen: {m}");
    }

    let shot = common::root().join("target").join("report-screenshot.png");
    let (_, log) = headless(&[&format!("--screenshot={}", shot.display())], &page);
    let bytes = std::fs::read(&shot).unwrap_or_else(|e| panic!("no screenshot ({e}): {log}"));
    assert!(bytes.starts_with(b"\x89PNG") && bytes.len() > 20_000, "a real screenshot");
}

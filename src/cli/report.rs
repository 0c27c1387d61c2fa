//! `nightshift report` (a run's HTML and Markdown reports) and `nightshift show` (a run or
//! one node, as text).

use super::{fail, print_json, EXIT_PASSED, EXIT_USAGE};
use std::path::Path;
use std::process::ExitCode;

pub fn report(run_dir: &Path, json: bool) -> ExitCode {
    match crate::report::render(run_dir) {
        Ok(w) => {
            if json {
                print_json(&w);
            } else {
                println!(
                    "{}\n{}\n{} node reports under {}",
                    w.run_html.display(),
                    w.run_md.display(),
                    w.node_reports,
                    run_dir.join("nodes").display()
                );
            }
            ExitCode::from(EXIT_PASSED)
        }
        Err(e) => fail(EXIT_USAGE, &e.to_string()),
    }
}

pub fn show(run_dir: &Path, node: Option<usize>, json: bool) -> ExitCode {
    if json {
        return match crate::report::show_json(run_dir, node) {
            Ok(v) => {
                print_json(&v);
                ExitCode::from(EXIT_PASSED)
            }
            Err(e) => fail(EXIT_USAGE, &e.to_string()),
        };
    }
    match crate::report::show(run_dir, node) {
        Ok(text) => {
            print!("{text}");
            ExitCode::from(EXIT_PASSED)
        }
        Err(e) => fail(EXIT_USAGE, &e.to_string()),
    }
}

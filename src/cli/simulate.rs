//! `nightshift simulate`: the search strategies compared on synthetic tuning landscapes.

use super::{fail, print_json, EXIT_PASSED, EXIT_USAGE};
use std::process::ExitCode;

pub fn run(landscapes: usize, budget: usize, seed: u64, json: bool) -> ExitCode {
    if landscapes < 2 || budget == 0 {
        return fail(EXIT_USAGE, "--landscapes must be at least 2 and --budget at least 1");
    }
    let rows = search::sim::compare(landscapes, budget, seed);
    if json {
        print_json(&rows);
    } else {
        print!("{}", search::sim::table(&rows, landscapes, budget));
    }
    ExitCode::from(EXIT_PASSED)
}

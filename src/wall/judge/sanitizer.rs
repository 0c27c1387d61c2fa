//! compute-sanitizer output: the error count from its summary line, and each reported
//! problem as one line ("Invalid __global__ write of size 4 bytes at oob_write(float *,
//! int)+0xc0 in sanitize.cu:2").

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SanitizerReport {
    pub tool: String,
    /// None when the summary line is missing (the tool itself failed).
    pub errors: Option<u64>,
    pub findings: Vec<String>,
    pub summary: String,
}

impl SanitizerReport {
    pub fn clean(&self) -> bool {
        self.errors == Some(0)
    }
}

fn strip(line: &str) -> Option<&str> {
    line.strip_prefix("=========").map(|l| l.trim_end())
}

pub fn parse_sanitizer(tool: &str, text: &str) -> SanitizerReport {
    let mut errors = None;
    let mut summary = String::new();
    let mut findings: Vec<String> = Vec::new();
    let mut current: Option<String> = None;
    for line in text.lines() {
        let Some(body) = strip(line) else { continue };
        let trimmed = body.trim();
        if let Some(rest) = trimmed.strip_prefix("ERROR SUMMARY:") {
            summary = trimmed.to_string();
            errors = rest.split_whitespace().next().and_then(|n| n.replace(',', "").parse().ok());
            continue;
        }
        if trimmed.starts_with("RACECHECK SUMMARY:") {
            summary = trimmed.to_string();
            // "1 hazard displayed (1 error, 0 warnings)"
            errors = trimmed
                .split('(')
                .nth(1)
                .and_then(|s| s.split_whitespace().next())
                .and_then(|n| n.replace(',', "").parse().ok());
            continue;
        }
        let indented = body.starts_with("     ");
        if trimmed.is_empty() || trimmed == "COMPUTE-SANITIZER" {
            if let Some(f) = current.take() {
                findings.push(f);
            }
            continue;
        }
        if !indented {
            if let Some(f) = current.take() {
                findings.push(f);
            }
            // Consequences of an earlier error, not findings of their own.
            if trimmed.starts_with("Program hit") || trimmed.starts_with("Target application returned") {
                continue;
            }
            current = Some(trimmed.to_string());
        } else if let Some(f) = current.as_mut() {
            let t = trimmed;
            if t.starts_with("at ") || t.starts_with("and ") || t.starts_with("Access to") || t.starts_with("by thread")
            {
                f.push(' ');
                f.push_str(t);
            }
        }
    }
    if let Some(f) = current.take() {
        findings.push(f);
    }
    SanitizerReport { tool: tool.to_string(), errors, findings, summary }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> String {
        std::fs::read_to_string(format!("{}/tests/fixtures/h200/{name}", env!("CARGO_MANIFEST_DIR"))).unwrap()
    }

    #[test]
    fn memcheck_counts_and_locates_the_out_of_bounds_write() {
        let r = parse_sanitizer("memcheck", &fixture("sanitize_memcheck.txt"));
        assert_eq!(r.errors, Some(6));
        assert!(!r.clean());
        assert_eq!(r.findings.len(), 1, "{:?}", r.findings);
        assert!(
            r.findings[0].starts_with(
                "Invalid __global__ write of size 4 bytes at oob_write(float *, int)+0xc0 in sanitize.cu:2"
            ),
            "{}",
            r.findings[0]
        );
        assert!(r.findings[0].contains("out of bounds"));
    }

    #[test]
    fn racecheck_reads_its_own_summary() {
        let r = parse_sanitizer("racecheck", &fixture("sanitize_racecheck.txt"));
        assert_eq!(r.errors, Some(1));
        assert_eq!(r.findings.len(), 1);
        assert!(r.findings[0].contains("race_smem(float *)+0xa0 in sanitize.cu:9"), "{}", r.findings[0]);
    }

    #[test]
    fn clean_runs_are_clean_and_missing_summaries_are_not() {
        assert!(parse_sanitizer("initcheck", &fixture("sanitize_initcheck.txt")).clean());
        let r = parse_sanitizer("memcheck", "========= COMPUTE-SANITIZER\n========= Error: Target application terminated before first instrumented API call\n");
        assert_eq!(r.errors, None);
        assert!(!r.clean());
    }
}

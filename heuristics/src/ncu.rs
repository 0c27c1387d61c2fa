//! Nsight Compute `--csv --page raw` output: one row per profiled launch, one column per
//! metric, an optional units row. Tool chatter (`==PROF==`, `==WARNING==`) and the
//! application's own output may precede the header; numbers carry thousands separators;
//! cells may be empty or `n/a`. Values are normalized to base units (seconds, bytes,
//! hertz) when a units row says otherwise, so `--print-units base` is not required.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex, PoisonError};

/// One profiled kernel launch.
#[derive(Debug, Clone)]
pub struct Launch {
    pub id: String,
    pub kernel: String,
    pub block: String,
    pub grid: String,
    header: Arc<Header>,
    values: Vec<Option<f64>>,
    raw: Vec<String>,
    /// Set only by [`Launch::record_reads`]: the normal path pays one branch per read.
    reads: Option<MetricReads>,
}

/// The metric columns asked of a launch since it began recording (see
/// [`Launch::record_reads`]). Tests compare them with what each tool declares, so a tool
/// cannot come to depend on a column that the reduced ncu request would not collect.
#[derive(Debug, Clone, Default)]
pub struct MetricReads(Arc<Mutex<BTreeSet<String>>>);

impl MetricReads {
    fn note(&self, metric: &str) {
        let mut names = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if !names.contains(metric) {
            names.insert(metric.to_string());
        }
    }

    /// The names recorded so far, and a fresh start.
    pub fn take(&self) -> BTreeSet<String> {
        std::mem::take(&mut *self.0.lock().unwrap_or_else(PoisonError::into_inner))
    }
}

#[derive(Debug)]
struct Header {
    index: HashMap<String, usize>,
    units: Vec<String>,
}

impl Launch {
    /// From now on, every metric name asked of this launch (and of its clones) through
    /// [`get`](Launch::get), [`raw`](Launch::raw), [`unit`](Launch::unit) or
    /// [`has`](Launch::has) is recorded in the returned log, present or not.
    pub fn record_reads(&mut self) -> MetricReads {
        let reads = MetricReads::default();
        self.reads = Some(reads.clone());
        reads
    }

    fn note(&self, metric: &str) {
        if let Some(reads) = &self.reads {
            reads.note(metric);
        }
    }

    /// The metric's value in base units; None when the column is absent or the cell empty.
    pub fn get(&self, metric: &str) -> Option<f64> {
        self.note(metric);
        let i = *self.header.index.get(metric)?;
        self.values.get(i).copied().flatten()
    }

    /// The cell as written.
    pub fn raw(&self, metric: &str) -> Option<&str> {
        self.note(metric);
        let i = *self.header.index.get(metric)?;
        self.raw.get(i).map(String::as_str)
    }

    pub fn unit(&self, metric: &str) -> Option<&str> {
        self.note(metric);
        let i = *self.header.index.get(metric)?;
        self.header.units.get(i).map(String::as_str)
    }

    pub fn has(&self, metric: &str) -> bool {
        self.note(metric);
        self.header.index.contains_key(metric)
    }

    pub fn metric_count(&self) -> usize {
        self.header.index.len()
    }
}

#[derive(Debug, Clone, Default)]
pub struct Profile {
    pub launches: Vec<Launch>,
    /// `==WARNING==` and `==ERROR==` lines ncu printed.
    pub warnings: Vec<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ParseError(pub String);

impl std::fmt::Display for ParseError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ParseError {}

/// Scale to base units, by the unit ncu printed.
fn scale(unit: &str) -> f64 {
    match unit {
        "ns" | "nsecond" => 1e-9,
        "us" | "usecond" => 1e-6,
        "ms" | "msecond" => 1e-3,
        "s" | "second" => 1.0,
        "Kbyte" | "KB" => 1e3,
        "Mbyte" | "MB" => 1e6,
        "Gbyte" | "GB" => 1e9,
        "Tbyte" | "TB" => 1e12,
        "Kbyte/s" | "Kbyte/second" => 1e3,
        "Mbyte/s" | "Mbyte/second" => 1e6,
        "Gbyte/s" | "Gbyte/second" => 1e9,
        "Tbyte/s" | "Tbyte/second" => 1e12,
        "Khz" | "khz" | "KHz" => 1e3,
        "Mhz" | "mhz" | "MHz" => 1e6,
        "Ghz" | "ghz" | "GHz" => 1e9,
        "Kcycle" => 1e3,
        "Mcycle" => 1e6,
        _ => 1.0,
    }
}

/// `"1,234.5"` -> 1234.5; empty, `n/a` and text -> None.
pub fn parse_number(cell: &str) -> Option<f64> {
    let t = cell.trim();
    if t.is_empty() {
        return None;
    }
    let cleaned: String = t.chars().filter(|c| *c != ',').collect();
    cleaned.parse::<f64>().ok().filter(|v| v.is_finite())
}

/// Parses ncu's raw CSV page. Returns an error only when no header row exists at all.
pub fn parse(text: &str) -> Result<Profile, ParseError> {
    let mut warnings = Vec::new();
    let mut header_at = None;
    let mut offset = 0;
    for line in text.split_inclusive('\n') {
        let t = line.trim_start();
        if t.starts_with("==WARNING==") || t.starts_with("==ERROR==") {
            warnings.push(t.trim_end().to_string());
        }
        if header_at.is_none() && t.starts_with("\"ID\",") {
            header_at = Some(offset);
        }
        offset += line.len();
    }
    let Some(start) = header_at else {
        return Err(ParseError(
            "no CSV header (a line starting with \"ID\",) in the ncu output: was it run with --csv --page raw?".into(),
        ));
    };
    let mut reader = csv::ReaderBuilder::new().has_headers(false).flexible(true).from_reader(&text.as_bytes()[start..]);
    let mut records = reader.records();
    let names: Vec<String> = match records.next() {
        Some(Ok(r)) => r.iter().map(str::to_string).collect(),
        _ => return Err(ParseError("unreadable CSV header".into())),
    };
    let index: HashMap<String, usize> = names.iter().enumerate().map(|(i, n)| (n.clone(), i)).collect();
    let id_col = index.get("ID").copied();
    let mut rows: Vec<Vec<String>> = Vec::new();
    let mut units = vec![String::new(); names.len()];
    for (k, rec) in records.enumerate() {
        let Ok(rec) = rec else { continue };
        let cells: Vec<String> = rec.iter().map(str::to_string).collect();
        // The units row: no ID, unit strings in metric columns.
        let id_empty = id_col.map(|c| cells.get(c).is_none_or(|v| v.trim().is_empty())).unwrap_or(false);
        if k == 0 && id_empty {
            for (i, u) in cells.into_iter().enumerate().take(units.len()) {
                units[i] = u;
            }
            continue;
        }
        // Lines ncu or the application printed after the table are not launches.
        if cells.len() < names.len() / 2 || id_empty {
            if let Some(first) = cells.first() {
                if first.starts_with("==WARNING==") || first.starts_with("==ERROR==") {
                    warnings.push(cells.join(","));
                }
            }
            continue;
        }
        rows.push(cells);
    }
    let header = Arc::new(Header { index, units });
    let col = |name: &str| header.index.get(name).copied();
    let (kernel_col, block_col, grid_col) = (col("Kernel Name"), col("Block Size"), col("Grid Size"));
    let launches = rows
        .into_iter()
        .map(|cells| {
            let values = cells
                .iter()
                .enumerate()
                .map(|(i, c)| parse_number(c).map(|v| v * scale(header.units.get(i).map(String::as_str).unwrap_or(""))))
                .collect();
            let get = |c: Option<usize>| c.and_then(|i| cells.get(i)).cloned().unwrap_or_default();
            Launch {
                id: get(id_col),
                kernel: get(kernel_col),
                block: get(block_col),
                grid: get(grid_col),
                header: header.clone(),
                values,
                raw: cells,
                reads: None,
            }
        })
        .collect();
    Ok(Profile { launches, warnings })
}

/// One of Nsight Compute's own rule results (`--page details`), for comparison.
#[derive(Debug, Clone, PartialEq)]
pub struct NcuRule {
    pub kernel: String,
    pub launch: String,
    pub rule: String,
    pub description: String,
    pub estimated_speedup: Option<f64>,
}

/// Reads the rule results out of a `--csv --page details` export.
pub fn parse_rules(text: &str) -> Vec<NcuRule> {
    let Some(start) = text.find("\"ID\",") else { return Vec::new() };
    let mut reader = csv::ReaderBuilder::new().flexible(true).from_reader(&text.as_bytes()[start..]);
    let Ok(headers) = reader.headers().cloned() else { return Vec::new() };
    let col = |n: &str| headers.iter().position(|h| h == n);
    let (Some(k), Some(id), Some(rule), Some(desc)) =
        (col("Kernel Name"), col("ID"), col("Rule Name"), col("Rule Description"))
    else {
        return Vec::new();
    };
    let speed = col("Estimated Speedup");
    let mut out: Vec<NcuRule> = Vec::new();
    for rec in reader.records().flatten() {
        let get = |i: usize| rec.get(i).unwrap_or("").to_string();
        let name = get(rule);
        if name.is_empty() {
            continue;
        }
        let r = NcuRule {
            kernel: get(k),
            launch: get(id),
            rule: name,
            description: get(desc),
            estimated_speedup: speed.and_then(|s| parse_number(rec.get(s).unwrap_or(""))),
        };
        if !out.contains(&r) {
            out.push(r);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str =
        "==PROF== Connected to process 1\n==WARNING== Unable to access 2 metrics\nprogram output line\n\
\"ID\",\"Kernel Name\",\"Block Size\",\"gpu__time_duration.sum\",\"dram__bytes_read.sum\",\"x.pct\"\n\
\"\",\"\",\"\",\"us\",\"Mbyte\",\"%\"\n\
\"0\",\"k(float *, int)\",\"(256, 1, 1)\",\"1,234.5\",\"2.5\",\"\"\n\
\"1\",\"k2\",\"(128, 1, 1)\",\"n/a\",\"1,000\",\"50.5\"\n\
==PROF== Disconnected\n";

    #[test]
    fn reads_rows_units_separators_and_gaps() {
        let p = parse(SAMPLE).unwrap();
        assert_eq!(p.launches.len(), 2);
        let a = &p.launches[0];
        assert_eq!(a.kernel, "k(float *, int)");
        assert_eq!(a.block, "(256, 1, 1)");
        assert!((a.get("gpu__time_duration.sum").unwrap() - 1.2345e-3).abs() < 1e-12, "us normalized to seconds");
        assert_eq!(a.get("dram__bytes_read.sum"), Some(2.5e6));
        assert_eq!(a.get("x.pct"), None, "empty cell");
        assert_eq!(a.get("no.such.metric"), None);
        assert!(!a.has("no.such.metric"));
        let b = &p.launches[1];
        assert_eq!(b.get("gpu__time_duration.sum"), None, "n/a");
        assert_eq!(b.get("dram__bytes_read.sum"), Some(1e9));
        assert_eq!(b.get("x.pct"), Some(50.5));
        assert_eq!(p.warnings.len(), 1);
    }

    #[test]
    fn recorded_reads_name_every_column_asked_for_present_or_not() {
        let mut launch = parse(SAMPLE).unwrap().launches.remove(0);
        assert_eq!(launch.get("dram__bytes_read.sum"), Some(2.5e6), "not recording yet");
        let reads = launch.record_reads();
        let copy = launch.clone();
        launch.get("gpu__time_duration.sum");
        launch.has("no.such.metric");
        launch.raw("x.pct");
        copy.unit("dram__bytes_read.sum");
        let names: Vec<String> = reads.take().into_iter().collect();
        assert_eq!(names, ["dram__bytes_read.sum", "gpu__time_duration.sum", "no.such.metric", "x.pct"]);
        assert!(reads.take().is_empty(), "take starts afresh");
    }

    #[test]
    fn no_header_is_an_error_not_a_panic() {
        assert!(parse("==PROF== nothing profiled\n").unwrap_err().0.contains("--csv --page raw"));
        assert!(parse("").is_err());
    }

    #[test]
    fn numbers() {
        assert_eq!(parse_number("16,777,216"), Some(16777216.0));
        assert_eq!(parse_number(" 0.5 "), Some(0.5));
        assert_eq!(parse_number("n/a"), None);
        assert_eq!(parse_number("(256, 1, 1)"), None);
        assert_eq!(parse_number("inf"), None);
    }
}

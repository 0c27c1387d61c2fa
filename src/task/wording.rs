//! task.toml errors in the words of the person who wrote the file: which field (as
//! `sizes.bench.rows` or `arg[2] (scale).len`), and what it should hold ("an integer",
//! "a list of strings"), instead of serde's `invalid type: string "three", expected i64`.
//!
//! serde_path_to_error gives the path of a type error; toml gives its span. Everything
//! here only rewords: the error's kind, path and position stay what the parser found.

use serde_path_to_error::Segment;

/// What a field of task.toml holds, in words, for the fields whose type serde would name
/// only vaguely (`a sequence`, `struct TaskSection`) or that can be missing. `keys` is the
/// field's path without list indices: `["arg", "len"]`.
pub(super) fn field_holds(keys: &[&str]) -> Option<&'static str> {
    Some(match keys {
        ["task"] => "a [task] table with name, entry and baseline",
        ["task", "name"] => "a string (the task's name)",
        ["task", "summary"] => "a string (one line on what the kernel computes)",
        ["task", "entry"] => "a string (the name of the extern \"C\" launcher)",
        ["task", "baseline"] => "a string (the kernel file to beat, in the task folder)",
        ["task", "reference"] => "a string (the trusted reference kernel file, in the task folder)",
        ["arg"] => "[[arg]] tables, one per launcher parameter in call order",
        ["arg", "name"] => "a string (the parameter's name)",
        ["arg", "type"] => "a string (the C type, e.g. \"const float*\" or \"int\")",
        ["arg", "len"] => "a string (the element count as an expression, e.g. \"rows * cols\")",
        ["arg", "init"] => "a string (the input distribution, e.g. \"normal(0, 1)\")",
        ["arg", "output"] => "true or false",
        ["arg", "value"] => "a number, or an integer expression as a string",
        ["arg", "rtol" | "atol"] | ["check", "rtol" | "atol"] => "a number",
        ["sizes"] => "a [sizes] table with bench and check",
        ["sizes", "bench"] => "a table of sizes, e.g. { rows = 4096, cols = 1024 }",
        ["sizes", "check"] => "a list of tables of sizes, e.g. [{ rows = 1, cols = 1 }, { rows = 67, cols = 4099 }]",
        ["sizes", "bench" | "check", _] => "an integer",
        ["check"] => "a [check] table",
        ["check", "seeds"] => "an integer (seeds per check size)",
        ["check", "deterministic"] | ["timing", "flush_l2"] => "true or false",
        ["roofline"] => "a [roofline] table with bytes",
        ["roofline", "bytes" | "flops"] => "a string (an integer expression over the sizes)",
        ["roofline", "flops_kind"] => "a string: fp32, fp64, fp16-tensor, bf16-tensor or int32",
        ["tune"] => "a table of knobs, e.g. BLOCK = [128, 256]",
        ["tune", _] => "a list of values, e.g. [128, 256]",
        ["timing"] => "a [timing] table",
        ["timing", "timeout_s"] => "a number of seconds",
        ["build"] => "a [build] table",
        ["build", "flags"] => "a list of strings (nvcc flags)",
        ["build", "libs" | "baseline_libs"] => "a list of strings (library names as given to -l)",
        ["build", "include"] => "a list of strings (folders inside the task directory)",
        ["build", "timeout_s"] => "a number of seconds",
        _ => return None,
    })
}

/// serde's name for an expected type, in words.
fn expected_words(serde: &str) -> String {
    let s = serde.trim();
    match s {
        "i8" | "i16" | "i32" | "i64" | "i128" | "u8" | "u16" | "u32" | "u64" | "u128" | "isize" | "usize" => {
            "an integer".into()
        }
        "f32" | "f64" => "a number".into(),
        "a string" | "a borrowed string" | "string" | "char" => "a string".into(),
        "a boolean" | "bool" => "true or false".into(),
        "a sequence" => "a list".into(),
        "a map" => "a table".into(),
        _ if s.starts_with("struct ") => "a table".into(),
        _ => s.to_string(),
    }
}

/// serde's description of what was found (`string "three"`, `integer `3``), in words.
fn found_words(serde: &str) -> String {
    let s = serde.trim();
    let quoted = |prefix: &str| s.strip_prefix(prefix).map(|v| v.trim().trim_matches('`').to_string());
    if let Some(v) = s.strip_prefix("string ") {
        return format!("{v} (a string)");
    }
    if let Some(v) = quoted("integer ") {
        return format!("{v} (an integer)");
    }
    if let Some(v) = quoted("floating point ") {
        return format!("{v} (a number with a fraction)");
    }
    if let Some(v) = quoted("boolean ") {
        return format!("{v} (true or false)");
    }
    match s {
        "sequence" => "a list".into(),
        "map" => "a table".into(),
        _ => s.to_string(),
    }
}

/// The names between backticks in a serde message (`expected one of `a`, `b``).
fn backticked(message: &str) -> Vec<String> {
    message.split('`').skip(1).step_by(2).map(str::to_string).collect()
}

/// Edits from `a` to `b` (for "did you mean").
fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let cur = row[j + 1];
            row[j + 1] = (prev + usize::from(ca != *cb)).min(row[j] + 1).min(cur + 1);
            prev = cur;
        }
    }
    row[b.len()]
}

/// The field path as task.toml names it, and its keys without indices. An [[arg]] is
/// named by its position and, where the file says, its name: `arg[2] (scale)`.
pub(super) fn field_path(segments: &[&Segment], doc: Option<&toml::Table>) -> (String, Vec<String>) {
    let mut shown = String::new();
    let mut keys: Vec<String> = Vec::new();
    for seg in segments {
        match *seg {
            // toml's Spanned<T> wraps values in a private struct; its fields are no path.
            Segment::Map { key } if key.starts_with("$__serde_spanned_private") => {}
            Segment::Map { key } => {
                if !shown.is_empty() {
                    shown.push('.');
                }
                shown.push_str(key);
                keys.push(key.clone());
            }
            Segment::Seq { index } => {
                shown.push_str(&format!("[{index}]"));
                if keys.len() == 1 && keys[0] == "arg" {
                    let name = doc
                        .and_then(|d| d.get("arg"))
                        .and_then(|a| a.as_array())
                        .and_then(|a| a.get(*index))
                        .and_then(|a| a.get("name"))
                        .and_then(|n| n.as_str());
                    if let Some(n) = name {
                        shown.push_str(&format!(" ({n})"));
                    }
                }
            }
            Segment::Enum { variant } => {
                shown.push('.');
                shown.push_str(variant);
            }
            Segment::Unknown => {}
        }
    }
    (shown, keys)
}

/// The field (path) and message for a deserialization error at `segments`, from serde's
/// own message.
pub(super) fn reword(message: &str, segments: &[&Segment], doc: Option<&toml::Table>) -> (String, String) {
    let (mut field, mut keys) = field_path(segments, doc);
    let message = message.trim();
    let holds = |keys: &[String]| {
        let k: Vec<&str> = keys.iter().map(String::as_str).collect();
        field_holds(&k)
    };
    if let Some(rest) = message.strip_prefix("invalid type: ").or_else(|| message.strip_prefix("invalid value: ")) {
        if let Some((found, expected)) = rest.rsplit_once(", expected ") {
            let want = holds(&keys).map(str::to_string).unwrap_or_else(|| expected_words(expected));
            return (field, format!("expected {want}, found {}", found_words(found)));
        }
    }
    if let Some(rest) = message.strip_prefix("invalid length ") {
        if let Some((n, expected)) = rest.split_once(", expected ") {
            let want = holds(&keys).map(str::to_string).unwrap_or_else(|| expected_words(expected));
            return (field, format!("expected {want}, found a list of {n}"));
        }
    }
    if message.starts_with("unknown field `") {
        let names = backticked(message);
        let (unknown, known) = names.split_first().map(|(u, k)| (u.clone(), k.to_vec())).unwrap_or_default();
        // The path ends at the unknown key; the table it is in is what the reader needs.
        if keys.last() == Some(&unknown) {
            keys.pop();
        }
        let (what, table) = match keys.as_slice() {
            [] => ("section", "task.toml".to_string()),
            [only] if only == "arg" => ("field", "[[arg]]".to_string()),
            _ => ("field", format!("[{}]", keys.join("."))),
        };
        let near = known.iter().filter(|k| distance(&unknown, k) <= 2).min_by_key(|k| distance(&unknown, k));
        let hint = match near {
            Some(k) => format!(" (did you mean `{k}`?)"),
            None => String::new(),
        };
        let listed = if known.is_empty() { "nothing".to_string() } else { known.join(", ") };
        return (field, format!("unknown {what} `{unknown}`{hint}; {table} takes {listed}"));
    }
    if let Some(rest) = message.strip_prefix("missing field `") {
        let name = rest.trim_end_matches('`').to_string();
        field = if field.is_empty() { name.clone() } else { format!("{field}.{name}") };
        keys.push(name);
        let want = holds(&keys).unwrap_or("a value");
        return (field, format!("missing; expected {want}"));
    }
    // Syntax errors and the rest are toml's own words already, on one line.
    (field, message.lines().map(str::trim).filter(|l| !l.is_empty()).collect::<Vec<_>>().join(": "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serde_words_become_task_words() {
        assert_eq!(expected_words("i64"), "an integer");
        assert_eq!(expected_words("f64"), "a number");
        assert_eq!(expected_words("a sequence"), "a list");
        assert_eq!(expected_words("struct ArgSection"), "a table");
        assert_eq!(found_words("string \"three\""), "\"three\" (a string)");
        assert_eq!(found_words("integer `3`"), "3 (an integer)");
        assert_eq!(found_words("floating point `1.5`"), "1.5 (a number with a fraction)");
        assert_eq!(distance("outptu", "output"), 2);
        assert_eq!(distance("len", "len"), 0);
    }
}

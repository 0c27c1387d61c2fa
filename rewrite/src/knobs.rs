//! Knobs a source offers without a `[tune]` table: macros a recipe introduced (marked
//! `// nightshift: knob NAME = v1 v2 ...`) and `#define NAME N` macros that a launch
//! uses as its block size. The tuner sets them with `-D`.

use crate::source::Source;
use crate::syntax::{descendants, text};

/// Block sizes worth trying for a kernel whose block size is a macro.
pub const BLOCK_SIZES: [&str; 5] = ["64", "128", "256", "512", "1024"];

/// The comment that declares a knob.
pub const KNOB_MARK: &str = "// nightshift: knob ";

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Knob {
    pub name: String,
    /// The values to try, in order.
    pub values: Vec<String>,
    /// The value the source gives it when unset.
    pub default: Option<String>,
}

/// The value of `#define NAME VALUE` in the source, if any.
pub fn macro_value(src: &Source, name: &str) -> Option<String> {
    for n in descendants(src.root()) {
        if n.kind() == "preproc_def" {
            let Some(nm) = n.child_by_field_name("name") else { continue };
            if text(src.text(), nm) == name {
                return n.child_by_field_name("value").map(|v| text(src.text(), v).trim().to_string());
            }
        }
    }
    None
}

/// Every knob of the source, in source order.
pub fn knobs(src: &Source) -> Vec<Knob> {
    let mut out: Vec<Knob> = Vec::new();
    for line in src.text().lines() {
        let Some(rest) = line.trim().strip_prefix(KNOB_MARK.trim_end()) else { continue };
        let Some((name, values)) = rest.split_once('=') else { continue };
        let name = name.trim().to_string();
        if name.is_empty() || out.iter().any(|k| k.name == name) {
            continue;
        }
        let values: Vec<String> = values.split_whitespace().map(str::to_string).collect();
        let default = macro_value(src, &name);
        out.push(Knob { name, values, default });
    }
    for l in src.launches() {
        let Some(block) = l.config.get(1) else { continue };
        let name = block.trim();
        if !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            || name.chars().next().is_some_and(|c| c.is_ascii_digit())
        {
            continue;
        }
        let Some(value) = macro_value(src, name) else { continue };
        if value.parse::<u32>().is_err() || out.iter().any(|k| k.name == name) {
            continue;
        }
        let mut values: Vec<String> = BLOCK_SIZES.iter().map(|s| s.to_string()).collect();
        if !values.contains(&value) {
            values.push(value.clone());
        }
        out.push(Knob { name: name.to_string(), values, default: Some(value) });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn block_macros_and_marked_macros_are_knobs() {
        let s = Source::parse(
            "#define BLOCK 256\n// nightshift: knob NS_PER_SM = 4 8 16\n#ifndef NS_PER_SM\n#define NS_PER_SM 8\n#endif\n__global__ void k(float* y) { y[0] = 0; }\nvoid run(float* y) { k<<<1, BLOCK>>>(y); }\n",
        );
        let k = knobs(&s);
        assert_eq!(k.len(), 2);
        assert_eq!(
            k[0],
            Knob {
                name: "NS_PER_SM".into(),
                values: vec!["4".into(), "8".into(), "16".into()],
                default: Some("8".into())
            }
        );
        assert_eq!(k[1].name, "BLOCK");
        assert_eq!(k[1].default.as_deref(), Some("256"));
        assert_eq!(k[1].values.len(), 5);
    }

    #[test]
    fn literal_blocks_are_not_knobs() {
        let s = Source::parse("__global__ void k(float* y) { y[0] = 0; }\nvoid run(float* y) { k<<<1, 256>>>(y); }\n");
        assert!(knobs(&s).is_empty());
    }
}

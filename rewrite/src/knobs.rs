//! Knobs a source offers without a `[tune]` table: macros a recipe introduced (marked
//! `// nightshift: knob NAME = v1 v2 ...`) and `#define NAME N` macros that size a
//! launch's block, alone or as a component of a `dim3`. The tuner sets them with `-D`, so
//! only a macro behind `#ifndef NAME` counts: an unguarded `#define` overrides `-D` (the
//! compiler warns and keeps the file's value), and moving it would build the same kernel.

use crate::launch::{self, Size};
use crate::recipe::NotApplicable;
use crate::source::{Kernel, Source};
use crate::syntax::{blank_comments, descendants, text};

/// Block sizes worth trying for a kernel whose block size is a macro.
pub const BLOCK_SIZES: [&str; 5] = ["64", "128", "256", "512", "1024"];

/// The comment that declares a knob.
pub const KNOB_MARK: &str = "// nightshift: knob ";

/// A file-wide knob a recipe declares above the first kernel it rewrites: one value for
/// every kernel of the file, set by `-D` (the mark lists the values the tuner tries).
pub(crate) struct RecipeKnob {
    pub name: &'static str,
    /// The recipe's parameter that gives the knob its first value.
    pub param: &'static str,
    pub values: &'static str,
    /// What the value counts, for the `static_assert` that it is at least 1.
    pub counts: &'static str,
}

impl RecipeKnob {
    /// The declaration, defaulting to `value`.
    pub fn declaration(&self, value: &str) -> String {
        let RecipeKnob { name, values, counts, .. } = self;
        format!(
            "{KNOB_MARK}{name} = {values}\n#ifndef {name}\n#define {name} {value}\n#endif\n\
             static_assert({name} >= 1, \"{name} counts {counts}: at least 1\");"
        )
    }

    /// Whether `k` may use the knob, the recipe's parameter at `value`: a file that
    /// defines it already must define it as the recipe does, above the kernel (else the
    /// kernel would name it before its definition), and at `value` (any other value of the
    /// parameter would build the same kernel under another name). `all` says what to do
    /// instead, as in "coarsen every kernel of the file".
    pub fn usable_at(&self, src: &Source, k: &Kernel, all: &str, value: &str) -> Result<(), NotApplicable> {
        let name = self.name;
        if !src.defines(name) {
            return Ok(());
        }
        match src.text().find(&format!("{KNOB_MARK}{name} =")) {
            Some(at) if at < k.range.start => match macro_value(src, name) {
                Some(v) if v != value => Err(NotApplicable::new(format!(
                    "the file's `{name}` knob stands at {v}: `{}={v}` uses it as it is",
                    self.param
                ))),
                _ => Ok(()),
            },
            Some(_) => Err(NotApplicable::new(format!(
                "`{}` sits above the file's `{name}` knob: {all} in one application",
                k.name
            ))),
            None => Err(NotApplicable::new(format!("the file defines `{name}` itself, not as this recipe's knob"))),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Knob {
    pub name: String,
    /// The values to try, in order.
    pub values: Vec<String>,
    /// The value the source gives it when unset.
    pub default: Option<String>,
}

/// The value of `#define NAME VALUE` in the source, if any, without a comment that ends
/// the line (`#define BT 16  // tokens per block` is 16: with the comment, a knob set to
/// 16 would read as a move off the default and build the same kernel again).
pub fn macro_value(src: &Source, name: &str) -> Option<String> {
    for n in descendants(src.root()) {
        if n.kind() == "preproc_def" {
            let Some(nm) = n.child_by_field_name("name") else { continue };
            if text(src.text(), nm) == name {
                return n.child_by_field_name("value").map(|v| blank_comments(text(src.text(), v)).trim().to_string());
            }
        }
    }
    None
}

/// Sizes worth trying along one axis of a block whose other axes multiply to `others`:
/// powers of two that keep the block between 64 and 1024 threads (at least 8 along x,
/// where a warp's lanes read consecutive elements), and the current `value`.
pub fn block_axis_values(axis: usize, others: i64, value: i64) -> Vec<String> {
    let mut out: Vec<i64> = (0..=10)
        .map(|p| 1i64 << p)
        .filter(|v| (64..=1024).contains(&v.saturating_mul(others.max(1))) && (axis != 0 || *v >= 8))
        .collect();
    if !out.contains(&value) {
        out.push(value);
        out.sort_unstable();
    }
    out.iter().map(|v| v.to_string()).collect()
}

/// The macro a block component stands for, through constants (`const int t = BLOCK;`).
pub fn block_macro(size: &Size) -> Option<&launch::Macro> {
    match size {
        Size::Macro(m) => Some(m),
        Size::Constant(c) => block_macro(&c.initializer),
        _ => None,
    }
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
        let Some(block) = launch::block(src, &l) else { continue };
        let varying = block.varying();
        for &(axis, c) in &varying {
            let Some(m) = block_macro(&c.size) else { continue };
            if !m.guarded || m.definitions != 1 || out.iter().any(|k| k.name == m.name) {
                continue;
            }
            let values = if varying.len() == 1 {
                let mut v: Vec<String> = BLOCK_SIZES.iter().map(|s| s.to_string()).collect();
                if !v.contains(&m.value.to_string()) {
                    v.push(m.value.to_string());
                }
                v
            } else {
                // The other axes stay where they are while this one moves.
                match block.threads() {
                    Some(t) => block_axis_values(axis, t / m.value.max(1), m.value),
                    None => continue,
                }
            };
            out.push(Knob { name: m.name.clone(), values, default: Some(m.value.to_string()) });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_macros_value_ends_where_its_comment_starts() {
        let s = Source::parse(
            "#define BT 16  // tokens per block\n#define BN 32 /* features */\n#define S \"a//b\" // c\n#define Q '/'\n#define D (4 / 2)\n",
        );
        let v = |n: &str| macro_value(&s, n);
        assert_eq!(v("BT").as_deref(), Some("16"));
        assert_eq!(v("BN").as_deref(), Some("32"));
        assert_eq!(v("S").as_deref(), Some("\"a//b\""));
        assert_eq!(v("Q").as_deref(), Some("'/'"));
        assert_eq!(v("D").as_deref(), Some("(4 / 2)"));
        assert_eq!(v("X"), None);
    }

    #[test]
    fn block_macros_and_marked_macros_are_knobs() {
        let s = Source::parse(
            "#ifndef BLOCK\n#define BLOCK 256\n#endif\n// nightshift: knob NS_PER_SM = 4 8 16\n#ifndef NS_PER_SM\n#define NS_PER_SM 8\n#endif\n__global__ void k(float* y) { y[0] = 0; }\nvoid run(float* y) { k<<<1, BLOCK>>>(y); }\n",
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
    fn unguarded_macros_are_not_knobs_since_they_override_d() {
        let s = Source::parse(
            "#define BLOCK 256\n__global__ void k(float* y) { y[0] = 0; }\nvoid run(float* y) { k<<<1, BLOCK>>>(y); }\n",
        );
        assert!(knobs(&s).is_empty());
    }

    #[test]
    fn guarded_macros_of_a_2d_block_move_within_1024_threads() {
        let s = Source::parse(
            "#ifndef BX\n#define BX 32\n#endif\n#ifndef BY\n#define BY 8\n#endif\n__global__ void k(float* y) { y[0] = 0; }\nvoid run(float* y) {\n  const int by = BY;\n  dim3 block(BX, by);\n  k<<<1, block>>>(y);\n}\n",
        );
        let k = knobs(&s);
        assert_eq!(k.iter().map(|k| k.name.as_str()).collect::<Vec<_>>(), ["BX", "BY"]);
        assert_eq!(k[0].values, ["8", "16", "32", "64", "128"]);
        assert_eq!(k[1].values, ["2", "4", "8", "16", "32"]);
        assert_eq!(k[1].default.as_deref(), Some("8"));
    }

    #[test]
    fn literal_blocks_are_not_knobs() {
        let s = Source::parse("__global__ void k(float* y) { y[0] = 0; }\nvoid run(float* y) { k<<<1, 256>>>(y); }\n");
        assert!(knobs(&s).is_empty());
    }
}

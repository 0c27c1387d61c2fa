//! Block sizes and grid caps written as literals in the launcher become knobs the tuner
//! moves with `-D`, without a `[tune]` table: `k<<<(n + 255) / 256, 256>>>` becomes
//! `k<<<(n + (NS_BLOCK_K - 1)) / NS_BLOCK_K, NS_BLOCK_K>>>` (the same literal in the
//! kernel, a shared array or `__launch_bounds__`, follows), and `if (blocks > 1024)
//! blocks = 1024;` caps with `NS_GRID_CAP_K`. Nothing else changes, so nothing is
//! versioned.

use crate::facts::Facts;
use crate::knobs::KNOB_MARK;
use crate::pattern::int_literal;
use crate::recipe::{Applied, NotApplicable, ParamSpec, Params};
use crate::source::{Kernel, Launch, Source};
use crate::syntax::{descendants, text};
use crate::version::Change;
use tree_sitter::Node;

pub const PARAMS: &[ParamSpec] = &[];

fn macro_name(prefix: &str, k: &Kernel) -> String {
    let base = k.fast_of.as_deref().unwrap_or(&k.name);
    format!("{prefix}_{}", base.to_ascii_uppercase())
}

pub fn apply(src: &Source, facts: &Facts, params: &Params) -> Applied {
    super::per_kernel(src, params, |k| plan(src, facts, k))
}

/// Number literals under `n` whose value is `v`.
fn literals<'t>(t: &str, n: Node<'t>, v: i64) -> Vec<Node<'t>> {
    descendants(n).into_iter().filter(|d| d.kind() == "number_literal" && int_literal(text(t, *d)) == Some(v)).collect()
}

fn plan<'k>(src: &Source, _facts: &Facts, k: &'k Kernel) -> Result<(Change<'k>, String), NotApplicable> {
    let t = src.text();
    let launches = src.launches_of(&k.name);
    let mut change = Change::new(k);
    let mut before = String::new();
    let mut what = Vec::new();
    // The block size.
    let literal_blocks: Vec<(&Launch, i64)> =
        launches.iter().filter_map(|l| l.config.get(1).and_then(|b| int_literal(b)).map(|v| (l, v))).collect();
    if let Some(&(_, value)) = literal_blocks.first() {
        if literal_blocks.iter().all(|(_, v)| *v == value) && literal_blocks.len() == launches.len() && value >= 32 {
            let name = macro_name("NS_BLOCK", k);
            if src.defines(&name) {
                return Err(NotApplicable::new(format!("`{name}` is defined already")));
            }
            let mut values: Vec<String> = ["64", "128", "256", "512", "1024"].iter().map(|s| s.to_string()).collect();
            if !values.contains(&value.to_string()) {
                values.push(value.to_string());
            }
            before.push_str(&format!(
                "{KNOB_MARK}{name} = {}\n#ifndef {name}\n#define {name} {value}\n#endif\n",
                values.join(" ")
            ));
            for l in &launches {
                for r in l.config_ranges.iter().take(2) {
                    let Some(n) = node_at(src, r) else { continue };
                    for lit in literals(t, n, value) {
                        change.edits.replace(lit.byte_range(), name.clone());
                    }
                    for lit in literals(t, n, value - 1) {
                        change.edits.replace(lit.byte_range(), format!("({name} - 1)"));
                    }
                }
                // A grid computed into a variable before the launch.
                grid_variable_edits(src, l, value, &name, &mut change);
            }
            // The kernel's own uses of the block size.
            if let Some(def) = node_at(src, &k.range) {
                for lit in literals(t, def, value) {
                    change.edits.replace(lit.byte_range(), name.clone());
                }
            }
            what.push(format!("block size {value} as `{name}`"));
        }
    }
    // A cap on the grid: `if (g > CAP) g = CAP;` or `min(g, CAP)` in the launcher.
    for l in &launches {
        let g = l.config[0].trim();
        if !g.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            continue;
        }
        let Some(host) = src.host_functions().into_iter().find(|h| h.name == l.host) else { continue };
        let Some(hb) = src.node(&host.body, "compound_statement") else { continue };
        for d in descendants(hb) {
            if d.kind() != "if_statement" {
                continue;
            }
            let Some(cond) = crate::pattern::condition(d) else { continue };
            let Some((op, lhs, rhs)) = crate::syntax::binary(t, cond) else { continue };
            if !(matches!(op, ">" | ">=") && crate::syntax::is_ident(t, lhs, g)) {
                continue;
            }
            let Some(cap) = int_literal(text(t, rhs)).filter(|c| *c >= 64) else { continue };
            let name = macro_name("NS_GRID_CAP", k);
            if src.defines(&name) || before.contains(&name) {
                continue;
            }
            let values: Vec<String> =
                [cap / 4, cap / 2, cap, cap * 2, cap * 4, cap * 8].iter().map(|v| v.to_string()).collect();
            before.push_str(&format!(
                "{KNOB_MARK}{name} = {}\n#ifndef {name}\n#define {name} {cap}\n#endif\n",
                values.join(" ")
            ));
            for lit in literals(t, d, cap) {
                change.edits.replace(lit.byte_range(), name.clone());
            }
            what.push(format!("grid cap {cap} as `{name}`"));
        }
    }
    if what.is_empty() {
        let b = launches.first().and_then(|l| l.config.get(1)).cloned().unwrap_or_default();
        return Err(NotApplicable::new(format!(
            "`{}` has no literal block size or grid cap in its launch (block size `{b}`: a macro is a knob already)",
            k.name
        )));
    }
    change.before = before;
    Ok((change, format!("`{}`: {}", k.name, what.join(", "))))
}

/// The smallest node spanning exactly `r`.
fn node_at<'s>(src: &'s Source, r: &std::ops::Range<usize>) -> Option<Node<'s>> {
    let mut n = src.root().descendant_for_byte_range(r.start, r.end)?;
    while n.byte_range() != *r {
        n = n.parent()?;
        if n.start_byte() < r.start || n.end_byte() > r.end {
            return None;
        }
    }
    Some(n)
}

/// `int blocks = (n + 255) / 256;` before `k<<<blocks, 256>>>`.
fn grid_variable_edits(src: &Source, l: &Launch, value: i64, name: &str, change: &mut Change) {
    let t = src.text();
    let g = l.config[0].trim();
    if !g.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return;
    }
    let Some(host) = src.host_functions().into_iter().find(|h| h.name == l.host) else { return };
    let Some(hb) = src.node(&host.body, "compound_statement") else { return };
    for d in descendants(hb) {
        let value_node = match d.kind() {
            "init_declarator" if d.child_by_field_name("declarator").is_some_and(|x| text(t, x) == g) => {
                d.child_by_field_name("value")
            }
            "assignment_expression" if d.child_by_field_name("left").is_some_and(|x| text(t, x) == g) => {
                // Caps are knobs of their own.
                let in_if = d.parent().and_then(|p| p.parent()).is_some_and(|p| p.kind() == "if_statement");
                if in_if {
                    None
                } else {
                    d.child_by_field_name("right")
                }
            }
            _ => None,
        };
        if let Some(v) = value_node {
            for lit in literals(t, v, value) {
                change.edits.replace(lit.byte_range(), name.to_string());
            }
            for lit in literals(t, v, value - 1) {
                change.edits.replace(lit.byte_range(), format!("({name} - 1)"));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::facts::FactsBuilder;

    #[test]
    fn literal_blocks_and_caps_become_knobs() {
        let src = r#"
__global__ void scale(float* y, int n) {
  __shared__ float tile[256];
  int i = blockIdx.x * 256 + threadIdx.x;
  tile[threadIdx.x] = i;
  if (i < n) y[i] = tile[threadIdx.x];
}
extern "C" void launch(float* y, int n, cudaStream_t s) {
  int blocks = (n + 255) / 256;
  if (blocks > 4096) blocks = 4096;
  scale<<<blocks, 256, 0, s>>>(y, n);
}
"#;
        let r = apply(&Source::parse(src), &FactsBuilder::new("launch").build(), &Params::default()).unwrap();
        let s = &r.source;
        assert!(s.contains("__shared__ float tile[NS_BLOCK_SCALE];"), "{s}");
        assert!(s.contains("int i = blockIdx.x * NS_BLOCK_SCALE + threadIdx.x;"), "{s}");
        assert!(s.contains("int blocks = (n + (NS_BLOCK_SCALE - 1)) / NS_BLOCK_SCALE;"), "{s}");
        assert!(s.contains("if (blocks > NS_GRID_CAP_SCALE) blocks = NS_GRID_CAP_SCALE;"), "{s}");
        assert!(s.contains("scale<<<blocks, NS_BLOCK_SCALE, 0, s>>>(y, n);"), "{s}");
        let k = crate::knobs(&Source::parse(s));
        assert_eq!(k.iter().map(|k| k.name.as_str()).collect::<Vec<_>>(), ["NS_BLOCK_SCALE", "NS_GRID_CAP_SCALE"]);
        assert_eq!(k[1].values, ["1024", "2048", "4096", "8192", "16384", "32768"]);
    }

    #[test]
    fn macro_blocks_are_declined() {
        let src = "#define BLOCK 128\n__global__ void k(float* y) { y[threadIdx.x] = 0; }\nextern \"C\" void launch(float* y, cudaStream_t s) { k<<<1, BLOCK, 0, s>>>(y); }";
        let e = apply(&Source::parse(src), &FactsBuilder::new("launch").build(), &Params::default()).unwrap_err();
        assert!(e.0.contains("knob already"), "{e}");
    }
}

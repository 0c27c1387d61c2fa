//! Annotated test kernels: a `.cu` file whose first comment lines say what the task would
//! (the launcher, its arguments with roles, lengths and largest sizes, the tolerance) and
//! which recipes must apply to it or decline it. The recipe tests and the build tests
//! read the same files.
//!
//! ```text
//! // entry: LAUNCHER
//! // arg: NAME in|out|inout ELEMTYPE LENGTH     a buffer; LENGTH is C over integer args
//! // arg: NAME out ELEMTYPE LENGTH tolerance RTOL ATOL   an output with a tolerance of its own
//! // arg: NAME int|long MAX                     an integer argument and its largest value
//! // arg: NAME float                            a float argument
//! // tolerance: RTOL ATOL
//! // expect: applies|declines RECIPE
//! // expect: applies|declines RECIPE: TEXT     and says exactly TEXT (its description
//! //                                           where it applies, its reason where not)
//! ```

use crate::facts::{ArgFacts, ArgKind, Facts, Len, Role, Tolerance};
use crate::recipe::RecipeId;
use std::collections::BTreeMap;

/// What a test file expects of one recipe.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expect {
    Applies,
    Declines,
}

#[derive(Debug, Clone)]
pub struct Annotated {
    pub facts: Facts,
    pub expects: Vec<(RecipeId, Expect)>,
    /// What a recipe must say, word for word, where the header gives it.
    pub says: BTreeMap<RecipeId, String>,
}

/// Reads the header of an annotated kernel; the error names the line.
pub fn parse(text: &str) -> Result<Annotated, String> {
    let mut entry = None;
    let mut args: Vec<(String, Vec<String>)> = Vec::new();
    let (mut rtol, mut atol) = (1e-5, 1e-6);
    let mut expects = Vec::new();
    let mut says = BTreeMap::new();
    for (n, line) in text.lines().enumerate() {
        let Some(rest) = line.strip_prefix("// ") else { continue };
        let at = |m: &str| format!("line {}: {m}: `{line}`", n + 1);
        if let Some(v) = rest.strip_prefix("entry:") {
            entry = Some(v.trim().to_string());
        } else if let Some(v) = rest.strip_prefix("arg:") {
            let words: Vec<String> = v.split_whitespace().map(str::to_string).collect();
            if words.len() < 2 {
                return Err(at("expected NAME and a kind"));
            }
            args.push((words[0].clone(), words[1..].to_vec()));
        } else if let Some(v) = rest.strip_prefix("tolerance:") {
            let w: Vec<f64> = v.split_whitespace().filter_map(|x| x.parse().ok()).collect();
            if w.len() != 2 {
                return Err(at("expected RTOL ATOL"));
            }
            (rtol, atol) = (w[0], w[1]);
        } else if let Some(v) = rest.strip_prefix("expect:") {
            let (word, rest) = v.trim_start().split_once(char::is_whitespace).unwrap_or((v.trim(), ""));
            let e = match word {
                "applies" => Expect::Applies,
                "declines" => Expect::Declines,
                _ => return Err(at("expected `applies` or `declines`")),
            };
            let (recipe, said) = match rest.split_once(':') {
                Some((r, said)) => (r.trim(), Some(said.trim())),
                None => (rest.trim(), None),
            };
            if recipe.is_empty() {
                return Err(at("expected a recipe"));
            }
            let id: RecipeId = recipe.parse().map_err(|e: String| at(&e))?;
            expects.push((id, e));
            if let Some(said) = said {
                if said.is_empty() {
                    return Err(at("expected the text after `:`"));
                }
                says.insert(id, said.to_string());
            }
        }
    }
    let entry = entry.ok_or("no `// entry:` line")?;
    let maxes: BTreeMap<String, i64> = args
        .iter()
        .filter(|(_, w)| matches!(w[0].as_str(), "int" | "long"))
        .map(|(name, w)| (name.clone(), w.get(1).and_then(|m| m.parse().ok()).unwrap_or(1)))
        .collect();
    let names: Vec<String> = args.iter().map(|(n, _)| n.clone()).collect();
    let mut out = Vec::new();
    for (name, w) in &args {
        let kind = match w[0].as_str() {
            "int" | "long" => {
                let m = maxes.get(name).copied();
                ArgKind::Scalar { is_float: false, bench: m, max: m }
            }
            "float" | "double" => ArgKind::Scalar { is_float: true, bench: None, max: None },
            role @ ("in" | "out" | "inout") => {
                let elem = w.get(1).ok_or_else(|| format!("arg `{name}`: no element type"))?.clone();
                let own = w.iter().position(|x| x == "tolerance");
                let len_text = w[2..own.unwrap_or(w.len())].join(" ");
                let tolerance = match own {
                    None => None,
                    Some(i) => {
                        let t: Vec<f64> = w[i + 1..].iter().filter_map(|x| x.parse().ok()).collect();
                        if t.len() != 2 || w.len() != i + 3 {
                            return Err(format!("arg `{name}`: expected `tolerance RTOL ATOL` at the end"));
                        }
                        Some(Tolerance { rtol: t[0], atol: t[1] })
                    }
                };
                let value =
                    eval(&len_text, &maxes).ok_or_else(|| format!("arg `{name}`: cannot evaluate `{len_text}`"))?;
                let c = positional(&len_text, &names);
                let size = crate::syntax::type_size(&elem).unwrap_or(4);
                ArgKind::Buffer {
                    elem_size: size,
                    is_float: matches!(elem.as_str(), "float" | "double" | "half" | "__half" | "__nv_bfloat16"),
                    elem,
                    role: match role {
                        "in" => Role::Input,
                        "out" => Role::Output,
                        _ => Role::InOut,
                    },
                    len: Len { c: Some(c), bench: value, max: value },
                    tolerance,
                }
            }
            other => return Err(format!("arg `{name}`: unknown kind `{other}`")),
        };
        out.push(ArgFacts { name: name.clone(), kind });
    }
    let outputs_16bit = {
        let outs: Vec<&ArgKind> = out
            .iter()
            .map(|a| &a.kind)
            .filter(|k| matches!(k, ArgKind::Buffer { role: Role::Output | Role::InOut, .. }))
            .collect();
        !outs.is_empty() && outs.iter().all(|k| matches!(k, ArgKind::Buffer { elem_size: 2, is_float: true, .. }))
    };
    // The task-wide figures are the tightest over the outputs, as the task's are.
    let (mut tight_rtol, mut tight_atol) = (f64::INFINITY, f64::INFINITY);
    for a in &out {
        if let ArgKind::Buffer { role: Role::Output | Role::InOut, tolerance, .. } = &a.kind {
            let t = tolerance.unwrap_or(Tolerance { rtol, atol });
            (tight_rtol, tight_atol) = (tight_rtol.min(t.rtol), tight_atol.min(t.atol));
        }
    }
    if tight_rtol.is_finite() {
        (rtol, atol) = (tight_rtol, tight_atol);
    }
    Ok(Annotated { facts: Facts { entry, args: out, rtol, atol, outputs_16bit }, expects, says })
}

/// Identifiers that name arguments become `(long long)({i})`.
fn positional(expr: &str, names: &[String]) -> String {
    let mut out = String::new();
    let mut word = String::new();
    let flush = |word: &mut String, out: &mut String| {
        if let Some(i) = names.iter().position(|n| n == word) {
            out.push_str(&format!("(long long)({{{i}}})"));
        } else {
            out.push_str(word);
        }
        word.clear();
    };
    for c in expr.chars() {
        if c.is_ascii_alphanumeric() || c == '_' {
            word.push(c);
        } else {
            flush(&mut word, &mut out);
            out.push(c);
        }
    }
    flush(&mut word, &mut out);
    out
}

/// Evaluates `+ - * / ( )` over integers and names (the lengths of the headers).
pub fn eval(expr: &str, vars: &BTreeMap<String, i64>) -> Option<i64> {
    let tokens: Vec<String> = {
        let mut v = Vec::new();
        let mut cur = String::new();
        for c in expr.chars() {
            if c.is_ascii_alphanumeric() || c == '_' {
                cur.push(c);
            } else {
                if !cur.is_empty() {
                    v.push(std::mem::take(&mut cur));
                }
                if !c.is_whitespace() {
                    v.push(c.to_string());
                }
            }
        }
        if !cur.is_empty() {
            v.push(cur);
        }
        v
    };
    fn sum(t: &[String], i: &mut usize, vars: &BTreeMap<String, i64>) -> Option<i64> {
        let mut v = product(t, i, vars)?;
        while *i < t.len() && (t[*i] == "+" || t[*i] == "-") {
            let op = t[*i].clone();
            *i += 1;
            let r = product(t, i, vars)?;
            v = if op == "+" { v.checked_add(r)? } else { v.checked_sub(r)? };
        }
        Some(v)
    }
    fn product(t: &[String], i: &mut usize, vars: &BTreeMap<String, i64>) -> Option<i64> {
        let mut v = atom(t, i, vars)?;
        while *i < t.len() && (t[*i] == "*" || t[*i] == "/") {
            let op = t[*i].clone();
            *i += 1;
            let r = atom(t, i, vars)?;
            v = if op == "*" { v.checked_mul(r)? } else { v.checked_div(r)? };
        }
        Some(v)
    }
    fn atom(t: &[String], i: &mut usize, vars: &BTreeMap<String, i64>) -> Option<i64> {
        let tok = t.get(*i)?.clone();
        *i += 1;
        if tok == "(" {
            let v = sum(t, i, vars)?;
            if t.get(*i)? != ")" {
                return None;
            }
            *i += 1;
            return Some(v);
        }
        tok.parse().ok().or_else(|| vars.get(&tok).copied())
    }
    let mut i = 0;
    let v = sum(&tokens, &mut i, vars)?;
    (i == tokens.len()).then_some(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_header_becomes_facts_and_expectations() {
        let a = parse(
            "// entry: run\n// arg: x in __nv_bfloat16 rows * (cols + 1)\n// arg: y out __nv_bfloat16 rows\n// arg: rows int 4\n// arg: cols int 7\n// tolerance: 2e-2 1e-3\n// expect: applies vectorize\n// expect: declines unroll\n",
        )
        .unwrap();
        assert_eq!(a.facts.entry, "run");
        let x = a.facts.args[0].len().unwrap();
        assert_eq!(x.max, 32);
        assert_eq!(x.c.as_deref(), Some("(long long)({2}) * ((long long)({3}) + 1)"));
        assert!(a.facts.outputs_16bit);
        assert_eq!(a.expects, [(RecipeId::Vectorize, Expect::Applies), (RecipeId::Unroll, Expect::Declines)]);
        assert!(a.says.is_empty());
        let a = parse("// entry: e\n// expect: declines launch-bounds: the block size of `k` is not: `b`\n").unwrap();
        assert_eq!(a.expects, [(RecipeId::LaunchBounds, Expect::Declines)]);
        assert_eq!(a.says[&RecipeId::LaunchBounds], "the block size of `k` is not: `b`");
        assert!(parse("// entry: e\n// expect: applies unroll:\n").unwrap_err().contains("after `:`"));
        assert!(parse("// arg: x in float n\n").is_err());
        assert!(parse("// entry: e\n// expect: applies nothing\n").unwrap_err().contains("unknown recipe"));
    }
}

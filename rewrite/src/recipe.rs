//! The recipe contract: an id, the diagnosis tools it answers, its parameters, and an
//! `apply` that either rewrites the source or says in one sentence why it does not apply.

use crate::facts::Facts;
use crate::source::Source;
use heuristics::ToolId;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

/// Every recipe, by name. The names are the stable ids users pass to `--recipe`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RecipeId {
    IndexWidth,
    FastDivmod,
    Vectorize,
    Cooperative,
    RowCache,
    ShuffleReduce,
    BlockKnob,
    GridStride,
    RowStrip,
    RegisterTable,
    TensorTile,
    Prefetch,
    ReadOnly,
    Intrinsics,
    Reciprocal,
    Unroll,
    LaunchBounds,
    Coarsen,
}

impl RecipeId {
    pub const ALL: [RecipeId; 18] = [
        RecipeId::IndexWidth,
        RecipeId::FastDivmod,
        RecipeId::Vectorize,
        RecipeId::Cooperative,
        RecipeId::RowCache,
        RecipeId::ShuffleReduce,
        RecipeId::BlockKnob,
        RecipeId::GridStride,
        RecipeId::RowStrip,
        RecipeId::RegisterTable,
        RecipeId::TensorTile,
        RecipeId::Prefetch,
        RecipeId::ReadOnly,
        RecipeId::Intrinsics,
        RecipeId::Reciprocal,
        RecipeId::Unroll,
        RecipeId::LaunchBounds,
        RecipeId::Coarsen,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            RecipeId::IndexWidth => "index-width",
            RecipeId::FastDivmod => "fast-divmod",
            RecipeId::Vectorize => "vectorize",
            RecipeId::Cooperative => "cooperative",
            RecipeId::RowCache => "row-cache",
            RecipeId::ShuffleReduce => "shuffle-reduce",
            RecipeId::BlockKnob => "block-knob",
            RecipeId::GridStride => "grid-stride",
            RecipeId::RowStrip => "row-strip",
            RecipeId::RegisterTable => "register-table",
            RecipeId::TensorTile => "tensor-tile",
            RecipeId::Prefetch => "prefetch",
            RecipeId::ReadOnly => "read-only",
            RecipeId::Intrinsics => "intrinsics",
            RecipeId::Reciprocal => "reciprocal",
            RecipeId::Unroll => "unroll",
            RecipeId::LaunchBounds => "launch-bounds",
            RecipeId::Coarsen => "coarsen",
        }
    }
}

impl fmt::Display for RecipeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for RecipeId {
    type Err = String;
    fn from_str(s: &str) -> Result<RecipeId, String> {
        RecipeId::ALL.iter().copied().find(|r| r.as_str() == s).ok_or_else(|| {
            format!(
                "unknown recipe `{s}`: expected one of {}",
                RecipeId::ALL.iter().map(|r| r.as_str()).collect::<Vec<_>>().join(", ")
            )
        })
    }
}

/// One parameter of a recipe: its name, the values it takes (the first is the default),
/// and what it means.
#[derive(Debug, Clone, Copy)]
pub struct ParamSpec {
    pub name: &'static str,
    pub values: &'static [&'static str],
    pub doc: &'static str,
}

/// Parameter values by name; a missing one takes its default. `kernel` (any recipe)
/// limits the rewrite to one kernel.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Params(pub BTreeMap<String, String>);

impl Params {
    pub fn get<'a>(&'a self, spec: &'a [ParamSpec], name: &str) -> &'a str {
        if let Some(v) = self.0.get(name) {
            return v;
        }
        spec.iter().find(|p| p.name == name).and_then(|p| p.values.first().copied()).unwrap_or("")
    }

    pub fn kernel(&self) -> Option<&str> {
        self.0.get("kernel").map(String::as_str)
    }

    pub fn with(mut self, name: &str, value: &str) -> Params {
        self.0.insert(name.into(), value.into());
        self
    }

    /// `k=v,k=v`
    pub fn label(&self) -> String {
        self.0.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(",")
    }
}

/// A recipe application as users write it: `vectorize:width=16,kernel=k`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Application {
    pub recipe: RecipeId,
    pub params: Params,
}

impl fmt::Display for Application {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.params.0.is_empty() {
            write!(f, "{}", self.recipe)
        } else {
            write!(f, "{}:{}", self.recipe, self.params.label())
        }
    }
}

impl FromStr for Application {
    type Err = String;
    /// Parses `ID[:NAME=VALUE[,NAME=VALUE]...]`, checking names and values against the
    /// recipe's parameters.
    fn from_str(s: &str) -> Result<Application, String> {
        let (id, rest) = match s.split_once(':') {
            Some((a, b)) => (a, Some(b)),
            None => (s, None),
        };
        let recipe: RecipeId = id.trim().parse()?;
        let spec = crate::recipes::get(recipe).params;
        let mut params = Params::default();
        for kv in rest.unwrap_or("").split(',').map(str::trim).filter(|x| !x.is_empty()) {
            let Some((k, v)) = kv.split_once('=') else {
                return Err(format!("`{kv}` in `{s}`: expected NAME=VALUE"));
            };
            let (k, v) = (k.trim(), v.trim());
            if k == "kernel" {
                params.0.insert(k.into(), v.into());
                continue;
            }
            let Some(p) = spec.iter().find(|p| p.name == k) else {
                let names: Vec<&str> = spec.iter().map(|p| p.name).chain(["kernel"]).collect();
                return Err(format!("recipe {recipe} has no parameter `{k}`: expected one of {}", names.join(", ")));
            };
            if !p.values.contains(&v) {
                return Err(format!("{recipe}: {k}={v} is not offered: expected one of {}", p.values.join(", ")));
            }
            params.0.insert(k.into(), v.into());
        }
        Ok(Application { recipe, params })
    }
}

/// A successful rewrite.
#[derive(Debug, Clone, PartialEq)]
pub struct Rewrite {
    pub source: String,
    /// One line: what changed, where.
    pub description: String,
    /// The run-time conditions the fast path depends on (empty when none), as written
    /// in the launcher.
    pub guards: Vec<String>,
}

/// Why a recipe does not apply, in a sentence the user sees.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotApplicable(pub String);

impl NotApplicable {
    pub fn new(why: impl Into<String>) -> NotApplicable {
        NotApplicable(why.into())
    }
}

impl fmt::Display for NotApplicable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

pub type Applied = Result<Rewrite, NotApplicable>;

/// What a recipe changes, for the order the tuner tries moves in and for what the search
/// memory counts as a new kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RecipeKind {
    /// Changes the work each thread does or how it is split, loaded or computed: a new
    /// kernel, whose best knobs and flags are a question asked anew.
    Structural,
    /// Tells the compiler or the launcher how to run the same work (a pragma, launch
    /// bounds, a literal made a knob): a knob move written into the source.
    Tuning,
}

/// One executable prescription.
pub struct Recipe {
    pub id: RecipeId,
    /// What it does, in one line.
    pub summary: &'static str,
    pub kind: RecipeKind,
    /// The diagnosis tools whose prescription it
    /// carries out, most direct first.
    pub answers: &'static [ToolId],
    /// It needs a run-time check in the launcher (and keeps the original kernel as the
    /// fallback).
    pub versioned: bool,
    /// It holds more values in registers than the code it replaces (a prefetch's slots,
    /// tensor-core fragments, a row, a table, wide loads): a register budget tuned for the
    /// code before it may make it spill.
    pub more_registers: bool,
    pub params: &'static [ParamSpec],
    /// The macros it introduces as knobs (`// nightshift: knob`): moving one tunes how
    /// much of its change is made, so the tuner votes for it as for the recipe.
    pub knobs: &'static [&'static str],
    pub apply: fn(&Source, &Facts, &Params) -> Applied,
}

impl Recipe {
    /// Every combination of parameter values, the defaults first.
    pub fn variants(&self) -> Vec<Params> {
        let mut out = vec![Params::default()];
        for p in self.params {
            let mut next = Vec::new();
            for base in &out {
                for v in p.values {
                    next.push(base.clone().with(p.name, v));
                }
            }
            out = next;
        }
        out
    }

    pub fn run(&self, source: &Source, facts: &Facts, params: &Params) -> Applied {
        let depth = source.max_depth();
        if depth > crate::source::MAX_DEPTH {
            return Err(NotApplicable::new(format!(
                "the file nests {depth} levels deep, past the {} a recipe walks",
                crate::source::MAX_DEPTH
            )));
        }
        let hidden = crate::syntax::jump_macros(source.text(), source.root());
        if !hidden.is_empty() {
            for k in source.kernels() {
                let Some(body) = source.node(&k.body, "compound_statement") else { continue };
                for d in crate::syntax::descendants(body) {
                    let name = crate::syntax::text(source.text(), d);
                    if let Some((m, kw)) = hidden.iter().find(|(m, _)| d.kind() == "identifier" && m == name) {
                        return Err(NotApplicable::new(format!(
                            "`{}` invokes `{m}`, a macro that hides a `{kw}`: recipes read the source as written and cannot see where it leaves",
                            k.name
                        )));
                    }
                }
            }
        }
        (self.apply)(source, facts, params)
    }
}

impl fmt::Debug for Recipe {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Recipe").field("id", &self.id).finish()
    }
}

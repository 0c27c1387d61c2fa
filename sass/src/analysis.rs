//! Facts about a function an expert reads off its SASS: the instruction mix, how wide the
//! global accesses are, where local memory and fp64 appear (with source lines), the loops
//! (backward branches) and what runs inside them.

use crate::classify::{access_bits, classify, touches_fp64, Class};
use crate::dataflow;
use crate::parse::{Function, Instruction};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Mix {
    pub classes: BTreeMap<String, u64>,
    /// Width in bits -> count, for global loads and stores.
    pub global_load_bits: BTreeMap<String, u64>,
    pub global_store_bits: BTreeMap<String, u64>,
    pub shared_load_bits: BTreeMap<String, u64>,
    pub shared_store_bits: BTreeMap<String, u64>,
}

impl Mix {
    fn add(&mut self, i: &Instruction) {
        let class = classify(i);
        *self.classes.entry(class.name().to_string()).or_default() += 1;
        let hist = match class {
            Class::GlobalLoad => Some(&mut self.global_load_bits),
            Class::GlobalStore => Some(&mut self.global_store_bits),
            Class::SharedLoad => Some(&mut self.shared_load_bits),
            Class::SharedStore => Some(&mut self.shared_store_bits),
            _ => None,
        };
        if let (Some(h), Some(bits)) = (hist, access_bits(i)) {
            *h.entry(bits.to_string()).or_default() += 1;
        }
    }

    pub fn count(&self, class: Class) -> u64 {
        self.classes.get(class.name()).copied().unwrap_or(0)
    }

    /// Global (loads, stores) whose access width in bits satisfies `keep`.
    pub fn global_accesses(&self, keep: impl Fn(u32) -> bool) -> (u64, u64) {
        let sum = |h: &BTreeMap<String, u64>| {
            h.iter().filter(|(b, _)| b.parse::<u32>().is_ok_and(&keep)).map(|(_, n)| n).sum::<u64>()
        };
        (sum(&self.global_load_bits), sum(&self.global_store_bits))
    }

    fn with_all_classes(mut self) -> Mix {
        for c in Class::ALL {
            self.classes.entry(c.name().to_string()).or_insert(0);
        }
        self
    }
}

/// A loop: the instructions from a backward branch's target to the branch.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Loop {
    pub start: u32,
    pub end: u32,
    /// 1 for outermost loops.
    pub depth: u32,
    pub instructions: u64,
    /// The source line of the loop's first instruction, when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line: Option<String>,
    pub mix: Mix,
    pub barriers: u64,
    /// Global loads whose address comes from a load in the loop (carried around it too).
    #[serde(default)]
    pub dependent_loads: u64,
    /// The longest chain of loads feeding each other's addresses, counted over two trips.
    #[serde(default)]
    pub load_chain: u32,
    /// Accurate math-library paths inlined in the loop, one name per call.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub accurate_math: Vec<String>,
    /// Instructions those paths cost beyond their fast intrinsics.
    #[serde(default)]
    pub accurate_math_extra: u64,
}

/// One instruction worth pointing at, with its line.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Site {
    pub offset: u32,
    pub opcode: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line: Option<String>,
}

/// A fact worth a diagnosis tool's attention.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Finding {
    /// Stable id: scalar-global-loads, vector-global-access, local-memory, fp64,
    /// barrier-in-loop, tensor-instructions, async-copy, atomics, high-predication.
    pub kind: String,
    pub message: String,
    pub count: u64,
    /// Distinct source lines involved, most frequent first.
    pub lines: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FunctionReport {
    pub name: String,
    pub demangled: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub arch: Option<String>,
    pub instructions: u64,
    #[serde(flatten)]
    pub mix: Mix,
    pub predicated_ratio: f64,
    pub has_line_info: bool,
    pub loops: Vec<Loop>,
    pub local_memory: Vec<Site>,
    pub fp64: Vec<Site>,
    /// Sites of the instructions diagnoses point at, by class name (`global_load`, `mufu`,
    /// `atomic`, ...) plus `branch` for conditional branches.
    pub sites: BTreeMap<String, Vec<Site>>,
    /// Global loads whose address comes from an earlier load's result.
    #[serde(default)]
    pub dependent_loads: Vec<Site>,
    /// Accurate math-library paths, one site per inlined call (opcode: the function).
    #[serde(default)]
    pub accurate_math: Vec<Site>,
    pub findings: Vec<Finding>,
}

impl FunctionReport {
    pub fn count(&self, class: Class) -> u64 {
        self.mix.count(class)
    }

    pub fn finding(&self, kind: &str) -> Option<&Finding> {
        self.findings.iter().find(|f| f.kind == kind)
    }

    /// Conversions to or from fp64 (the fp64 sites that are not fp64 arithmetic).
    pub fn fp64_conversions(&self) -> usize {
        self.fp64.iter().filter(|x| !x.opcode.starts_with('D')).count()
    }
}

fn site(f: &Function, i: &Instruction) -> Site {
    Site { offset: i.offset, opcode: i.full_opcode(), line: f.loc(i).map(|l| l.short()) }
}

/// Distinct source lines of `sites`, most frequent first (ties by name).
pub fn lines_by_frequency<'a>(sites: impl IntoIterator<Item = &'a Site>) -> Vec<String> {
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for s in sites {
        if let Some(l) = &s.line {
            *counts.entry(l.as_str()).or_default() += 1;
        }
    }
    let mut v: Vec<(&str, usize)> = counts.into_iter().collect();
    v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    v.into_iter().map(|(l, _)| l.to_string()).collect()
}

/// Classes whose sites are kept for diagnoses to point at.
const SITE_CLASSES: [Class; 11] = [
    Class::GlobalLoad,
    Class::GlobalStore,
    Class::SharedLoad,
    Class::SharedStore,
    Class::Mufu,
    Class::Atomic,
    Class::Barrier,
    Class::Conversion,
    Class::Fp32,
    Class::Tensor,
    Class::AsyncCopy,
];

/// Whether the instruction can run (code after the final EXIT is padding).
fn executable(i: &Instruction) -> bool {
    !i.never_executes() && i.opcode != "NOP"
}

pub fn find_loops(f: &Function) -> Vec<(u32, u32)> {
    let mut loops = Vec::new();
    let ins = &f.instructions;
    for (k, i) in ins.iter().enumerate() {
        if !matches!(i.opcode.as_str(), "BRA" | "JMP") {
            continue;
        }
        let Some(t) = i.target else { continue };
        if t > i.offset {
            continue;
        }
        // `BRA self` right after EXIT or an unconditional branch is the end-of-function trap.
        let after_exit =
            k > 0 && matches!(ins[k - 1].opcode.as_str(), "EXIT" | "BRA" | "RET") && ins[k - 1].predicate.is_none();
        if t == i.offset && after_exit {
            continue;
        }
        loops.push((t, i.offset));
    }
    loops.sort();
    loops.dedup();
    loops
}

pub fn analyze(f: &Function) -> FunctionReport {
    let live: Vec<&Instruction> = f.instructions.iter().filter(|i| executable(i)).collect();
    let mut mix = Mix::default();
    let mut predicated = 0u64;
    let mut local = Vec::new();
    let mut fp64 = Vec::new();
    let mut sites: BTreeMap<String, Vec<Site>> = BTreeMap::new();
    for i in &live {
        mix.add(i);
        if i.is_predicated() {
            predicated += 1;
        }
        let class = classify(i);
        if SITE_CLASSES.contains(&class) {
            sites.entry(class.name().to_string()).or_default().push(site(f, i));
        }
        if i.opcode == "BRA" && i.is_predicated() {
            sites.entry("branch".to_string()).or_default().push(site(f, i));
        }
        match classify(i) {
            Class::LocalLoad | Class::LocalStore => local.push(site(f, i)),
            _ if touches_fp64(i) => fp64.push(site(f, i)),
            _ => {}
        }
    }
    let ranges = find_loops(f);
    let mut loops = Vec::new();
    // Each loop's own dependent loads, by offset, for the whole function's list below.
    let mut per_loop: Vec<Vec<u32>> = Vec::new();
    for &(start, end) in &ranges {
        let depth = ranges.iter().filter(|(s, e)| *s <= start && end <= *e).count() as u32;
        let mut lm = Mix::default();
        let mut n = 0;
        let mut first_line = None;
        for i in live.iter().filter(|i| i.offset >= start && i.offset <= end) {
            lm.add(i);
            n += 1;
            if first_line.is_none() {
                first_line = f.loc(i).map(|l| l.short());
            }
        }
        let barriers = lm.count(Class::Barrier);
        let body: Vec<&Instruction> = live.iter().copied().filter(|i| i.offset >= start && i.offset <= end).collect();
        let dependent = dataflow::dependent_loads(&body, true);
        let math = dataflow::accurate_math(&body);
        per_loop.push(dependent.iter().map(|d| d.offset).collect());
        loops.push(Loop {
            start,
            end,
            depth,
            instructions: n,
            line: first_line,
            mix: lm,
            barriers,
            dependent_loads: dependent.len() as u64,
            load_chain: dependent.iter().map(|d| d.chain).max().unwrap_or(0),
            accurate_math: math.iter().map(|m| m.function.to_string()).collect(),
            accurate_math_extra: math.iter().map(|m| m.extra_instructions as u64).sum(),
        });
    }
    // A load inside a loop counts only if that loop's own walk finds it dependent: when
    // its address comes from a load hoisted out of the loop (a row pointer read once, then
    // streamed through), the thread waits for that load once, not once per iteration.
    let innermost = |offset: u32| -> Option<usize> {
        (0..ranges.len())
            .filter(|&n| ranges[n].0 <= offset && offset <= ranges[n].1)
            .min_by_key(|&n| ranges[n].1 - ranges[n].0)
    };
    let mut dependent: Vec<u32> = dataflow::dependent_loads(&live, false)
        .into_iter()
        .map(|d| d.offset)
        .chain(per_loop.iter().flatten().copied())
        .filter(|&o| innermost(o).is_none_or(|n| per_loop[n].contains(&o)))
        .collect();
    dependent.sort();
    dependent.dedup();
    let dependent_sites: Vec<Site> =
        live.iter().filter(|i| dependent.binary_search(&i.offset).is_ok()).map(|i| site(f, i)).collect();
    let math_sites: Vec<Site> = dataflow::accurate_math(&live)
        .into_iter()
        .map(|m| Site {
            offset: m.offset,
            opcode: m.function.to_string(),
            line: live.iter().find(|i| i.offset == m.offset).and_then(|i| f.loc(i)).map(|l| l.short()),
        })
        .collect();
    let total = live.len() as u64;
    let mut report = FunctionReport {
        name: f.name.clone(),
        demangled: f.demangled.clone(),
        arch: f.arch.clone(),
        instructions: total,
        predicated_ratio: if total > 0 { predicated as f64 / total as f64 } else { 0.0 },
        has_line_info: f.has_line_info(),
        mix: mix.with_all_classes(),
        loops,
        local_memory: local,
        fp64,
        sites,
        dependent_loads: dependent_sites,
        accurate_math: math_sites,
        findings: Vec::new(),
    };
    report.findings = findings(f, &report, &live);
    report
}

/// One finding's check: the function, its report so far, its live instructions.
type FindingCheck = fn(&Function, &FunctionReport, &[&Instruction]) -> Option<Finding>;

fn findings(f: &Function, r: &FunctionReport, live: &[&Instruction]) -> Vec<Finding> {
    let checks: [FindingCheck; 10] = [
        global_width,
        local_memory,
        fp64,
        barriers_in_loops,
        tensor_instructions,
        async_copies,
        atomics,
        dependent_loads,
        accurate_math,
        predication,
    ];
    checks.iter().filter_map(|check| check(f, r, live)).collect()
}

/// Global accesses all 32 bits or narrower, or how many are vector accesses.
fn global_width(f: &Function, r: &FunctionReport, live: &[&Instruction]) -> Option<Finding> {
    let loads = r.count(Class::GlobalLoad);
    let stores = r.count(Class::GlobalStore);
    let (narrow_l, narrow_s) = r.mix.global_accesses(|b| b <= 32);
    let (wide_l, wide_s) = r.mix.global_accesses(|b| b >= 64);
    if loads + stores > 0 && wide_l + wide_s == 0 {
        let sites: Vec<Site> = live
            .iter()
            .filter(|i| matches!(classify(i), Class::GlobalLoad | Class::GlobalStore))
            .map(|i| site(f, i))
            .collect();
        Some(Finding {
            kind: "scalar-global-loads".into(),
            message: format!("all {} global accesses are 32 bits or narrower ({narrow_l} loads, {narrow_s} stores); none is a 64- or 128-bit vector access", loads + stores),
            count: loads + stores,
            lines: lines_by_frequency(&sites),
        })
    } else if wide_l + wide_s > 0 {
        Some(Finding {
            kind: "vector-global-access".into(),
            message: format!(
                "{wide_l} of {loads} global loads and {wide_s} of {stores} stores are 64 or 128 bits wide"
            ),
            count: wide_l + wide_s,
            lines: Vec::new(),
        })
    } else {
        None
    }
}

fn local_memory(_: &Function, r: &FunctionReport, _: &[&Instruction]) -> Option<Finding> {
    if r.local_memory.is_empty() {
        return None;
    }
    let (ld, st) = (r.count(Class::LocalLoad), r.count(Class::LocalStore));
    Some(Finding {
        kind: "local-memory".into(),
        message: format!(
            "{ld} local loads (LDL) and {st} local stores (STL): an array or spilled registers live in local memory"
        ),
        count: ld + st,
        lines: lines_by_frequency(&r.local_memory),
    })
}

fn fp64(_: &Function, r: &FunctionReport, _: &[&Instruction]) -> Option<Finding> {
    if r.fp64.is_empty() {
        return None;
    }
    let ops = r.count(Class::Fp64);
    let conv = r.fp64.len() as u64 - ops;
    Some(Finding {
        kind: "fp64".into(),
        message: format!("{ops} fp64 arithmetic instructions and {conv} conversions to or from fp64"),
        count: r.fp64.len() as u64,
        lines: lines_by_frequency(&r.fp64),
    })
}

fn barriers_in_loops(f: &Function, r: &FunctionReport, live: &[&Instruction]) -> Option<Finding> {
    let in_loop_barriers: Vec<Site> = r
        .loops
        .iter()
        .flat_map(|l| live.iter().filter(move |i| i.offset >= l.start && i.offset <= l.end && i.opcode == "BAR"))
        .map(|i| site(f, i))
        .collect();
    if in_loop_barriers.is_empty() {
        return None;
    }
    let mut uniq = in_loop_barriers.clone();
    uniq.sort_by_key(|s| s.offset);
    uniq.dedup_by_key(|s| s.offset);
    Some(Finding {
        kind: "barrier-in-loop".into(),
        message: format!(
            "{} block barriers (BAR) inside loops: every iteration waits for the slowest warp",
            uniq.len()
        ),
        count: uniq.len() as u64,
        lines: lines_by_frequency(&uniq),
    })
}

fn tensor_instructions(_: &Function, r: &FunctionReport, live: &[&Instruction]) -> Option<Finding> {
    let tensor = r.count(Class::Tensor);
    if tensor == 0 {
        return None;
    }
    let mut kinds: Vec<String> = live
        .iter()
        .filter(|i| classify(i) == Class::Tensor && i.opcode != "WARPGROUP")
        .map(|i| i.opcode.clone())
        .collect();
    kinds.sort();
    kinds.dedup();
    Some(Finding {
        kind: "tensor-instructions".into(),
        message: format!("{tensor} tensor-core instructions ({})", kinds.join(", ")),
        count: tensor,
        lines: Vec::new(),
    })
}

fn async_copies(_: &Function, r: &FunctionReport, _: &[&Instruction]) -> Option<Finding> {
    let asyncs = r.count(Class::AsyncCopy);
    (asyncs > 0).then(|| Finding {
        kind: "async-copy".into(),
        message: format!("{asyncs} asynchronous copy instructions (cp.async, bulk or TMA)"),
        count: asyncs,
        lines: Vec::new(),
    })
}

fn atomics(f: &Function, _: &FunctionReport, live: &[&Instruction]) -> Option<Finding> {
    let atomics: Vec<Site> = live.iter().filter(|i| classify(i) == Class::Atomic).map(|i| site(f, i)).collect();
    if atomics.is_empty() {
        return None;
    }
    let global = live.iter().filter(|i| matches!(i.opcode.as_str(), "ATOMG" | "REDG" | "ATOM" | "RED")).count();
    Some(Finding {
        kind: "atomics".into(),
        message: format!("{} atomic or reduction instructions ({} on global memory)", atomics.len(), global),
        count: atomics.len() as u64,
        lines: lines_by_frequency(&atomics),
    })
}

fn dependent_loads(_: &Function, r: &FunctionReport, _: &[&Instruction]) -> Option<Finding> {
    if r.dependent_loads.is_empty() {
        return None;
    }
    let chain = r.loops.iter().map(|l| l.load_chain).max().unwrap_or(2).max(2);
    Some(Finding {
        kind: "dependent-loads".into(),
        message: format!(
            "{} global loads take their address from an earlier load's result (chains up to {chain} loads deep): each waits a full memory latency for the one before",
            r.dependent_loads.len()
        ),
        count: r.dependent_loads.len() as u64,
        lines: lines_by_frequency(&r.dependent_loads),
    })
}

fn accurate_math(_: &Function, r: &FunctionReport, _: &[&Instruction]) -> Option<Finding> {
    if r.accurate_math.is_empty() {
        return None;
    }
    let mut names: Vec<&str> = r.accurate_math.iter().map(|s| s.opcode.as_str()).collect();
    names.sort();
    names.dedup();
    Some(Finding {
        kind: "accurate-math".into(),
        message: format!(
            "{} inlined math-library calls on their accurate paths ({}): range reduction and polynomials on the FMA pipe",
            r.accurate_math.len(),
            names.join(", ")
        ),
        count: r.accurate_math.len() as u64,
        lines: lines_by_frequency(&r.accurate_math),
    })
}

fn predication(_: &Function, r: &FunctionReport, _: &[&Instruction]) -> Option<Finding> {
    (r.instructions >= 20 && r.predicated_ratio > 0.3).then(|| Finding {
        kind: "high-predication".into(),
        message: format!(
            "{:.0}% of instructions are predicated: divergent or guarded code paths",
            100.0 * r.predicated_ratio
        ),
        count: (r.predicated_ratio * r.instructions as f64) as u64,
        lines: Vec::new(),
    })
}

/// Analyzes every function of a listing.
pub fn analyze_all(listing: &crate::parse::Listing) -> Vec<FunctionReport> {
    listing.functions.iter().map(analyze).collect()
}

fn bits_summary(h: &BTreeMap<String, u64>) -> String {
    if h.is_empty() {
        return "-".into();
    }
    let mut v: Vec<(u32, u64)> = h.iter().map(|(b, n)| (b.parse().unwrap_or(0), *n)).collect();
    v.sort();
    v.iter().map(|(b, n)| format!("{n}x{b}")).collect::<Vec<_>>().join(" ")
}

/// A compact table: one row per function, the counts an expert scans first.
pub fn table(reports: &[FunctionReport]) -> String {
    use std::fmt::Write;
    let mut rows: Vec<[String; 13]> = vec![[
        "function".into(),
        "instrs".into(),
        "fp32".into(),
        "fp64".into(),
        "int".into(),
        "cvt".into(),
        "mufu".into(),
        "global ld (bits)".into(),
        "global st (bits)".into(),
        "shared ld/st".into(),
        "local ld/st".into(),
        "tensor/async/bar/shfl/atom".into(),
        "loops".into(),
    ]];
    for r in reports {
        let c = |k: Class| r.count(k).to_string();
        rows.push([
            crate::short_name(&r.name),
            r.instructions.to_string(),
            c(Class::Fp32),
            c(Class::Fp64),
            c(Class::Int),
            c(Class::Conversion),
            c(Class::Mufu),
            bits_summary(&r.mix.global_load_bits),
            bits_summary(&r.mix.global_store_bits),
            format!("{}/{}", r.count(Class::SharedLoad), r.count(Class::SharedStore)),
            format!("{}/{}", r.count(Class::LocalLoad), r.count(Class::LocalStore)),
            format!(
                "{}/{}/{}/{}/{}",
                r.count(Class::Tensor),
                r.count(Class::AsyncCopy),
                r.count(Class::Barrier),
                r.count(Class::Shuffle),
                r.count(Class::Atomic)
            ),
            r.loops.len().to_string(),
        ]);
    }
    let widths: Vec<usize> = (0..13).map(|k| rows.iter().map(|r| r[k].chars().count()).max().unwrap_or(0)).collect();
    let mut out = String::new();
    for row in &rows {
        let cells: Vec<String> = row.iter().enumerate().map(|(k, cell)| format!("{cell:<w$}", w = widths[k])).collect();
        let _ = writeln!(out, "{}", cells.join("  ").trim_end());
    }
    for r in reports {
        for f in &r.findings {
            let lines = if f.lines.is_empty() {
                String::new()
            } else {
                format!(" [{}]", f.lines.iter().take(4).cloned().collect::<Vec<_>>().join(", "))
            };
            let _ = writeln!(out, "  {}: {}: {}{lines}", crate::short_name(&r.name), f.kind, f.message);
        }
    }
    out
}

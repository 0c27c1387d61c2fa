//! Register dataflow facts read off straight-line SASS: which global loads take their
//! address from an earlier load's result (pointer chasing, index-of-index gathers), and
//! which CUDA math-library slow paths were inlined (recognized by the constants their
//! range reductions use, which the fast intrinsics never load).

use crate::classify::{classify, Class};
use crate::parse::Instruction;
use std::collections::HashMap;

/// General registers an operand names (`R6.64` is R6 and R7; RZ is not a register).
fn registers(operand: &str, pairs: bool) -> Vec<u32> {
    let mut out = Vec::new();
    let b = operand.as_bytes();
    let mut k = 0;
    while k < b.len() {
        let starts = b[k] == b'R' && (k == 0 || !(b[k - 1].is_ascii_alphanumeric() || b[k - 1] == b'_'));
        if starts {
            let digits: String = operand[k + 1..].chars().take_while(|c| c.is_ascii_digit()).collect();
            if let Ok(n) = digits.parse::<u32>() {
                let after = &operand[k + 1 + digits.len()..];
                out.push(n);
                if pairs && after.starts_with(".64") {
                    out.push(n + 1);
                }
                k += 1 + digits.len();
                continue;
            }
        }
        k += 1;
    }
    out
}

/// The predicate register an operand names (`P0`, `!P3`); PT and uniform predicates are
/// not tracked.
fn predicate_of(operand: &str) -> Option<u8> {
    let p = operand.strip_prefix('!').unwrap_or(operand);
    let n = p.strip_prefix('P')?;
    (n.len() == 1).then(|| n.as_bytes()[0]).filter(u8::is_ascii_digit).map(|c| c - b'0')
}

/// How many consecutive registers an instruction writes from its first operand.
fn written_width(i: &Instruction) -> u32 {
    if i.has_modifier("128") {
        4
    } else if i.has_modifier("64")
        || i.has_modifier("WIDE")
        || i.opcode == "DADD"
        || i.opcode == "DMUL"
        || i.opcode == "DFMA"
    {
        2
    } else {
        1
    }
}

fn is_global_load(i: &Instruction) -> bool {
    classify(i) == Class::GlobalLoad
}

/// Whether the instruction's first operand is a register it writes.
fn writes_first_operand(i: &Instruction) -> bool {
    !matches!(
        classify(i),
        Class::GlobalStore | Class::SharedStore | Class::LocalStore | Class::Control | Class::Barrier
    ) && !i.opcode.starts_with("RED")
}

/// How many operands after the first the instruction also writes: the predicates right
/// after it, a carry-out (`IADD3 R6, P2, ...`, two in `IADD3 R4, P0, P1, ...`) or a
/// compare's second result (`ISETP P0, PT, ...`). Every later predicate operand is read
/// (`IMAD.X R7, ..., P2` takes the carry in; `VOTE.ANY R0, PT, P1` votes on P1).
fn written_predicates(i: &Instruction) -> usize {
    let is_predicate = |o: &String| o == "PT" || (!o.starts_with('!') && predicate_of(o).is_some());
    let base = i.opcode.split('.').next().unwrap_or("");
    let limit = if i.operands.first().is_some_and(is_predicate) {
        // Only compares and predicate logic write a second predicate; `VOTE.ALL P1, P0`
        // reads the one it votes on.
        usize::from(base.ends_with("SETP") || base.ends_with("SETP2") || base == "PLOP3")
    } else if base == "IADD3" {
        2
    } else {
        1
    };
    i.operands.iter().skip(1).take(limit).take_while(|o| is_predicate(o)).count()
}

/// A load whose address comes from a loaded value, and how many loads deep its chain is.
#[derive(Debug, Clone, PartialEq)]
pub struct DependentLoad {
    pub offset: u32,
    /// 2 for `x[idx[i]]`; n for the n-th step of a pointer chase.
    pub chain: u32,
}

/// How deep in a load chain a register's value is: unconditionally, and, after a
/// predicated write, under that predicate (a reader guarded by the same predicate sees
/// the new value; any other reader may see either).
#[derive(Debug, Clone, Default)]
struct Depth {
    always: u32,
    guarded: Option<(String, u32)>,
}

impl Depth {
    fn seen_by(&self, predicate: Option<&str>) -> u32 {
        match (&self.guarded, predicate) {
            (Some((p, d)), Some(q)) if p == q => *d,
            (Some((_, d)), _) => self.always.max(*d),
            (None, _) => self.always,
        }
    }
}

/// Dependent global loads in `body`, walked twice so values carried around a loop count.
pub fn dependent_loads(body: &[&Instruction], carried: bool) -> Vec<DependentLoad> {
    let mut depth: HashMap<u32, Depth> = HashMap::new();
    // Predicates set from loaded values carry the load's depth into what they select: a
    // binary search's `lo = v < x ? mid + 1 : lo` makes the next probe's address wait on
    // this probe's load as surely as an index read does.
    let mut predicate_depth: HashMap<u8, u32> = HashMap::new();
    let mut found: HashMap<u32, u32> = HashMap::new();
    let passes = if carried { 2 } else { 1 };
    for _ in 0..passes {
        for i in body {
            if i.operands.is_empty() || !writes_first_operand(i) {
                continue;
            }
            let predicate = i.predicate.as_deref().filter(|_| i.is_predicated());
            let read = |regs: Vec<u32>| -> u32 {
                regs.iter().filter_map(|r| depth.get(r)).map(|d| d.seen_by(predicate)).max().unwrap_or(0)
            };
            let written = 1 + written_predicates(i);
            let sources = &i.operands[written..];
            let d = if is_global_load(i) {
                let address = sources.iter().filter(|o| o.contains('[')).flat_map(|o| registers(o, true));
                let base = read(address.collect());
                if base > 0 {
                    let e = found.entry(i.offset).or_insert(0);
                    *e = (*e).max(base + 1);
                }
                base + 1
            } else {
                let selects = sources
                    .iter()
                    .chain(predicate.map(|p| p.to_string()).iter())
                    .filter_map(|o| predicate_depth.get(&predicate_of(o)?).copied())
                    .max()
                    .unwrap_or(0);
                read(sources.iter().flat_map(|o| registers(o, true)).collect()).max(selects)
            };
            let d = d.min(64);
            // A predicate written here holds this instruction's depth from now on, whatever
            // an earlier compare put in it: a carry-out of index arithmetic is index
            // arithmetic.
            for p in i.operands[..written].iter().filter_map(|o| predicate_of(o)) {
                predicate_depth.insert(p, d);
            }
            if i.operands[0] == "PT" || predicate_of(&i.operands[0]).is_some() {
                continue;
            }
            let first = registers(&i.operands[0], false);
            for r0 in first.into_iter().take(1) {
                for r in r0..r0 + written_width(i) {
                    let entry = depth.entry(r).or_default();
                    match predicate {
                        None => *entry = Depth { always: d, guarded: None },
                        Some(p) => {
                            let before = entry.seen_by(None);
                            *entry = Depth { always: before, guarded: Some((p.to_string(), d)) };
                        }
                    }
                }
            }
        }
    }
    let mut v: Vec<DependentLoad> = found.into_iter().map(|(offset, chain)| DependentLoad { offset, chain }).collect();
    v.sort_by_key(|d| d.offset);
    v
}

/// An inlined CUDA math-library function on its accurate path.
#[derive(Debug, Clone, PartialEq)]
pub struct MathCall {
    pub offset: u32,
    /// `expf`, `logf`, `powf`, `sinf/cosf`, `fdiv (IEEE)`, `sqrtf (IEEE)`.
    pub function: &'static str,
    /// Instructions the accurate path costs beyond its fast intrinsic, roughly (from the
    /// sm_90 code of each: expf ~12 against 2, logf ~22 against 2, powf ~50 against 4,
    /// sinf/cosf ~30 against 2 without the Payne-Hanek path).
    pub extra_instructions: u32,
}

/// Constants only the accurate range reductions load, as ptxas prints them.
const SIGNATURES: &[(&str, &str, u32)] = &[
    ("12582913", "expf", 10),
    ("-0x3f2aaaab", "logf", 20),
    ("-0x3f3504f3", "powf", 46),
    ("0.63661974668502807617", "sinf/cosf", 28),
];

/// Accurate math-library paths in `body`, one per inlined call.
pub fn accurate_math(body: &[&Instruction]) -> Vec<MathCall> {
    let mut out = Vec::new();
    for i in body {
        // IEEE division and square root: FCHK guards the division's Newton step with a
        // slow-path call; the sqrt's slow path is a named subroutine. Their fast forms
        // (__fdividef, x * rsqrtf) are one MUFU op and a multiply, ~6 fewer instructions.
        if i.opcode == "FCHK" {
            out.push(MathCall { offset: i.offset, function: "fdiv (IEEE)", extra_instructions: 6 });
        }
        if i.opcode.starts_with("CALL") && i.operands.iter().any(|o| o.contains("sqrt_rn_f32_slowpath")) {
            out.push(MathCall { offset: i.offset, function: "sqrtf (IEEE)", extra_instructions: 6 });
        }
        for (constant, function, extra) in SIGNATURES {
            if i.operands.iter().any(|o| o == constant) {
                out.push(MathCall { offset: i.offset, function, extra_instructions: *extra });
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse::parse;

    fn body(text: &str) -> Vec<Instruction> {
        let listing = parse(&format!("\tcode for sm_90\n\t\tFunction : k\n{text}"));
        listing.functions[0].instructions.clone()
    }

    #[test]
    fn registers_of_operands() {
        assert_eq!(registers("desc[UR4][R6.64]", true), vec![6, 7]);
        assert_eq!(registers("R12", false), vec![12]);
        assert_eq!(registers("RZ", false), Vec::<u32>::new());
        assert_eq!(registers("c[0x0][0x210]", false), Vec::<u32>::new());
        assert_eq!(registers("-R10.reuse", false), vec![10]);
    }

    #[test]
    fn a_pointer_chase_is_a_chain_and_a_coalesced_copy_is_not() {
        let chase = body(
            "        /*0000*/                   IMAD.WIDE R6, R19, 0x4, R2 ;\n\
             \x20       /*0010*/                   LDG.E.CONSTANT R7, desc[UR4][R6.64] ;\n\
             \x20       /*0020*/                   IMAD.WIDE R8, R7, 0x4, R2 ;\n\
             \x20       /*0030*/                   LDG.E.CONSTANT R19, desc[UR4][R8.64] ;\n\
             \x20       /*0040*/               @P1 BRA 0x0 ;\n",
        );
        let refs: Vec<&Instruction> = chase.iter().collect();
        let once = dependent_loads(&refs, false);
        assert_eq!(once, vec![DependentLoad { offset: 0x30, chain: 2 }]);
        // Around the loop, R19 carries the chase into the first load too.
        let carried = dependent_loads(&refs, true);
        assert_eq!(carried.len(), 2);
        assert!(carried.iter().all(|d| d.chain >= 2));

        let copy = body(
            "        /*0000*/                   IMAD.WIDE R2, R0, 0x4, R2 ;\n\
             \x20       /*0010*/                   LDG.E R5, desc[UR4][R2.64] ;\n\
             \x20       /*0020*/                   IMAD.WIDE R6, R0, 0x4, R6 ;\n\
             \x20       /*0030*/                   STG.E desc[UR4][R6.64], R5 ;\n",
        );
        let refs: Vec<&Instruction> = copy.iter().collect();
        assert!(dependent_loads(&refs, true).is_empty());
    }

    #[test]
    fn a_guarded_reload_under_the_same_predicate_is_not_a_dependence() {
        // R20 held loaded data; under !P0 it is reloaded from the constant bank and used as
        // an address under !P0: the address does not come from the old data.
        let code = body(
            "        /*0000*/              @!P1 LDG.E R20, desc[UR4][R2.64] ;\n\
             \x20       /*0010*/              @!P0 LDC.64 R20, c[0x0][0x218] ;\n\
             \x20       /*0020*/              @!P0 LEA R20, P1, R14, R20, 0x2 ;\n\
             \x20       /*0030*/              @!P0 LDG.E R14, desc[UR4][R20.64] ;\n",
        );
        let refs: Vec<&Instruction> = code.iter().collect();
        assert!(dependent_loads(&refs, false).is_empty());
        // A reader under another predicate may see the old, loaded value.
        let other = body(
            "        /*0000*/                   LDG.E R20, desc[UR4][R2.64] ;\n\
             \x20       /*0010*/              @!P0 MOV R20, 0x10 ;\n\
             \x20       /*0020*/              @P0 LDG.E R14, desc[UR4][R20.64] ;\n",
        );
        let refs: Vec<&Instruction> = other.iter().collect();
        assert_eq!(dependent_loads(&refs, false).len(), 1);
    }

    #[test]
    fn a_carry_out_redefines_its_predicate() {
        // P2 first holds a compare on a loaded value, then the carry of plain index
        // arithmetic; the high half of the next address takes that carry, not the compare.
        let code = body(
            "        /*0000*/                   LDG.E R3, desc[UR4][R2.64] ;\n\
             \x20       /*0010*/                   FSETP.GT.AND P2, PT, R3, RZ, PT ;\n\
             \x20       /*0020*/                   FSEL R9, R3, RZ, P2 ;\n\
             \x20       /*0030*/                   IADD3 R6, P2, R0, R4, RZ ;\n\
             \x20       /*0040*/                   IMAD.X R7, RZ, RZ, R5, P2 ;\n\
             \x20       /*0050*/                   LDG.E R8, desc[UR4][R6.64] ;\n",
        );
        let refs: Vec<&Instruction> = code.iter().collect();
        assert!(dependent_loads(&refs, false).is_empty());
        // Without the carry-out in between, the compare does select the address.
        let selected = body(
            "        /*0000*/                   LDG.E R3, desc[UR4][R2.64] ;\n\
             \x20       /*0010*/                   FSETP.GT.AND P2, PT, R3, RZ, PT ;\n\
             \x20       /*0020*/                   IADD3 R6, P1, R0, R4, RZ ;\n\
             \x20       /*0030*/                   IMAD.X R7, RZ, RZ, R5, P2 ;\n\
             \x20       /*0040*/                   LDG.E R8, desc[UR4][R6.64] ;\n",
        );
        let refs: Vec<&Instruction> = selected.iter().collect();
        assert_eq!(dependent_loads(&refs, false), vec![DependentLoad { offset: 0x40, chain: 2 }]);
        let two = body("        /*0000*/                   IADD3 R4, P0, P1, R2, R3, R5 ;\n");
        assert_eq!(written_predicates(&two[0]), 2);
        let vote = body("        /*0000*/                   VOTE.ANY R0, PT, P1 ;\n");
        assert_eq!(written_predicates(&vote[0]), 1);
        let carry_in = body("        /*0000*/                   IMAD.X R7, RZ, RZ, R5, P2 ;\n");
        assert_eq!(written_predicates(&carry_in[0]), 0);
        let compare = body("        /*0000*/                   ISETP.GE.AND P0, P1, R3, R8, PT ;\n");
        assert_eq!(written_predicates(&compare[0]), 1);
        // A vote reads its second predicate: the loaded compare's depth passes through it.
        let voted = body(
            "        /*0000*/                   LDG.E R3, desc[UR4][R2.64] ;\n\
             \x20       /*0010*/                   FSETP.GT.AND P0, PT, R3, RZ, PT ;\n\
             \x20       /*0020*/                   VOTE.ALL P1, P0 ;\n\
             \x20       /*0030*/                   SEL R6, R4, R10, P1 ;\n\
             \x20       /*0040*/                   LDG.E R8, desc[UR4][R6.64] ;\n",
        );
        assert_eq!(written_predicates(&voted[2]), 0);
        let refs: Vec<&Instruction> = voted.iter().collect();
        assert_eq!(dependent_loads(&refs, false), vec![DependentLoad { offset: 0x40, chain: 2 }]);
    }

    #[test]
    fn overwriting_a_register_clears_its_dependence() {
        let code = body(
            "        /*0000*/                   LDG.E R7, desc[UR4][R2.64] ;\n\
             \x20       /*0010*/                   MOV R8, 0x10 ;\n\
             \x20       /*0020*/                   IMAD.WIDE R8, R0, 0x4, R4 ;\n\
             \x20       /*0030*/                   LDG.E R9, desc[UR4][R8.64] ;\n",
        );
        let refs: Vec<&Instruction> = code.iter().collect();
        assert!(dependent_loads(&refs, false).is_empty());
    }

    #[test]
    fn a_value_selected_by_a_loaded_comparison_makes_the_next_address_dependent() {
        // One binary-search step as ptxas writes it: compare the probe, select the bound,
        // form the next probe's address from it.
        let code = body(
            "        /*0000*/                   IMAD.IADD R2, R7, 0x1, R6 ;\n\
             \x20       /*0010*/                   LDG.E R3, desc[UR4][R2.64] ;\n\
             \x20       /*0020*/                   FSETP.GEU.AND P0, PT, R3, R8, PT ;\n\
             \x20       /*0030*/                   SEL R6, R6, R9, !P0 ;\n\
             \x20       /*0040*/              @!P0 VIADD R7, R9, 0x1 ;\n\
             \x20       /*0050*/                   BRA 0x0 ;\n",
        );
        let refs: Vec<&Instruction> = code.iter().collect();
        let carried = dependent_loads(&refs, true);
        assert_eq!(carried.iter().map(|d| d.offset).collect::<Vec<_>>(), vec![0x10]);
        // Straight through once, the first probe's address depends on nothing loaded.
        assert!(dependent_loads(&refs, false).is_empty());
        assert_eq!(predicate_of("!P3"), Some(3));
        assert_eq!(predicate_of("PT"), None);
        assert_eq!(predicate_of("UP0"), None);
    }
}

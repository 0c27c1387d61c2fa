//! Arithmetic done the slow way: accurate math-library paths where fast intrinsics would
//! pass, and multiply-accumulate loops that reload an operand for every FMA.

use super::shared::REGISTER_REUSE;
use super::{fired, pct, quiet};
use crate::diagnosis::{Diagnosis, Severity, ToolResult};
use crate::facts::{metric as m, Kernel};
use crate::precision::fast_math_verdict;
use crate::roofline::Roofline;
use sass::analysis::Loop;
use sass::{Class, FunctionReport};

/// Values a loop reads from shared memory (a 128-bit load reads four).
fn shared_values(l: &Loop) -> f64 {
    l.mix.shared_load_bits.iter().map(|(b, n)| *n as f64 * b.parse::<f64>().unwrap_or(32.0) / 32.0).sum()
}

/// A multiply-accumulate loop that reads at least 3 shared values per 4 FP32
/// instructions: each thread computes one output, so nothing loaded is reused from
/// registers (a 4x4 micro-tile reads one value per two FMAs).
pub(crate) fn mac_loop_without_reuse(s: &FunctionReport) -> Option<&Loop> {
    s.loops.iter().find(|l| {
        let fp = l.mix.count(Class::Fp32) as f64;
        fp >= 4.0 && l.mix.count(Class::Mufu) == 0 && shared_values(l) >= 0.75 * fp
    })
}

/// An L1/LSU-bound GEMM-like loop without register tiling.
pub(super) fn register_tiling(k: &Kernel, r: &Roofline) -> ToolResult {
    let s = k.sass()?;
    let Some(lp) = mac_loop_without_reuse(s) else {
        return quiet("no multiply-accumulate loop reads a shared operand per FMA");
    };
    let l1 = k.m(m::L1_PCT)?;
    let lsu = k.opt(m::LSU_PCT).unwrap_or(0.0);
    let busy = l1.max(lsu) / 100.0;
    let fma = k.opt(m::FMA_PIPE_PCT).unwrap_or(0.0) / 100.0;
    // With a t x t micro-tile, shared traffic per FMA drops t-fold; the kernel then runs
    // at whichever is slower, the reduced shared traffic or the FMA work.
    let saving = 1.0 - (busy / REGISTER_REUSE).max(fma);
    let per_fma = shared_values(lp) / lp.mix.count(Class::Fp32).max(1) as f64;
    let line = lp.line.clone().map(|l| vec![l]).unwrap_or_default();
    fired(
        Diagnosis::new("register-tiling", saving)
            .ev("shared_values_per_fp32_instruction", per_fma)
            .ev("loop_fp32_instructions", lp.mix.count(Class::Fp32) as f64)
            .ev("loop_shared_values", shared_values(lp))
            .ev("l1_pct", 100.0 * busy)
            .ev("fma_pipe_pct", 100.0 * fma)
            .analysis(format!(
                "The multiply-accumulate loop{} reads {per_fma:.2} shared-memory values per FP32 instruction: each thread computes one output, so every FMA waits on its own shared loads. {} limits at {:.0}% while the FMA pipe runs at {:.0}%.",
                lp.line.as_ref().map(|l| format!(" at {l}")).unwrap_or_default(),
                r.limiter,
                100.0 * busy,
                100.0 * fma
            ))
            .prescription("Tile in registers first: give each thread a micro-tile of outputs (4x4 or 8x8 accumulators), load a column of A and a row of B from shared memory into registers once per k step (float4 loads from a transposed, padded A tile), and do all TM x TN FMAs from registers; a 64x64 or 128x128 block tile of 256 threads keeps enough reuse. This is the change that pays first: tensor cores need the same staging and come after.")
            .at(&line),
    )
}

/// Accurate math-library paths (range reduction and polynomials on the FMA pipe) in a
/// kernel whose time is that arithmetic.
pub(super) fn accurate_math(k: &Kernel, _: &Roofline) -> ToolResult {
    let s = k.sass()?;
    if s.accurate_math.is_empty() {
        return quiet("no inlined accurate math-library paths (expf, logf, powf, sinf)");
    }
    // The code that runs most: the loop holding the calls, else the whole function.
    let (extra, instructions, names) =
        match s.loops.iter().filter(|l| l.accurate_math_extra > 0).max_by_key(|l| l.accurate_math_extra) {
            Some(l) => (l.accurate_math_extra as f64, l.instructions as f64, l.accurate_math.clone()),
            None => (
                s.accurate_math.len() as f64 * 20.0,
                s.instructions as f64,
                s.accurate_math.iter().map(|x| x.opcode.clone()).collect(),
            ),
        };
    let share = (extra / instructions.max(1.0)).min(0.95);
    let sm = k.opt(m::SM_SOL).map(|p| p / 100.0).unwrap_or(0.5);
    let saving = share * sm;
    if saving < 0.03 {
        return quiet(format!("accurate math paths are {} of the code that runs, SM {}", pct(share), pct(sm)));
    }
    let mut uniq = names.clone();
    uniq.sort();
    uniq.dedup();
    let (allowed, why) = fast_math_verdict(k.hints.accuracy.as_ref());
    let xu = k.opt(m::XU_PCT).unwrap_or(0.0);
    let prescription = match allowed {
        Some(false) => format!(
            "Keep the accurate functions ({why}), but call them less: hoist invariant calls out of loops, use exp2f/log2f with the constants folded into neighbouring multiplies, replace powf(x, 1.25f) by x * sqrtf(sqrtf(x)) where x > 0, and reuse expf results across iterations."
        ),
        _ => format!(
            "Use the fast intrinsics: __expf, __logf, __powf, __sinf (or compile with --use_fast_math, which also flushes denormals and uses approximate division). They run on the XU pipe (MUFU.EX2/LG2) in 2-4 instructions instead of {:.0} on the FMA pipe; {why}.",
            extra / names.len().max(1) as f64
        ),
    };
    let lines = sass::analysis::lines_by_frequency(&s.accurate_math);
    let d = Diagnosis::new("accurate-math", saving)
        .ev("accurate_calls", names.len() as f64)
        .ev("extra_instructions", extra)
        .ev("share_of_hot_code", share)
        .ev("sm_pct", 100.0 * sm)
        .ev("xu_pipe_pct", xu)
        .ev("fast_math_allowed", allowed.map(|a| if a { "yes" } else { "no" }).unwrap_or("unknown"))
        .analysis(format!(
            "The hot code inlines accurate math-library paths ({}): range reduction, special-case checks and polynomials on the FMA and ALU pipes cost ~{extra:.0} instructions beyond the fast intrinsics, {} of the code that runs, while the special-function (XU) pipe sits {xu:.0}% busy.",
            uniq.join(", "),
            pct(share)
        ))
        .prescription(prescription)
        .at(&lines);
    fired(if allowed == Some(false) { d.cap(Severity::Medium) } else { d })
}

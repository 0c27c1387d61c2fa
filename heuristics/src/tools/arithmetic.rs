//! Arithmetic done the slow way or on the wrong unit: multiply-accumulate loops that
//! reload an operand per FMA (register tiling) or skip the tensor cores, accurate
//! math-library paths where fast intrinsics would pass, fp64 in float code, the special
//! function pipe, integer index math, conversions, and divergent warps.

use super::shared::REGISTER_REUSE;
use super::{count, fired, pct, quiet};
use crate::diagnosis::{Diagnosis, Severity, ToolResult};
use crate::facts::{metric as m, Kernel};
use crate::precision::fast_math_verdict;
use crate::roofline::{Bound, Roofline};
use crate::tool_id::ToolId;
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
    if busy < 0.3 {
        return quiet(format!(
            "a loop reads shared operands per FMA, but L1 and the LSU pipe run at only {}: shared traffic is not what \
                limits",
            pct(busy)
        ));
    }
    let fma = k.opt(m::FMA_PIPE_PCT).unwrap_or(0.0) / 100.0;
    // With a t x t micro-tile, shared traffic per FMA drops t-fold; the kernel then runs
    // at whichever is slower, the reduced shared traffic or the FMA work.
    let saving = 1.0 - (busy / REGISTER_REUSE).max(fma);
    let per_fma = shared_values(lp) / lp.mix.count(Class::Fp32).max(1) as f64;
    let line = lp.line.clone().map(|l| vec![l]).unwrap_or_default();
    fired(
        Diagnosis::new(ToolId::RegisterTiling, saving)
            .ev("shared_values_per_fp32_instruction", per_fma)
            .ev("loop_fp32_instructions", lp.mix.count(Class::Fp32) as f64)
            .ev("loop_shared_values", shared_values(lp))
            .ev("l1_pct", 100.0 * busy)
            .ev("fma_pipe_pct", 100.0 * fma)
            .analysis(format!(
                "The multiply-accumulate loop{} reads {per_fma:.2} shared-memory values per FP32 instruction: each \
                    thread computes one output, so every FMA waits on its own shared loads. {} limits at {:.0}% while \
                    the FMA pipe runs at {:.0}%.",
                lp.line.as_ref().map(|l| format!(" at {l}")).unwrap_or_default(),
                r.limiter,
                100.0 * busy,
                100.0 * fma
            ))
            .prescription(
                "Tile in registers first: give each thread a micro-tile of outputs (4x4 or 8x8 \
                accumulators), load a column of A and a row of B from shared memory into registers once per k step \
                (float4 loads from a transposed, padded A tile), and do all TM x TN FMAs from registers; a 64x64 or \
                128x128 block tile of 256 threads keeps enough reuse. This is the change that pays first: tensor cores \
                need the same staging and come after.",
            )
            .at(&line),
    )
}

/// Accurate math-library paths (range reduction and polynomials on the FMA pipe) in a
/// kernel whose time is that arithmetic.
pub(super) fn accurate_math(k: &Kernel, _: &Roofline) -> ToolResult {
    let s = k.sass()?;
    if s.accurate_math.is_empty() {
        return quiet("no inlined accurate math-library paths (expf, logf, powf, sinf, IEEE division or sqrtf)");
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
            "Keep the accurate functions ({why}), but call them less: hoist invariant calls out of loops, use \
                exp2f/log2f with the constants folded into neighbouring multiplies, replace powf(x, 1.25f) by x * \
                sqrtf(sqrtf(x)) where x > 0, and reuse expf results across iterations."
        ),
        _ => format!(
            "Use the fast intrinsics: __expf, __logf, __powf, __sinf, __fdividef(a, b) or a * __frcp_rn(b) for \
                division, rsqrtf(x) for 1 / sqrtf(x) (or compile with --use_fast_math, which also flushes denormals \
                and uses approximate division and square root). They run on the XU pipe (MUFU.EX2/LG2) in 2-4 \
                instructions instead of {:.0} on the FMA pipe; {why}.",
            extra / names.len().max(1) as f64
        ),
    };
    let lines = sass::analysis::lines_by_frequency(&s.accurate_math);
    let d = Diagnosis::new(ToolId::AccurateMath, saving)
        .ev("accurate_calls", names.len() as f64)
        .ev("extra_instructions", extra)
        .ev("share_of_hot_code", share)
        .ev("sm_pct", 100.0 * sm)
        .ev("xu_pipe_pct", xu)
        .ev("fast_math_allowed", allowed.map(|a| if a { "yes" } else { "no" }).unwrap_or("unknown"))
        .analysis(format!(
            "The hot code inlines accurate math-library paths ({}): range reduction, special-case checks and \
                polynomials on the FMA and ALU pipes cost ~{extra:.0} instructions beyond the fast intrinsics, {} of \
                the code that runs, while the special-function (XU) pipe sits {xu:.0}% busy.",
            uniq.join(", "),
            pct(share)
        ))
        .prescription(prescription)
        .at(&lines);
    fired(if allowed == Some(false) { d.cap(Severity::Medium) } else { d })
}

pub(super) fn fp64_in_fp32(k: &Kernel, _: &Roofline) -> ToolResult {
    let Some(s) = k.sass else {
        // Without SASS only the pipe counters can tell.
        let fp64 =
            k.m(m::DFMA_PER_CYCLE)? + k.opt(m::DMUL_PER_CYCLE).unwrap_or(0.0) + k.opt(m::DADD_PER_CYCLE).unwrap_or(0.0);
        if fp64 == 0.0 {
            return quiet("no fp64 instructions executed");
        }
        let pipe = k.opt(m::FP64_PIPE_PCT).unwrap_or(0.0);
        return fired(
            Diagnosis::new(ToolId::Fp64InFp32, (pipe / 100.0).max(0.05))
                .ev("fp64_pipe_pct", pipe)
                .analysis(format!(
                    "fp64 instructions run ({fp64:.1} per cycle across the GPU); pass --sass to see \
                    where and whether floats are promoted."
                ))
                .prescription(
                    "If the data is float, keep the arithmetic in float: float literals (0.5f), float math \
                    functions (sinf, expf).",
                ),
        );
    };
    let fp64_ops = s.count(Class::Fp64) as f64;
    let conversions = s.fp64_conversions() as f64;
    let promotions =
        s.fp64.iter().filter(|x| x.opcode.starts_with("F2F.F64") || x.opcode.starts_with("I2F.F64")).count();
    if fp64_ops + conversions == 0.0 {
        return quiet("no fp64 instructions or conversions in the SASS");
    }
    let reads_64bit = s.mix.global_load_bits.contains_key("64");
    if promotions == 0 && reads_64bit {
        return quiet("fp64 arithmetic on 64-bit data without float promotions: intended double precision");
    }
    // Issue cost relative to an FP32 instruction on Hopper: DFMA runs at half the FP32
    // rate, conversions to and from fp64 at an eighth (16 per SM per clock).
    let cost = 2.0 * fp64_ops + 8.0 * conversions;
    let share = cost / (s.instructions as f64 - fp64_ops - conversions + cost).max(1.0);
    // The chains also serialize through the XU pipe, so even an issue-light kernel pays.
    let saving = share * (0.5 + 0.5 * k.issue_weight());
    let lines = s.finding("fp64").map(|f| f.lines.clone()).unwrap_or_default();
    let at = lines.first().map(|l| format!(" at {l}")).unwrap_or_default();
    fired(
        Diagnosis::new(ToolId::Fp64InFp32, saving)
            .ev("fp64_instructions", fp64_ops)
            .ev("fp64_conversions", conversions)
            .ev("float_promotions", promotions as f64)
            .ev("issue_cost_share", share)
            .ev("fp64_pipe_pct", k.opt(m::FP64_PIPE_PCT).unwrap_or(0.0))
            .ev("xu_pipe_pct", k.opt(m::XU_PCT).unwrap_or(0.0))
            .analysis(format!(
                "{fp64_ops:.0} fp64 instructions and {conversions:.0} conversions to or from fp64{at} in a kernel \
                    whose data is float: a double literal or a double math call promotes the expression. They take {} \
                    of the issue cost (DFMA at half rate, F2F.F64 at an eighth) and lengthen every dependency chain.",
                pct(share)
            ))
            .prescription(format!(
                "Keep the arithmetic in float: write float literals (0.5f, 1.0001f), call float math \
                (sinf, expf, or __sinf/__expf when the tolerance allows) instead of sin/exp on a promoted value, and \
                keep intermediates in float variables{at}."
            ))
            .at(&lines),
    )
}

pub(super) fn warp_divergence(k: &Kernel, r: &Roofline) -> ToolResult {
    let active = k.m(m::THREADS_PER_INST)?;
    // Lanes predicated off idle as surely as lanes branched away.
    let working = k.working_lanes().unwrap_or(active / 32.0);
    let ratio = 32.0 * working;
    let divergent = k.opt(m::DIVERGENT_TARGETS).unwrap_or(0.0);
    // Whether lanes idle is read from the active lanes: a warp-uniform predicated-off
    // instruction (`@!P0 EXIT` taken by no lane) lowers the working count with no lane
    // idling beside a working one. The working lanes size the loss once lanes do idle.
    if active / 32.0 >= 0.9 {
        return quiet(format!("{active:.1} of 32 threads active per instruction"));
    }
    // Blocks that are not whole warps leave lanes idle with no branch at all; only the
    // share they explain is theirs.
    let block = k.opt(m::BLOCK).filter(|b| *b > 0.0);
    let whole_warps = block.map(|b| b / (32.0 * (b / 32.0).ceil())).unwrap_or(1.0);
    if divergent == 0.0 && k.sass.is_some_and(|s| s.predicated_ratio < 0.3) && working >= whole_warps - 0.05 {
        return quiet(format!(
            "{ratio:.1} threads per instruction, but no divergent branches: idle lanes come from partial warps"
        ));
    }
    // A kernel the pipes limit pays for its idle lanes in full: each warp instruction
    // occupies the pipe whatever share of its lanes work.
    let busy = match r.class {
        Bound::ComputeBound => k.issue_weight().max(r.busiest_pipe.as_ref().map_or(0.0, |(_, v)| v / 100.0)),
        _ => k.issue_weight(),
    };
    let saving = (1.0 - working / whole_warps).max(0.0) * busy.max(0.3);
    let lines = k.lines_of_sites(&["branch"]);
    fired(
        Diagnosis::new(ToolId::WarpDivergence, saving)
            .ev("threads_per_instruction", active)
            .ev("working_threads_per_instruction", ratio)
            .ev("simt_efficiency", working)
            .ev("useful_pipe_pct", r.useful_pipe_pct.unwrap_or(0.0))
            .ev("divergent_branch_targets", divergent)
            .ev("issue_active_pct", k.opt(m::ISSUE_ACTIVE).unwrap_or(0.0))
            .analysis(format!(
                "Warps execute {ratio:.1} of 32 threads per instruction ({} SIMT efficiency); {}{}",
                pct(working),
                if divergent > 0.0 {
                    format!(
                        "{} branch targets diverged: lanes of one warp take different paths, and each path runs with \
                        the other lanes masked off.",
                        count(divergent)
                    )
                } else {
                    "no branch diverged: lanes exit early or are predicated off, and the rest of each warp runs on \
                    with them idle."
                        .to_string()
                },
                match (r.class, &r.busiest_pipe, r.useful_pipe_pct) {
                    (Bound::ComputeBound, Some((pipe, busy)), Some(useful)) => format!(
                        " The {pipe} pipe is {busy:.0}% busy but about {useful:.0}% useful: the kernel is compute-bound \
                        on idle lanes."
                    ),
                    _ => String::new(),
                }
            ))
            .prescription(
                "Give every lane of a warp work on the same path: branch on the warp index (threadIdx.x / 32) or \
                on data sorted so a warp shares one path, not on lane parity; map one work item to one thread (a \
                thread per complex value or record, not per float with half the threads idle); compact the active \
                items before an expensive loop; for bodies that differ only in constants, select the constants and \
                run one path.",
            )
            .at(&lines),
    )
}

pub(super) fn no_tensor_cores(k: &Kernel, _: &Roofline) -> ToolResult {
    let s = k.sass()?;
    if s.count(Class::Tensor) > 0 {
        return quiet(format!("{} tensor instructions already in the SASS", s.count(Class::Tensor)));
    }
    if let Some(t) = k.opt(m::TENSOR_PCT).filter(|t| *t > 1.0) {
        return quiet(format!("tensor pipe {t:.1}% active"));
    }
    // A multiply-accumulate loop over loaded operands is the shape tensor cores serve.
    let mac_loop = s.loops.iter().find(|l| {
        let fp = l.mix.count(Class::Fp32) + l.mix.count(Class::Fp16);
        let loads = l.mix.count(Class::GlobalLoad) + l.mix.count(Class::SharedLoad);
        loads > 0 && fp > 0 && 4 * fp >= loads && l.mix.count(Class::Mufu) == 0
    });
    let Some(lp) = mac_loop else {
        return quiet("no loop multiplies loaded operands");
    };
    let flops = k.achieved_flops();
    let dur = k.opt(m::DURATION);
    let ai = match (flops, k.dram_bytes(), dur) {
        (Some(f), Some(b), Some(t)) if b > 0.0 => Some(f * t / b),
        _ => None,
    };
    if let Some(ai) = ai.filter(|a| *a < 8.0) {
        return quiet(format!("{ai:.1} FLOP per DRAM byte: too little reuse for tensor cores to pay"));
    }
    let cc = k.device.compute_capability.map(|c| c.0).unwrap_or(9);
    let accuracy = k.hints.accuracy.as_ref();
    let (path, per_clock) = match accuracy {
        Some(a) => crate::precision::fastest_admissible(a, cc),
        None => (crate::precision::MathPath::Tf32, crate::precision::MathPath::Tf32.flops_per_sm_clock(cc)),
    };
    if path == crate::precision::MathPath::Fp32Fma {
        return quiet(format!(
            "the task's rtol {:.0e} admits no tensor-core path for its data: FFMA stays",
            accuracy.map(|a| a.rtol).unwrap_or(0.0)
        ));
    }
    let peak = match (k.device.sms, k.device.sm_clock_hz) {
        (Some(n), Some(hz)) => Some(n * hz * per_clock),
        _ => None,
    };
    let mut saving = match (flops, peak) {
        (Some(f), Some(p)) if p > 0.0 => (1.0 - f / (0.6 * p)).clamp(0.0, 0.9),
        _ => 0.3,
    };
    // Tensor cores need operands staged once and reused; while every FMA still loads
    // its own operands from shared memory, register tiling is the step that pays first.
    let needs_tiling = mac_loop_without_reuse(s).is_some();
    if needs_tiling {
        saving *= 0.5;
    }
    let line = lp.line.clone().map(|l| vec![l]).unwrap_or_default();
    let at = lp.line.as_ref().map(|l| format!(" at {l}")).unwrap_or_default();
    let how = match (path, accuracy) {
        (crate::precision::MathPath::ThreeTf32, Some(a)) => format!(
            "Use 3xTF32: split each fp32 operand into a TF32 high part and a TF32 remainder (hi = tf32(x), lo = tf32(x \
                - hi)) and accumulate lo*hi + hi*lo + hi*hi with mma.sync m16n8k8 TF32 in fp32; it keeps fp32 accuracy \
                (~{:.0e}) at up to 8/3 the FFMA peak. Tensor cores do not round their accumulation to nearest, so over \
                a long K the error drifts one way: accumulate each k tile in fresh fragments and add them to the \
                running sum with FADD (on an H100 at K = 4096 that took gemm_f32's max error from 7e-3 to 1.2e-4). \
                Plain TF32 (~{:.0e} relative) fails this task's rtol {:.0e}.",
            crate::precision::MathPath::ThreeTf32.unit_roundoff(),
            crate::precision::MathPath::Tf32.unit_roundoff(),
            a.rtol
        ),
        (crate::precision::MathPath::Tf32, Some(a)) => format!(
            "Use TF32 tensor cores (mma.sync m16n8k8 .tf32, or wmma with precision::tf32): the task's rtol {:.0e} \
                admits TF32's ~5e-4 relative rounding.",
            a.rtol
        ),
        (crate::precision::MathPath::Half, _) => "Use 16-bit tensor cores with fp32 accumulation (mma.sync / wmma on \
            half or bf16 fragments; wgmma on sm_90a)."
            .to_string(),
        _ => "Use mma.sync / wmma (TF32 for float data, or bf16/fp16 inputs with fp32 accumulation). TF32 keeps 10 \
            mantissa bits (~5e-4 relative): check the task's tolerance, or split into 3xTF32 for fp32 \
            accuracy."
            .to_string(),
    };
    let first = if needs_tiling { "After register tiling (register-tiling), move" } else { "Move" };
    let d =
        Diagnosis::new(ToolId::NoTensorCores, saving)
            .ev("achieved_gflops", flops.unwrap_or(0.0) / 1e9)
            .ev("admissible_path", path.name())
            .ev("admissible_peak_tflops", peak.unwrap_or(0.0) / 1e12)
            .ev("flop_per_dram_byte", ai.unwrap_or(0.0))
            .ev("tensor_pipe_pct", k.opt(m::TENSOR_PCT).unwrap_or(0.0))
            .ev("fma_pipe_pct", k.opt(m::FMA_PIPE_PCT).unwrap_or(0.0))
            .ev("loop_fp_instructions", (lp.mix.count(Class::Fp32) + lp.mix.count(Class::Fp16)) as f64)
            .ev("loop_loads", (lp.mix.count(Class::GlobalLoad) + lp.mix.count(Class::SharedLoad)) as f64)
            .analysis(format!(
            "The multiply-accumulate loop{at} runs on the FMA pipe at {:.0} GFLOP/s while the tensor pipe is idle; {} \
                offer ~{:.0} TFLOP/s here{}{}.",
            flops.unwrap_or(0.0) / 1e9,
            path.name(),
            peak.unwrap_or(0.0) / 1e12,
            if accuracy.is_some() { " within the task's \
                tolerance" } else { " (the task's tolerance is unknown: TF32 \
                assumed)" },
            ai.map(|a| format!(", and {a:.0} FLOP per DRAM byte shows the reuse they need")).unwrap_or_default()
        ))
            .prescription(format!(
            "{first} the product onto tensor cores: stage A and B tiles in shared memory and feed mma.sync fragments \
                from them (ldmatrix); on sm_90a use wgmma fed from shared-memory descriptors. {how}"
        ))
            .at(&line);
    fired(if needs_tiling { d.cap(Severity::Medium) } else { d })
}

pub(super) fn special_function_bound(k: &Kernel, _: &Roofline) -> ToolResult {
    let mufu = k.sass()?.count(Class::Mufu);
    if mufu == 0 {
        return quiet("no MUFU instructions");
    }
    let xu = k.m(m::XU_PCT)?;
    if xu < 30.0 {
        return quiet(format!("XU pipe {xu:.0}% busy"));
    }
    let lines = k.lines_of(&[Class::Mufu]);
    fired(
        Diagnosis::new(ToolId::SpecialFunctionBound, 0.5 * xu / 100.0)
            .ev("mufu_instructions", mufu as f64)
            .ev("xu_pipe_pct", xu)
            .analysis(format!(
                "The special-function pipe (XU: exp, log, sin, reciprocal, sqrt at 16 per SM per clock) \
                is {xu:.0}% busy with {mufu} MUFU instructions in the code."
            ))
            .prescription(format!(
                "Use the fast intrinsics where the tolerance allows (__expf, __logf, __sinf: {}), \
                write exp(x) as exp2f(x * log2e) with the constant folded into a preceding multiply, and compute one \
                reciprocal and multiply instead of dividing \
                repeatedly.",
                crate::precision::fast_math_verdict(k.hints.accuracy.as_ref()).1
            ))
            .at(&lines),
    )
}

/// Integer share a lean kernel still has (addresses, loop counters, predicates).
pub(super) const LEAN_INTEGER_SHARE: f64 = 0.25;

/// Issue utilization at which a kernel counts as issue-bound (dual issue is rare, so
/// schedulers saturate well below 100%).
pub(super) const ISSUE_BOUND_PCT: f64 = 70.0;

pub(super) fn integer_overhead(k: &Kernel, _: &Roofline) -> ToolResult {
    let s = k.sass()?;
    let share = s.count(Class::Int) as f64 / (s.instructions.max(1)) as f64;
    if share < 0.5 {
        return quiet(format!("integer instructions are {} of the code", pct(share)));
    }
    // Issue-bound, time follows instructions: trimming the integer work to a lean share
    // removes 1 - (1 - share) / (1 - lean) of them. Otherwise the static share (which
    // counts cold paths too, such as a range reduction's slow branch) is only a hint.
    let issue = k.opt(m::ISSUE_ACTIVE).unwrap_or(50.0);
    let saving = if issue >= ISSUE_BOUND_PCT - 10.0 {
        (1.0 - (1.0 - share) / (1.0 - LEAN_INTEGER_SHARE)).max(0.0) * (issue / ISSUE_BOUND_PCT).min(1.0)
    } else {
        (share - 0.4) * k.issue_weight()
    };
    fired(
        Diagnosis::new(ToolId::IntegerOverhead, saving)
            .ev("integer_share", share)
            .ev("integer_instructions", s.count(Class::Int) as f64)
            .ev("instructions", s.instructions as f64)
            .ev("issue_active_pct", issue)
            .analysis(format!(
                "{} of the instructions are integer arithmetic (index math, 64-bit address arithmetic, \
                division and modulo sequences) competing with the real work for issue slots, and the schedulers issue \
                {issue:.0}% of cycles: time follows the instruction count.",
                pct(share)
            ))
            .prescription(
                "Trim index math per element: process several elements per thread (8 bf16 or 4 floats per \
                16-byte access) so the index, bounds and address work is paid once per group, hoist invariant address \
                computations out of loops, advance pointers instead of recomputing offsets, replace / and % (a 64-bit \
                % is a ~20-instruction sequence) by shifts and masks for power-of-two sizes, a row loop, or \
                precomputed reciprocals, and use 32-bit indices where sizes allow.",
            ),
    )
}

pub(super) fn conversion_overhead(k: &Kernel, _: &Roofline) -> ToolResult {
    let s = k.sass()?;
    let fp64_conv = s.fp64_conversions() as u64;
    let conv = s.count(Class::Conversion).saturating_sub(fp64_conv);
    let share = conv as f64 / s.instructions.max(1) as f64;
    if share < 0.08 {
        return quiet(format!("{conv} conversions ({})", pct(share)));
    }
    let lines = k.lines_of(&[Class::Conversion]);
    fired(
        Diagnosis::new(ToolId::ConversionOverhead, share * k.issue_weight())
            .ev("conversions", conv as f64)
            .ev("share", share)
            .analysis(format!(
                "{conv} type conversions (I2F, F2I, F2F) are {} of the instructions; they issue at a \
                quarter of the FP32 rate or less.",
                pct(share)
            ))
            .prescription(
                "Convert once: keep loop counters and indices in the type they are used as, convert packed \
                data with the paired intrinsics (__floats2bfloat162_rn, __half22float2), and hoist conversions of \
                invariants out of loops.",
            )
            .at(&lines),
    )
}

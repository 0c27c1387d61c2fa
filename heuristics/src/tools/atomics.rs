//! Atomics that serialize: hot global addresses in L2, and shared-memory bins whose
//! lanes replay or retry.

use super::{count, fired, pct, quiet};
use crate::diagnosis::{Diagnosis, ToolResult};
use crate::facts::{metric as m, Kernel, Missing};
use crate::roofline::Roofline;
use crate::tool_id::ToolId;
use sass::Class;

pub(super) fn atomic_contention(k: &Kernel, r: &Roofline) -> ToolResult {
    let global = global_atomic_contention(k)?;
    let shared = shared_atomic_contention(k, r);
    match (global, shared) {
        (Some(g), Some(s)) => fired(if s.score >= g.score { s } else { g }),
        (Some(d), None) | (None, Some(d)) => fired(d),
        (None, None) => quiet(if k.opt(m::SHARED_ATOM_INST).unwrap_or(0.0) > 0.0 {
            "global and shared atomics are few or uncontended"
        } else {
            "no contended global atomics, no shared atomics"
        }),
    }
}

pub(super) fn global_atomic_contention(k: &Kernel) -> Result<Option<Diagnosis>, Missing> {
    let atomics = k.m0(m::GLOBAL_RED)? + k.m0(m::GLOBAL_ATOM)?;
    if atomics == 0.0 {
        return Ok(None);
    }
    let others = k.opt(m::LD_REQUESTS).unwrap_or(0.0) + k.opt(m::ST_REQUESTS).unwrap_or(0.0);
    let share = atomics / (atomics + others);
    let waits = k.stall_share(&["long_scoreboard", "short_scoreboard", "lg_throttle"]).unwrap_or(0.5);
    let saving = waits * (2.0 * share).min(1.0);
    if saving < 0.03 {
        return Ok(None);
    }
    let lines = k.lines_of(&[Class::Atomic]);
    Ok(Some(
        Diagnosis::new(ToolId::AtomicContention, saving)
            .ev("global_atomic_requests", atomics)
            .ev("share_of_global_requests", share)
            .ev("memory_wait_stall_share", waits)
            .ev(
                "l2_atomic_requests",
                k.opt(m::L2_RED_REQUESTS).unwrap_or(0.0) + k.opt(m::L2_ATOM_REQUESTS).unwrap_or(0.0),
            )
            .analysis(format!(
                "{} global atomic or reduction requests, {} of all global requests; warps spend {} of their stall time \
                    waiting on memory results. Updates to a few hot addresses serialize in L2: each waits for the one \
                    before.",
                count(atomics),
                pct(share),
                pct(waits)
            ))
            .prescription(
                "Privatize the counters: accumulate per block in shared memory (atomicAdd on __shared__ \
                bins, after warp aggregation with __match_any_sync / __reduce_add_sync so one lane per distinct bin \
                updates), then add each block's partial result to global memory once per bin.",
            )
            .at(&lines),
    ))
}

/// Shared-memory atomics that serialize: lanes of a warp on the same address replay
/// (more wavefronts than instructions), and float atomics without a native shared
/// instruction become compare-and-swap loops that retry under contention.
pub(super) fn shared_atomic_contention(k: &Kernel, _: &Roofline) -> Option<Diagnosis> {
    let executed = k.opt(m::SHARED_ATOM_INST).filter(|x| *x > 0.0)?;
    let wavefronts = k.opt(m::SHARED_ATOM_WAVEFRONTS).unwrap_or(executed);
    let total = k.opt(m::INST_EXECUTED)?;
    let cas_loop = k.sass.and_then(|s| {
        s.loops.iter().find(|l| {
            l.mix.count(Class::Atomic) > 0
                && s.sites.get("atomic").is_some_and(|v| {
                    v.iter().any(|x| x.offset >= l.start && x.offset <= l.end && x.opcode.starts_with("ATOMS.CAS"))
                })
                && l.instructions <= 12
        })
    });
    // A retry loop executes its whole body per attempt; a native atomic one instruction.
    let per_attempt = cas_loop.map(|l| l.instructions as f64).unwrap_or(1.0);
    let atom_share = (executed * per_attempt / total).min(1.0);
    let replays = wavefronts / executed;
    let waits = k.stall_share(&["short_scoreboard", "mio_throttle"]).unwrap_or(0.5);
    let serialized = if cas_loop.is_some() { 1.0 } else { (1.0 - 1.0 / replays).max(0.0) };
    let saving = atom_share * serialized * waits.max(0.3);
    if saving < 0.05 {
        return None;
    }
    let lines = k.lines_of(&[Class::Atomic]);
    let how = match cas_loop {
        Some(l) => format!(
            "Float atomicAdd on shared memory compiles to a compare-and-swap retry loop ({} instructions per attempt, \
                ATOMS.CAS): lanes that hit the same bin fail and retry one after another",
            l.instructions
        ),
        None => format!(
            "Lanes of a warp that hit the same shared address are replayed: {replays:.1} wavefronts per \
            atomic instruction"
        ),
    };
    Some(
        Diagnosis::new(ToolId::AtomicContention, saving)
            .ev("shared_atomic_instructions", executed)
            .ev("shared_atomic_wavefronts", wavefronts)
            .ev("wavefronts_per_instruction", replays)
            .ev("share_of_executed_instructions", atom_share)
            .ev("shared_wait_stall_share", waits)
            .ev("cas_retry_loop", if cas_loop.is_some() { 1.0 } else { 0.0 })
            .analysis(format!(
                "{how}. Shared atomics and their retries are {} of the instructions executed ({} atomic instructions), \
                    and warps spend {} of their stall time waiting on shared-memory results.",
                pct(atom_share),
                count(executed),
                pct(waits)
            ))
            .prescription(
                "Aggregate before the atomic: keep per-thread partial sums in registers when the bins are \
                few (one register per bin), or combine lanes with the same bin first (__match_any_sync, then \
                __reduce_add_sync or a shuffle reduction) so one lane per distinct bin and warp updates shared memory; \
                with many bins, give each warp its own sub-histogram and merge them at the end.",
            )
            .at(&lines),
    )
}

//! The recipe table: one entry per executable prescription, in the order `nightshift
//! rewrite` lists them. Each entry names the diagnosis tools whose prescription it
//! carries out, so the tuner can order applications by the parent's diagnoses; one file
//! per recipe.

pub mod block_knob;
pub mod coarsen;
pub mod cooperative;
pub mod fast_divmod;
mod gather;
pub mod grid_stride;
mod index_split;
pub mod index_width;
pub mod intrinsics;
mod jam;
pub mod launch_bounds;
pub mod prefetch;
pub mod read_only;
pub mod reciprocal;
pub mod register_table;
pub mod row_cache;
pub mod row_strip;
pub mod shuffle_reduce;
mod speculate;
pub mod tensor_tile;
mod uniform;
pub mod unroll;
pub mod vectorize;
mod window;

use crate::recipe::{Applied, NotApplicable, Params, Recipe, RecipeId, RecipeKind, Rewrite};
use crate::source::{Kernel, Source};
use crate::version::{self, Change};
use heuristics::ToolId;

/// One kernel's plan: the change and a note for the description.
pub(crate) type Planned<'k> = Result<(Change<'k>, String), NotApplicable>;

/// Runs `plan` on every kernel the recipe may rewrite and applies the plans that match;
/// when none does, declines with every kernel's reason.
pub(crate) fn per_kernel(
    src: &Source,
    params: &Params,
    mut plan: impl for<'k> FnMut(&'k Kernel) -> Planned<'k>,
) -> Applied {
    let kernels = crate::target_kernels(src, params)?;
    let mut changes = Vec::new();
    let mut notes = Vec::new();
    let mut why = Vec::new();
    for k in &kernels {
        match plan(k) {
            Ok((c, n)) => {
                changes.push(c);
                notes.push(n);
            }
            Err(e) => why.push(e.0),
        }
    }
    if changes.is_empty() {
        return Err(NotApplicable::new(why.join("; ")));
    }
    let guards = changes.iter().flat_map(|c| c.guards.iter().map(|g| version::shown(g))).collect();
    Ok(Rewrite { source: version::apply(src, changes)?, description: notes.join("; "), guards })
}

/// Every recipe.
pub const ALL: &[Recipe] = &[
    Recipe {
        id: RecipeId::IndexWidth,
        summary: "64-bit index arithmetic in 32 bits; versioned on every buffer holding at most 2^30 elements",
        kind: RecipeKind::Structural,
        answers: &[ToolId::IntegerOverhead],
        versioned: true,
        more_registers: false,
        params: index_width::PARAMS,
        knobs: &[],
        apply: index_width::apply,
    },
    Recipe {
        id: RecipeId::FastDivmod,
        summary: "integer / and % by run-time kernel parameters as multiply-high and shift by host-computed magic numbers; versioned on their ranges",
        kind: RecipeKind::Structural,
        answers: &[ToolId::IntegerOverhead],
        versioned: true,
        more_registers: false,
        params: fast_divmod::PARAMS,
        knobs: &[],
        apply: fast_divmod::apply,
    },
    Recipe {
        id: RecipeId::Vectorize,
        summary: "each thread handles V consecutive elements with 8- or 16-byte loads and stores and a scalar tail; versioned on alignment",
        kind: RecipeKind::Structural,
        answers: &[ToolId::NarrowGlobalAccess, ToolId::IntegerOverhead, ToolId::ScalarGlobalAccess, ToolId::MemoryLatencyBound],
        versioned: true,
        more_registers: true,
        params: vectorize::PARAMS,
        knobs: &[],
        apply: vectorize::apply,
    },
    Recipe {
        id: RecipeId::Cooperative,
        summary: "a thread per output becomes L lanes per output: inner loops strided across lanes, shuffle reductions, lane 0 writes; versioned on the block size",
        kind: RecipeKind::Structural,
        answers: &[ToolId::UncoalescedGlobal, ToolId::UnderFilledGrid, ToolId::MemoryLatencyBound, ToolId::DependentLoads, ToolId::RedundantL2Traffic],
        versioned: true,
        more_registers: false,
        params: cooperative::PARAMS,
        knobs: &[],
        apply: cooperative::apply,
    },
    Recipe {
        id: RecipeId::RowCache,
        summary: "a row read in two or three passes (a statistic, then the normalized values) is kept in registers by the first: later passes read the registers; versioned on the row fitting",
        kind: RecipeKind::Structural,
        answers: &[ToolId::RedundantDramTraffic, ToolId::RedundantL2Traffic, ToolId::MemoryLatencyBound],
        versioned: true,
        more_registers: true,
        params: row_cache::PARAMS,
        knobs: &[],
        apply: row_cache::apply,
    },
    Recipe {
        id: RecipeId::ShuffleReduce,
        summary: "a shared-memory tree reduction as warp shuffles plus one shared exchange between warps; versioned on the block size",
        kind: RecipeKind::Structural,
        answers: &[ToolId::BarrierStalls, ToolId::SharedMemoryBound, ToolId::SharedBankConflicts],
        versioned: true,
        more_registers: false,
        params: shuffle_reduce::PARAMS,
        knobs: &[],
        apply: shuffle_reduce::apply,
    },
    Recipe {
        id: RecipeId::BlockKnob,
        summary: "block sizes fixed in the launcher (literals, constants, dim3 components; unguarded block macros get an #ifndef) and grid caps become -D knobs the tuner moves",
        kind: RecipeKind::Tuning,
        answers: &[ToolId::LowOccupancy, ToolId::UnderFilledGrid, ToolId::LaunchOverhead, ToolId::RegisterPressure],
        versioned: false,
        more_registers: false,
        params: block_knob::PARAMS,
        knobs: &[],
        apply: block_knob::apply,
    },
    Recipe {
        id: RecipeId::GridStride,
        summary: "a bounds-checked element kernel as a grid-stride loop on a grid of k blocks per SM (a knob)",
        kind: RecipeKind::Structural,
        answers: &[ToolId::UnderFilledGrid, ToolId::LaunchOverhead, ToolId::IntegerOverhead],
        versioned: false,
        more_registers: false,
        params: grid_stride::PARAMS,
        knobs: &[grid_stride::KNOB],
        apply: grid_stride::apply,
    },
    Recipe {
        id: RecipeId::RowStrip,
        summary: "a 2-D kernel's thread computes S consecutive rows down its column (the grid's y extent / S); rows a stencil or sliding window reads at several offsets stay in a register window, one new row loaded per step",
        kind: RecipeKind::Structural,
        answers: &[ToolId::RedundantL2Traffic, ToolId::MemoryLatencyBound, ToolId::RedundantDramTraffic, ToolId::IntegerOverhead, ToolId::LaunchOverhead],
        versioned: false,
        more_registers: true,
        params: row_strip::PARAMS,
        knobs: &[],
        apply: row_strip::apply,
    },
    Recipe {
        id: RecipeId::RegisterTable,
        summary: "a small buffer read only at positions fixed once the loops unroll (weights, coefficients) is loaded into registers once per thread; versioned on its length where the task does not fix it",
        kind: RecipeKind::Structural,
        answers: &[ToolId::RedundantL2Traffic, ToolId::MemoryLatencyBound, ToolId::DependentLoads, ToolId::ScalarGlobalAccess],
        versioned: true,
        more_registers: true,
        params: register_table::PARAMS,
        knobs: &[],
        apply: register_table::apply,
    },
    Recipe {
        id: RecipeId::TensorTile,
        summary: "the multiply-accumulate loop of a shared-memory tiled fp32 GEMM on tensor cores (mma.sync m16n8k8; 3xTF32 by default, fp32-level accuracy), the block's warps over the whole tile, the sums added to the original's accumulators after the k loop",
        kind: RecipeKind::Structural,
        answers: &[ToolId::NoTensorCores, ToolId::RegisterTiling, ToolId::SharedMemoryBound],
        versioned: false,
        more_registers: true,
        params: tensor_tile::PARAMS,
        knobs: &[],
        apply: tensor_tile::apply,
    },
    Recipe {
        id: RecipeId::Prefetch,
        summary: "a k loop that stages tiles in shared memory loads the next trip's values into registers after its first barrier, so this trip's work hides their latency; the next trip stores them",
        kind: RecipeKind::Structural,
        answers: &[ToolId::MemoryLatencyBound, ToolId::AsyncCopyOpportunity, ToolId::BarrierStalls, ToolId::LowOccupancy],
        versioned: false,
        more_registers: true,
        params: prefetch::PARAMS,
        knobs: &[],
        apply: prefetch::apply,
    },
    Recipe {
        id: RecipeId::ReadOnly,
        summary: "__restrict__ on pointer parameters and __ldg on reads of never-written buffers; versioned on the buffers not overlapping",
        kind: RecipeKind::Structural,
        answers: &[ToolId::MemoryLatencyBound, ToolId::DependentLoads],
        versioned: true,
        more_registers: false,
        params: read_only::PARAMS,
        knobs: &[],
        apply: read_only::apply,
    },
    Recipe {
        id: RecipeId::Intrinsics,
        summary: "fast intrinsics per call site (__expf, __fdividef, rsqrtf, tanh.approx...) where the task's tolerance admits them",
        kind: RecipeKind::Structural,
        answers: &[ToolId::AccurateMath, ToolId::SpecialFunctionBound, ToolId::ConversionOverhead],
        versioned: false,
        more_registers: false,
        params: intrinsics::PARAMS,
        knobs: &[],
        apply: intrinsics::apply,
    },
    Recipe {
        id: RecipeId::Reciprocal,
        summary: "float divisions in loops by a value that holds over them as multiplications by its reciprocal, computed once, where every output's tolerance admits it",
        kind: RecipeKind::Structural,
        answers: &[ToolId::AccurateMath],
        versioned: false,
        more_registers: false,
        params: reciprocal::PARAMS,
        knobs: &[],
        apply: reciprocal::apply,
    },
    Recipe {
        id: RecipeId::Unroll,
        summary: "#pragma unroll N on innermost loops without a pragma",
        kind: RecipeKind::Tuning,
        answers: &[ToolId::MemoryLatencyBound, ToolId::DependentLoads, ToolId::IntegerOverhead],
        versioned: false,
        more_registers: false,
        params: unroll::PARAMS,
        knobs: &[],
        apply: unroll::apply,
    },
    Recipe {
        id: RecipeId::LaunchBounds,
        summary: "__launch_bounds__(block, NS_MIN_BLOCKS) on kernels with a compile-time block size; the blocks per SM a file-wide knob",
        kind: RecipeKind::Tuning,
        answers: &[ToolId::RegisterPressure, ToolId::LowOccupancy, ToolId::LocalMemory],
        versioned: false,
        more_registers: false,
        params: launch_bounds::PARAMS,
        knobs: &[launch_bounds::KNOB],
        apply: launch_bounds::apply,
    },
    Recipe {
        id: RecipeId::Coarsen,
        summary: "each block does the work of k blocks of the original grid along x in turn (a knob): short blocks pay scheduling and set-up once per k",
        kind: RecipeKind::Tuning,
        answers: &[ToolId::MemoryLatencyBound, ToolId::IntegerOverhead],
        versioned: false,
        more_registers: false,
        params: coarsen::PARAMS,
        knobs: &[coarsen::KNOB],
        apply: coarsen::apply,
    },
];

/// The recipe with this id (every id has one; a test holds the table to it).
pub fn get(id: RecipeId) -> &'static Recipe {
    ALL.iter().find(|r| r.id == id).unwrap_or(&ALL[0])
}

/// The largest trip count of `for (j = 0; j < END; ...)` when END is a kernel parameter
/// the launcher passes straight from a task size, a literal, or a constant of the file.
pub(crate) fn largest_trip_count(
    src: &Source,
    facts: &crate::facts::Facts,
    k: &Kernel,
    f: tree_sitter::Node,
) -> Option<i64> {
    use crate::syntax::{binary, single_declarator, strip, text};
    let t = src.text();
    // `for (j = 0; j < END; ++j)` (or `<=`): a counter from 0 on the left, stepping by one.
    let (var, start) = single_declarator(t, f.child_by_field_name("initializer")?)?;
    if crate::pattern::int_literal(text(t, start?)) != Some(0) {
        return None;
    }
    let update = f.child_by_field_name("update")?;
    if !(update.kind() == "update_expression" && text(t, update).contains("++")) {
        return None;
    }
    let (op, counter, end) = binary(t, f.child_by_field_name("condition")?)?;
    if !crate::syntax::is_ident(t, counter, &var) || !matches!(op, "<" | "<=") {
        return None;
    }
    let inclusive = i64::from(op == "<=");
    let end = strip(end);
    let last = if end.kind() == "number_literal" {
        crate::pattern::int_literal(text(t, end))?
    } else if end.kind() == "identifier" {
        let name = text(t, end);
        if k.param(name).is_none() {
            // A macro, `constexpr` or `const` of the file, unless the kernel declares the
            // name itself.
            let body = src.node(&k.body, "compound_statement")?;
            if crate::syntax::declared_names(t, body).iter().any(|n| n == name) {
                return None;
            }
            crate::launch::file_scope_size(src, name, k.range.start).value()?
        } else {
            let arg = crate::launcher_arg(src, facts, k, name)?;
            match &facts.args.get(arg)?.kind {
                crate::facts::ArgKind::Scalar { max, .. } => (*max)?,
                _ => return None,
            }
        }
    } else {
        return None;
    };
    last.checked_add(inclusive)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_id_has_one_recipe_in_order() {
        let ids: Vec<RecipeId> = ALL.iter().map(|r| r.id).collect();
        assert_eq!(ids, RecipeId::ALL);
        for r in ALL {
            assert_eq!(get(r.id).id, r.id);
            assert!(!r.answers.is_empty(), "{} answers no diagnosis", r.id);
            assert!(!r.variants().is_empty());
        }
    }
}

//! The prompt: a fixed system message (the role, the contract every kernel must keep,
//! the reply format) and a user message with the task card, the parent's source and
//! numbers and the rewrite recipes applied on the path to it, what the profile says
//! (diagnoses, raw counters or nothing, per `--guidance`), the search memory and, for a
//! repair, what went wrong.

use crate::generate::Request;
use crate::run::config::Guidance;
use crate::task::{ArgRole, Task};
use search::Expansion;
use std::fmt::Write;

pub const SYSTEM: &str = "You are an expert CUDA performance engineer optimizing one production kernel for an NVIDIA Hopper GPU (sm_90). \
You rewrite the whole .cu file: kernels plus the extern \"C\" launcher, whose signature must stay exactly as given. \
Rules that every kernel must keep (a verifier checks each one and rejects the kernel otherwise): \
results within the task's tolerance of a trusted reference on random inputs at several sizes, awkward ones included; \
every output element written on every call; inputs never modified; no results cached or reused across calls; \
all work launched on the stream the launcher receives, finished when that stream is; \
no other libraries, no printing, no exit, no host threads, no dynamic loading. \
Reply with exactly one fenced ```cuda block holding the complete new file, then one line `Technique: <short tag>` naming the main change, \
and, if the change answers one of the diagnoses, one line `Addresses: <diagnosis id>`.";

fn signature(task: &Task) -> String {
    let params: Vec<String> = task.args.iter().map(|a| format!("{} {}", a.spelling.trim(), a.name)).collect();
    format!("extern \"C\" void {}({}, cudaStream_t stream)", task.entry, params.join(", "))
}

fn fmt_ms(x: Option<f64>) -> String {
    x.map(|v| format!("{v:.4} ms")).unwrap_or_else(|| "not timed".into())
}

/// The user message for `req`.
/// Most header text shown to the model, in bytes: past it, headers are listed by name.
const HEADER_CONTEXT_BYTES: usize = 24 * 1024;

/// The task's headers, which the kernel includes: context the reply may use but not
/// change (the build hashes them; a reply rewrites only the kernel file).
fn write_headers(m: &mut String, task: &crate::task::Task) {
    let headers = task.header_files();
    if headers.is_empty() {
        return;
    }
    let _ = writeln!(m, "\n## Headers the kernel includes (read-only: your reply replaces only the kernel file above)");
    let mut budget = HEADER_CONTEXT_BYTES;
    for (name, path) in headers {
        match std::fs::read_to_string(&path) {
            Ok(text) if text.len() <= budget => {
                budget -= text.len();
                let _ = writeln!(m, "### {name}\n```cuda\n{}\n```", text.trim_end());
            }
            Ok(text) => {
                let _ = writeln!(m, "### {name} ({} bytes, not shown: over the context budget)", text.len());
            }
            Err(_) => {}
        }
    }
}

pub fn user_message(req: &Request) -> String {
    let t = &req.task;
    let mut m = String::new();
    let _ = writeln!(m, "## Task: {} — {}", t.name, t.summary);
    let _ = writeln!(m, "Entry point (keep this exact signature):\n{}\n", signature(t));
    let _ = writeln!(m, "Arguments:");
    for a in &t.args {
        let role = match &a.role {
            ArgRole::Input { len, init } => format!("input, {len} elements, initialized {init}"),
            ArgRole::Output { len, .. } => format!("output, {len} elements, every element must be written"),
            ArgRole::InOut { len, .. } => format!("input and output, {len} elements, updated in place"),
            ArgRole::Scalar { .. } => "size value".into(),
        };
        let _ = writeln!(m, "- `{}` ({}): {role}", a.name, a.spelling.trim());
    }
    let checks: Vec<String> = t.checks.iter().map(|s| s.to_string()).collect();
    if t.serves_shapes() {
        let shapes = t.served_in_words();
        let _ = writeln!(
            m,
            "\nTimed at every shape it serves: {}; the speedup is their weighted geometric mean, and a kernel slower than the baseline at any of them is never accepted. Also checked at {}.",
            shapes.join("; "),
            checks.join("; ")
        );
    } else {
        let _ = writeln!(m, "\nTimed at {}; also checked at {}.", t.bench, checks.join("; "));
    }
    let _ = writeln!(
        m,
        "Tolerance: |out - ref| <= {:e} + {:e} * |ref| (NaN and Inf must match){}.",
        t.tolerance.atol,
        t.tolerance.rtol,
        if t.deterministic { "; repeated calls must give bit-identical results" } else { "" }
    );
    if let Some(r) = &t.roofline {
        let _ = writeln!(
            m,
            "Least work any correct kernel does: {} bytes{}{}.",
            r.bytes,
            r.flops.as_ref().map(|f| format!(", {f} flops ({})", r.flops_kind)).unwrap_or_default(),
            req.floor_ms.map(|f| format!(" — a floor of {f:.4} ms on this GPU")).unwrap_or_default()
        );
    }
    let b = &req.baseline_summary;
    let _ = writeln!(
        m,
        "\n## Baseline: {}{}",
        fmt_ms(b.candidate_ms),
        b.pct_of_floor.map(|p| format!(", {p:.1}% of the floor")).unwrap_or_default()
    );

    let p = &req.parent_summary;
    let _ = writeln!(m, "\n## Current kernel (node {})", req.parent);
    if p.passed {
        let _ = writeln!(
            m,
            "Correct. {}{}{}{}{}",
            fmt_ms(p.candidate_ms),
            p.speedup.map(|s| format!(", {s:.3}x the baseline")).unwrap_or_default(),
            p.pct_of_floor.map(|x| format!(", {x:.1}% of the floor")).unwrap_or_default(),
            p.registers.map(|r| format!(", {r} registers/thread")).unwrap_or_default(),
            p.spill_bytes.filter(|s| *s > 0).map(|s| format!(", {s} bytes spilled")).unwrap_or_default(),
        );
    } else {
        let _ = writeln!(
            m,
            "REJECTED: {}: {}",
            p.failure_class.as_ref().map_or("failed", |c| c.name()),
            p.failure_message.as_deref().unwrap_or("")
        );
    }
    let recipes = crate::generate::tune::recipes_on_path(&req.path);
    if !recipes.is_empty() {
        // The built-in rewrites leave their marks in the source (`_fast` copies behind a
        // run-time check, `ns_` helpers); say what they were so the reply can build on them.
        let _ = writeln!(
            m,
            "Rewrite recipes applied on the path from the baseline to this kernel, in order: {}. \
             A `NAME_fast` kernel is the rewritten copy the launcher takes when its `/* nightshift: fast path */` check holds; the original is the fallback.",
            recipes.iter().map(|r| format!("`{r}`")).collect::<Vec<_>>().join(" -> ")
        );
    }
    let _ = writeln!(m, "```cuda\n{}\n```", req.parent_source.trim_end());
    write_headers(&mut m, &req.task);

    if req.kind == Expansion::Improve {
        match req.guidance {
            Guidance::Tools => {
                let _ = writeln!(m, "\n## What the profile says (Nsight Compute + SASS, most important first)");
                if req.profile.shared_from.is_some() {
                    let _ = writeln!(m, "({})", req.profile.note);
                }
                match &req.profile.diagnoses {
                    Some(r) if !r.kernels.is_empty() => {
                        for k in &r.kernels {
                            let _ = writeln!(m, "{}", heuristics::render::guidance(k, 8));
                        }
                    }
                    _ => {
                        let _ = writeln!(m, "No profile: {}", req.profile.note);
                    }
                }
            }
            Guidance::Raw => {
                let _ = writeln!(m, "\n## Nsight Compute counters of the current kernel");
                if req.profile.shared_from.is_some() && req.profile.raw.is_some() {
                    let _ = writeln!(m, "({})", req.profile.note);
                }
                let _ = writeln!(m, "{}", req.profile.raw.as_deref().unwrap_or(&req.profile.note));
            }
            Guidance::None => {}
        }
    }
    let memory = req.memory.summary(8);
    if !memory.trim().is_empty() {
        let _ = writeln!(m, "\n## Tried so far in this search (log2 gain over the parent)\n{}", memory.trim_end());
    }
    match req.kind {
        Expansion::Improve => {
            let _ = writeln!(m, "\n## Your job\nMake this kernel faster at the timed size without breaking any rule. One focused change is better than many.");
        }
        Expansion::Repair => {
            let _ = writeln!(
                m,
                "\n## Your job\nThe kernel above was rejected. Fix what broke, keeping the idea that was meant to make it faster."
            );
            if let Some(d) = &req.failure_detail {
                let _ = writeln!(m, "What the verifier saw:\n```\n{}\n```", d.trim_end());
            }
        }
    }
    m
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::generate::ParentProfile;
    use crate::run::events::{Candidate, NodeSummary};
    use std::sync::Arc;

    fn request(kind: Expansion, guidance: Guidance) -> Request {
        let task = Task::load(&std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tasks/softmax")).unwrap();
        Request {
            node: 4,
            parent: 2,
            kind,
            parent_candidate: Candidate {
                source: "nodes/0002/kernel.cu".into(),
                defines: Default::default(),
                flags: vec![],
            },
            parent_source: "extern \"C\" void softmax(...) {}".into(),
            parent_summary: if kind == Expansion::Repair {
                NodeSummary::failed(
                    crate::wall::protocol::FailureClass::WrongAnswer.into(),
                    "y[3] = 0.5, expected 0.25",
                )
            } else {
                NodeSummary {
                    passed: true,
                    speedup: Some(1.2),
                    candidate_ms: Some(0.063),
                    pct_of_floor: Some(88.0),
                    registers: Some(40),
                    ..Default::default()
                }
            },
            baseline_summary: NodeSummary { passed: true, candidate_ms: Some(0.0759), ..Default::default() },
            failure_detail: Some("max abs err 0.25 at y[3]".into()),
            profile: ParentProfile {
                diagnoses: None,
                raw: Some("dram__throughput = 70 %".into()),
                note: "profiling is off".into(),
                shared_from: None,
            },
            guidance,
            memory: search::memory::Memory {
                techniques: [(
                    "vectorize".to_string(),
                    search::memory::Stats {
                        tries: 2,
                        correct: 1,
                        delta_sum: 0.2,
                        deltas: 1,
                        best_delta: Some(0.2),
                        ..Default::default()
                    },
                )]
                .into(),
                ..Default::default()
            },
            path: vec!["vectorize:width=8".into(), "knob:BLOCK=128".into(), "shuffle-reduce".into()],
            floor_ms: Some(0.0558),
            task: Arc::new(task),
            seed: 1,
        }
    }

    #[test]
    fn headers_are_shown_as_read_only_context() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/bias_gelu_residual");
        let tmp = tempfile::tempdir().unwrap();
        let args = crate::scaffold::Args {
            dir: tmp.path().join("t"),
            from: root.join("src/fused_epilogue.cu"),
            entry: None,
            include_dirs: vec![root.join("include")],
            force: false,
        };
        assert!(crate::scaffold::run(&args).unwrap().valid);
        let mut req = request(Expansion::Improve, Guidance::Tools);
        req.task = Arc::new(Task::load(&args.dir).unwrap());
        let m = user_message(&req);
        assert!(m.contains("read-only: your reply replaces only the kernel file"), "{m}");
        assert!(m.contains("### bf16_io.cuh\n```cuda"), "{m}");
        assert!(m.contains("### include/epilogue/activations.cuh\n```cuda"), "{m}");
        assert!(m.contains("erff(x * 0.70710678118654752f)"), "{m}");
        // Tasks without headers get no such section.
        assert!(!user_message(&request(Expansion::Improve, Guidance::Tools)).contains("Headers the kernel includes"));
    }

    #[test]
    fn the_card_carries_signature_sizes_tolerance_numbers_and_memory() {
        let m = user_message(&request(Expansion::Improve, Guidance::Tools));
        assert!(
            m.contains("extern \"C\" void softmax(const float* x, float* y, int rows, int cols, cudaStream_t stream)"),
            "{m}"
        );
        assert!(m.contains("rows=8192 cols=4096"), "{m}");
        assert!(m.contains("1e-5 * |ref|"), "{m}");
        assert!(
            m.contains("1.200x the baseline") && m.contains("88.0% of the floor") && m.contains("40 registers"),
            "{m}"
        );
        assert!(m.contains("0.0558 ms"), "{m}");
        assert!(m.contains("vectorize: 2 tries"), "{m}");
        assert!(m.contains("in order: `vectorize:width=8` -> `shuffle-reduce`."), "{m}");
        assert!(m.contains("No profile: profiling is off"), "{m}");
    }

    #[test]
    fn guidance_modes_and_repairs_change_what_is_said() {
        let raw = user_message(&request(Expansion::Improve, Guidance::Raw));
        assert!(raw.contains("dram__throughput = 70 %") && !raw.contains("What the profile says"));
        let none = user_message(&request(Expansion::Improve, Guidance::None));
        assert!(!none.contains("counters") && !none.contains("What the profile says"));
        let repair = user_message(&request(Expansion::Repair, Guidance::Tools));
        assert!(repair.contains("REJECTED: wrong-answer") && repair.contains("max abs err 0.25"), "{repair}");
    }

    #[test]
    fn a_shared_profile_says_whose_it_is() {
        let mut req = request(Expansion::Improve, Guidance::Raw);
        req.profile.shared_from = Some(3);
        req.profile.note = "the profile of node 3: within 1.0%".into();
        let m = user_message(&req);
        assert!(m.contains("(the profile of node 3: within 1.0%)") && m.contains("dram__throughput = 70 %"), "{m}");
        req.profile.shared_from = None;
        assert!(!user_message(&req).contains("the profile of node 3"));
    }
}

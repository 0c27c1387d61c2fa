//! The ptxas `-v` resource report: registers, stack, spills and shared memory per
//! kernel, plus the assembler's warnings (spills, ignored `setmaxnreg`, ...).

use regex::Regex;
use serde::{Deserialize, Serialize};
use std::sync::OnceLock;

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct KernelResources {
    /// Mangled name as ptxas prints it.
    pub name: String,
    pub arch: String,
    pub registers: u32,
    pub barriers: u32,
    pub stack_frame_bytes: u64,
    pub spill_store_bytes: u64,
    pub spill_load_bytes: u64,
    pub shared_bytes: u64,
    pub cumulative_stack_bytes: u64,
    pub constant_bytes: u64,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PtxasReport {
    pub kernels: Vec<KernelResources>,
    pub warnings: Vec<String>,
}

impl PtxasReport {
    pub fn kernel(&self, name: &str) -> Option<&KernelResources> {
        self.kernels.iter().find(|k| k.name == name)
    }
}

struct Patterns {
    compiling: Regex,
    properties: Regex,
    frame: Regex,
    used: Regex,
    smem: Regex,
    cmem: Regex,
    cumulative: Regex,
    barriers: Regex,
}

fn patterns() -> &'static Patterns {
    static P: OnceLock<Patterns> = OnceLock::new();
    P.get_or_init(|| Patterns {
        compiling: Regex::new(r"Compiling entry function '([^']*)' for '([^']*)'").unwrap(),
        properties: Regex::new(r"Function properties for (\S+)").unwrap(),
        frame: Regex::new(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads").unwrap(),
        used: Regex::new(r"Used (\d+) registers").unwrap(),
        smem: Regex::new(r"(\d+) bytes smem").unwrap(),
        cmem: Regex::new(r"(\d+) bytes cmem\[\d+\]").unwrap(),
        cumulative: Regex::new(r"(\d+) bytes cumulative stack size").unwrap(),
        barriers: Regex::new(r"used (\d+) barriers").unwrap(),
    })
}

fn num<T: std::str::FromStr + Default>(c: Option<regex::Match<'_>>) -> T {
    c.and_then(|m| m.as_str().parse().ok()).unwrap_or_default()
}

/// Parses the text ptxas writes with `-v` (through nvcc `-Xptxas -v` too). Lines that
/// are not part of the report are ignored, so a whole build log can be passed.
pub fn parse_ptxas(text: &str) -> PtxasReport {
    let p = patterns();
    let mut report = PtxasReport::default();
    // "Function properties for X" precedes the frame line; it may name a device function
    // rather than the entry being compiled, so frame numbers go to the named function.
    let mut properties_for: Option<String> = None;
    let mut current: Option<usize> = None;
    for line in text.lines() {
        if line.contains("ptxas warning") || line.contains("ptxas error") {
            report.warnings.push(line.trim().to_string());
            continue;
        }
        if let Some(c) = p.compiling.captures(line) {
            report.kernels.push(KernelResources {
                name: c[1].to_string(),
                arch: c[2].to_string(),
                ..Default::default()
            });
            current = Some(report.kernels.len() - 1);
            properties_for = None;
            continue;
        }
        if let Some(c) = p.properties.captures(line) {
            properties_for = Some(c[1].to_string());
            continue;
        }
        if let Some(c) = p.frame.captures(line) {
            let target = match (&properties_for, current) {
                (Some(name), Some(i)) if report.kernels[i].name == *name => Some(i),
                (None, Some(i)) => Some(i),
                _ => None,
            };
            if let Some(i) = target {
                let k = &mut report.kernels[i];
                k.stack_frame_bytes = num(c.get(1));
                k.spill_store_bytes = num(c.get(2));
                k.spill_load_bytes = num(c.get(3));
            }
            continue;
        }
        if let (Some(c), Some(i)) = (p.used.captures(line), current) {
            let k = &mut report.kernels[i];
            k.registers = num(c.get(1));
            k.barriers = num(p.barriers.captures(line).and_then(|c| c.get(1)));
            k.shared_bytes = num(p.smem.captures(line).and_then(|c| c.get(1)));
            k.cumulative_stack_bytes = num(p.cumulative.captures(line).and_then(|c| c.get(1)));
            k.constant_bytes = p.cmem.captures_iter(line).map(|c| num::<u64>(c.get(1))).sum();
        }
    }
    report
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = "\
ptxas info    : 24 bytes gmem
ptxas info    : Compiling entry function 'transpose_padded' for 'sm_90'
ptxas info    : Function properties for transpose_padded
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 14 registers, used 1 barriers, 4224 bytes smem
ptxas info    : Compile time = 1.564 ms
ptxas info    : Function properties for _Z6helperv
    48 bytes stack frame, 8 bytes spill stores, 8 bytes spill loads
ptxas info    : Compiling entry function 'spill_local' for 'sm_90a'
ptxas info    : Function properties for spill_local
    256 bytes stack frame, 12 bytes spill stores, 16 bytes spill loads
ptxas info    : Used 32 registers, used 0 barriers, 256 bytes cumulative stack size, 380 bytes cmem[0]
ptxas warning : Registers are spilled to local memory in function 'spill_local', 12 bytes spill stores, 16 bytes spill loads
";

    #[test]
    fn reads_every_resource_per_kernel() {
        let r = parse_ptxas(SAMPLE);
        assert_eq!(r.kernels.len(), 2);
        let t = r.kernel("transpose_padded").unwrap();
        assert_eq!((t.registers, t.barriers, t.shared_bytes, t.stack_frame_bytes), (14, 1, 4224, 0));
        let s = r.kernel("spill_local").unwrap();
        assert_eq!(s.arch, "sm_90a");
        assert_eq!((s.registers, s.stack_frame_bytes, s.spill_store_bytes, s.spill_load_bytes), (32, 256, 12, 16));
        assert_eq!((s.cumulative_stack_bytes, s.constant_bytes), (256, 380));
        assert_eq!(r.warnings.len(), 1);
        assert!(r.warnings[0].contains("spilled"));
    }

    #[test]
    fn device_function_frames_do_not_leak_into_the_entry() {
        let r = parse_ptxas(SAMPLE);
        assert_eq!(r.kernel("transpose_padded").unwrap().stack_frame_bytes, 0);
    }
}

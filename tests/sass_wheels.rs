//! SASS produced here by the CUDA wheels (CI has no GPU, but it has nvcc, cuobjdump and
//! nvdisasm): the parser reads it, `-lineinfo` lines reach the right source lines, and the
//! probe kernels compile to the same instruction mix as the SASS captured on an H200.

mod common;

use nightshift::toolkit::disasm::disassemble;
use std::process::Command;

fn probe_cubin() -> (tempfile::TempDir, std::path::PathBuf) {
    let tc = common::require_toolchain();
    let dir = tempfile::tempdir().unwrap();
    let src = common::root().join("tests/fixtures/h200/probe_kernels.cu");
    let cubin = dir.path().join("probe.cubin");
    let out = Command::new(&tc.nvcc)
        .args(["-O3", "-arch=sm_90", "-lineinfo", "-cubin", "-o"])
        .arg(&cubin)
        .arg(&src)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    (dir, cubin)
}

#[test]
fn wheel_sass_matches_the_h200_capture_and_carries_lines() {
    let tc = common::require_toolchain();
    let (_dir, cubin) = probe_cubin();
    let d = disassemble(tc.cuobjdump.as_deref().expect("cuobjdump wheel"), tc.nvdisasm.as_deref(), &cubin).unwrap();
    let lines = d.lines.expect("nvdisasm output");

    let ours = sass::analyze_all(&sass::parse(&d.sass));
    let ours_lines = sass::analyze_all(&sass::parse(&lines));
    let fixture = std::fs::read_to_string(common::root().join("tests/fixtures/h200/sass_cubin.txt")).unwrap();
    let captured = sass::analyze_all(&sass::parse(&fixture));
    assert_eq!(ours.len(), 13);
    for c in &captured {
        let mine = ours.iter().find(|r| r.name == c.name).unwrap_or_else(|| panic!("{} missing", c.name));
        assert_eq!(mine.mix, c.mix, "{}: same instruction mix as on the H200", c.name);
        let with_lines = ours_lines.iter().find(|r| r.name == c.name).unwrap();
        assert_eq!(with_lines.mix, c.mix, "{}: nvdisasm and cuobjdump agree", c.name);
        assert!(with_lines.has_line_info, "{}", c.name);
    }

    let by = |n: &str| ours_lines.iter().find(|r| r.name == n).unwrap();
    let fp64 = by("fp64_accident");
    assert!(!fp64.fp64.is_empty());
    for site in &fp64.fp64 {
        assert_eq!(site.line.as_deref(), Some("probe_kernels.cu:49"), "{site:?}");
    }
    assert_eq!(fp64.finding("fp64").unwrap().lines, vec!["probe_kernels.cu:49".to_string()]);

    let spill = by("spill_local");
    let local_lines = &spill.finding("local-memory").unwrap().lines;
    assert!(local_lines.iter().all(|l| l == "probe_kernels.cu:28" || l == "probe_kernels.cu:29"), "{local_lines:?}");

    let scalar = by("copy_scalar");
    assert_eq!(scalar.finding("scalar-global-loads").unwrap().lines, vec!["probe_kernels.cu:13".to_string()]);
}

#[test]
fn the_sass_command_reads_binaries_and_text() {
    let (_dir, cubin) = probe_cubin();
    let cubin = cubin.display().to_string();
    let (code, out, err) = common::run(&["sass", &cubin, "--function", "fp64_accident", "--json"]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let f = &v["functions"][0];
    assert_eq!(f["name"], "fp64_accident");
    assert!(f["classes"]["fp64"].as_u64().unwrap() > 0);
    assert_eq!(f["has_line_info"], true);

    let text = common::path("tests/fixtures/h200/sass_cubin.txt");
    let (code, out, _) = common::run(&["sass", &text]);
    assert_eq!(code, 0);
    assert!(out.contains("copy_vec4") && out.contains("1x128"), "{out}");
    let (code, _, err) = common::run(&["sass", &text, "--function", "nope"]);
    assert_eq!(code, 2);
    assert!(err.contains("functions: tiny_grid"), "{err}");
}

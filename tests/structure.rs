//! The layer order of `src/` (ARCHITECTURE.md's code map): a module may use its own layer and
//! those below it, never one above. Top to bottom:
//!
//! 6. `cli`
//! 5. `optimize`
//! 4. `generate`, `report`
//! 3. `run`, `wall`
//! 2. `toolkit` (finding and running the CUDA tools: the wall builds with it and runs ncu
//!    through it; it never reaches into the wall)
//! 1. `task`, `scaffold`, and the loose leaf modules `stats` (when a speedup is a win: used by
//!    the run's events, the wall and the loop alike) and `hostmem` (huge-page host buffers).
//!
//! Inside the wall, its two rooms never import each other: `wall::judge` (the trusted
//! side) and `wall::worker` (the process that loads a kernel library) share only
//! `wall::protocol` and the layers below both (`gpu`, `sandbox`, ...).
//!
//! `lib.rs` and `main.rs` sit above everything. References are `crate::X` paths in code
//! (comment lines are skipped: a doc link is not a dependency).
use std::path::{Path, PathBuf};

fn layer(module: &str) -> Option<u8> {
    Some(match module {
        "cli" => 6,
        "optimize" => 5,
        "generate" | "report" => 4,
        "run" | "wall" => 3,
        "toolkit" => 2,
        "task" | "scaffold" | "stats" | "hostmem" => 1,
        _ => return None,
    })
}

/// Upward references that stay for now, by file and the module it reaches up to. Any other
/// upward reference fails.
const ALLOWED: &[(&str, &str, &str)] = &[];

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn no_module_uses_a_layer_above_its_own() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    rust_files(&root.join("src"), &mut files);
    files.sort();
    let mut bad = Vec::new();
    let mut every_module_has_a_layer = Vec::new();
    for file in &files {
        let rel = file.strip_prefix(root).unwrap().to_string_lossy().replace('\\', "/");
        let inside = rel.strip_prefix("src/").unwrap();
        let top = inside.split('/').next().unwrap().trim_end_matches(".rs");
        if top == "lib" || top == "main" {
            continue;
        }
        let Some(own) = layer(top) else {
            every_module_has_a_layer.push(rel.clone());
            continue;
        };
        let text = std::fs::read_to_string(file).unwrap();
        for (n, line) in text.lines().enumerate() {
            if line.trim_start().starts_with("//") {
                continue;
            }
            let mut rest = line;
            while let Some(at) = rest.find("crate::") {
                rest = &rest[at + "crate::".len()..];
                let name: String = rest.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
                let Some(theirs) = layer(&name) else { continue };
                if theirs > own && !ALLOWED.iter().any(|(f, m, _)| *f == rel && *m == name) {
                    bad.push(format!("{rel}:{}: `{top}` (layer {own}) uses `crate::{name}` (layer {theirs})", n + 1));
                }
            }
        }
    }
    assert!(
        every_module_has_a_layer.is_empty(),
        "files in no layer (add them to `layer`): {every_module_has_a_layer:?}"
    );
    assert!(bad.is_empty(), "upward imports:\n{}", bad.join("\n"));
}

#[test]
fn every_allowed_upward_import_is_still_there() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    for (file, module, why) in ALLOWED {
        let text = std::fs::read_to_string(root.join(file)).unwrap();
        assert!(
            text.contains(&format!("crate::{module}")),
            "{file} no longer uses {module}: drop it from ALLOWED ({why})"
        );
    }
}

/// The wall's rooms: (folder, the other room it must never name).
const ROOMS: [(&str, &str); 2] = [("src/wall/judge", "wall::worker"), ("src/wall/worker", "wall::judge")];

#[test]
fn the_trusted_and_the_untrusted_side_share_only_the_protocol() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut bad = Vec::new();
    for (room, other) in ROOMS {
        let mut files = Vec::new();
        rust_files(&root.join(room), &mut files);
        assert!(!files.is_empty(), "{room} holds no Rust files");
        for file in files {
            let rel = file.strip_prefix(root).unwrap().to_string_lossy().replace('\\', "/");
            for (n, line) in std::fs::read_to_string(&file).unwrap().lines().enumerate() {
                if !line.trim_start().starts_with("//") && line.contains(other) {
                    bad.push(format!("{rel}:{}: {}", n + 1, line.trim()));
                }
            }
        }
    }
    assert!(bad.is_empty(), "a room of the wall reaches into the other:\n{}", bad.join("\n"));
}

//! Parsing `cuobjdump -sass` and `nvdisasm -c [-g|-gi]` text into functions and
//! instructions.
//!
//! One line-oriented pass handles both dialects: cuobjdump's `Function : NAME` headers
//! and absolute branch targets, nvdisasm's `.text.NAME` sections, `.L_x_N:` labels,
//! back-quoted label targets and `//## File "...", line N` annotations. Anything else
//! (fatbin banners, PTX sections, tool warnings, shell echo) is skipped. The parser
//! never panics: malformed lines are ignored, not trusted.

use serde::{Deserialize, Serialize};
use std::collections::HashMap;

/// A source position; `file` is as the line table spells it (often an absolute path).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct SourceLoc {
    pub file: String,
    pub line: u32,
}

impl SourceLoc {
    /// `kernel.cu:57`, with the directory dropped.
    pub fn short(&self) -> String {
        let name = self.file.rsplit('/').next().unwrap_or(&self.file);
        format!("{name}:{}", self.line)
    }

    /// Toolkit and system headers (CUDA intrinsics, `<cmath>`): attribution skips them to
    /// reach the user's own line.
    pub fn is_toolkit(&self) -> bool {
        let f = &self.file;
        (f.contains("/include/")
            && (f.contains("cuda") || f.contains("nvidia") || f.contains("/crt/") || f.contains("sm_")))
            || f.starts_with("/usr/local/cuda")
            || f.starts_with("/usr/include/")
            || f.contains("/include/c++/")
            || f.contains("/lib/gcc/")
            || f.contains("/nvidia/cu1")
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Instruction {
    pub offset: u32,
    /// `P0`, `!P0`, `UP1`, `!PT`...
    #[serde(skip_serializing_if = "Option::is_none")]
    pub predicate: Option<String>,
    /// The opcode without modifiers: `LDG`.
    pub opcode: String,
    /// `E`, `128`, `CONSTANT`...
    pub modifiers: Vec<String>,
    pub operands: Vec<String>,
    /// Resolved branch or call target (byte offset in the function).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target: Option<u32>,
    /// The user's source line (innermost location outside toolkit headers).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub loc: Option<u32>,
    /// Where that code was inlined into, innermost call site first.
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub inlined_at: Vec<u32>,
}

impl Instruction {
    pub fn has_modifier(&self, m: &str) -> bool {
        self.modifiers.iter().any(|x| x == m)
    }

    /// Whether it is predicated on something other than "always".
    pub fn is_predicated(&self) -> bool {
        matches!(&self.predicate, Some(p) if p != "PT")
    }

    /// `@!PT`: never executes (the compiler's padding and scheduling hints).
    pub fn never_executes(&self) -> bool {
        self.predicate.as_deref() == Some("!PT")
    }

    pub fn full_opcode(&self) -> String {
        if self.modifiers.is_empty() {
            self.opcode.clone()
        } else {
            format!("{}.{}", self.opcode, self.modifiers.join("."))
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Function {
    /// As the tool printed it (mangled for C++ kernels; may be empty).
    pub name: String,
    pub demangled: String,
    /// `sm_90a` when the listing says.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub arch: Option<String>,
    pub instructions: Vec<Instruction>,
    /// Interned source locations referenced by `Instruction::loc` and `inlined_at`.
    pub locations: Vec<SourceLoc>,
}

impl Function {
    pub fn loc(&self, i: &Instruction) -> Option<&SourceLoc> {
        i.loc.and_then(|k| self.locations.get(k as usize))
    }

    pub fn has_line_info(&self) -> bool {
        self.instructions.iter().any(|i| i.loc.is_some())
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Listing {
    pub functions: Vec<Function>,
}

impl Listing {
    pub fn function(&self, name: &str) -> Option<&Function> {
        self.functions.iter().find(|f| f.name == name || f.demangled == name || crate::short_name(&f.name) == name)
    }
}

struct Builder {
    listing: Listing,
    current: Option<Function>,
    arch: Option<String>,
    /// Label name -> offset, for the current function (nvdisasm).
    labels: HashMap<String, u32>,
    pending_labels: Vec<String>,
    /// Branches whose target is a label defined later.
    unresolved: Vec<(usize, String)>,
    /// The `//##` group being read: innermost first.
    loc_group: Vec<SourceLoc>,
    group_open: bool,
    /// The group in force for following instructions.
    active: Option<(Option<u32>, Vec<u32>)>,
    interned: HashMap<SourceLoc, u32>,
    /// The last user (non-toolkit) location of the current function.
    last_user: Option<u32>,
}

impl Builder {
    fn new() -> Builder {
        Builder {
            listing: Listing::default(),
            current: None,
            arch: None,
            labels: HashMap::new(),
            pending_labels: Vec::new(),
            unresolved: Vec::new(),
            loc_group: Vec::new(),
            group_open: false,
            active: None,
            interned: HashMap::new(),
            last_user: None,
        }
    }

    fn finish_function(&mut self) {
        if let Some(mut f) = self.current.take() {
            for (idx, label) in self.unresolved.drain(..) {
                if let Some(off) = self.labels.get(&label) {
                    if let Some(ins) = f.instructions.get_mut(idx) {
                        ins.target = Some(*off);
                    }
                }
            }
            self.listing.functions.push(f);
        }
        self.labels.clear();
        self.pending_labels.clear();
        self.unresolved.clear();
        self.loc_group.clear();
        self.group_open = false;
        self.active = None;
        self.interned.clear();
    }

    fn start_function(&mut self, name: &str) {
        self.finish_function();
        self.last_user = None;
        self.current = Some(Function {
            name: name.to_string(),
            demangled: crate::demangle(name),
            arch: self.arch.clone(),
            instructions: Vec::new(),
            locations: Vec::new(),
        });
    }

    fn intern(&mut self, loc: SourceLoc) -> u32 {
        let f = self.current.as_mut().expect("only called inside a function");
        *self.interned.entry(loc.clone()).or_insert_with(|| {
            f.locations.push(loc);
            (f.locations.len() - 1) as u32
        })
    }

    /// Closes a `//##` group: the innermost non-toolkit location is the instruction's line,
    /// the locations after it are the call sites it was inlined into.
    fn close_group(&mut self) {
        if !self.group_open {
            return;
        }
        self.group_open = false;
        let group = std::mem::take(&mut self.loc_group);
        if self.current.is_none() || group.is_empty() {
            return;
        }
        let Some(user) = group.iter().position(|l| !l.is_toolkit()) else {
            // Toolkit code with no inline chain (nvdisasm without -gi): the user line that
            // came just before it is the best guess at its call site.
            let loc = match self.last_user {
                Some(u) => u,
                None => self.intern(group[0].clone()),
            };
            self.active = Some((Some(loc), Vec::new()));
            return;
        };
        let loc = self.intern(group[user].clone());
        self.last_user = Some(loc);
        let chain: Vec<u32> = group[user + 1..].iter().map(|l| self.intern(l.clone())).collect();
        self.active = Some((Some(loc), chain));
    }
}

/// Parses SASS text from cuobjdump or nvdisasm.
pub fn parse(text: &str) -> Listing {
    let mut b = Builder::new();
    for raw in text.lines() {
        let line = raw.trim();
        if line.is_empty() {
            continue;
        }
        if let Some(rest) = line.strip_prefix("//##") {
            if !b.group_open {
                b.group_open = true;
                b.loc_group.clear();
            }
            if let Some(loc) = parse_line_info(rest) {
                b.loc_group.push(loc);
            }
            continue;
        }
        b.close_group();
        if line.starts_with("/*") && line.as_bytes().get(2).is_some_and(|c| c.is_ascii_hexdigit()) {
            if b.current.is_none() {
                // Instructions before any header (a truncated listing): keep them anyway.
                b.start_function("");
            }
            if let Some((mut ins, label_target)) = parse_instruction(line) {
                // Offsets only grow within a function: a restart is a function whose header
                // the listing lacks (a truncated dump, a headerless nvdisasm excerpt).
                let restarted = b
                    .current
                    .as_ref()
                    .and_then(|f| f.instructions.last())
                    .is_some_and(|last| ins.offset <= last.offset);
                if restarted {
                    b.start_function("");
                }
                if let Some((loc, chain)) = &b.active {
                    ins.loc = *loc;
                    ins.inlined_at = chain.clone();
                }
                let f = b.current.as_mut().expect("started above");
                for l in b.pending_labels.drain(..) {
                    b.labels.insert(l, ins.offset);
                }
                if let Some(label) = label_target {
                    match b.labels.get(&label) {
                        Some(off) => ins.target = Some(*off),
                        None => b.unresolved.push((f.instructions.len(), label)),
                    }
                }
                f.instructions.push(ins);
            }
            continue;
        }
        if let Some(rest) = line.strip_prefix("Function :") {
            b.start_function(rest.trim());
            continue;
        }
        if let Some(rest) = line.strip_prefix("//---------------------") {
            let section = rest.trim().trim_end_matches('-').trim();
            if let Some(name) = section.strip_prefix(".text.") {
                b.start_function(name);
            } else {
                // Another section (.nv.shared, SYMBOLS): no more instructions of this function.
                b.finish_function();
            }
            continue;
        }
        if line.starts_with("Fatbin ") || line.starts_with("code for ") {
            // A new fatbin block: whatever came before is complete.
            b.finish_function();
            continue;
        }
        if let Some(rest) = line.strip_prefix("arch = ") {
            b.arch = Some(rest.trim().to_string());
            continue;
        }
        if let Some(rest) = line.strip_prefix(".target") {
            let arch = rest.trim();
            if !arch.is_empty() {
                if b.current.as_ref().is_some_and(|f| !f.instructions.is_empty()) {
                    b.finish_function();
                }
                b.arch = Some(arch.to_string());
                if let Some(f) = b.current.as_mut() {
                    f.arch = Some(arch.to_string());
                }
            }
            continue;
        }
        if b.current.is_some() {
            if let Some(label) = line.strip_suffix(':') {
                if !label.is_empty() && !label.contains(char::is_whitespace) {
                    b.pending_labels.push(label.to_string());
                }
            }
        }
    }
    b.close_group();
    b.finish_function();
    b.listing
}

/// `File "/path/k.cu", line 12 inlined at ...` -> the first location.
fn parse_line_info(rest: &str) -> Option<SourceLoc> {
    let rest = rest.trim().strip_prefix("File")?.trim_start();
    let rest = rest.strip_prefix('"')?;
    let end = rest.find('"')?;
    let file = &rest[..end];
    let after = rest[end + 1..].trim_start().strip_prefix(',')?.trim_start().strip_prefix("line")?.trim_start();
    let digits: String = after.chars().take_while(|c| c.is_ascii_digit()).collect();
    Some(SourceLoc { file: file.to_string(), line: digits.parse().ok()? })
}

/// Parses `/*00b0*/ @!P0 LDG.E.128 R4, desc[UR4][R2.64] ; /* 0x... */`. Returns the
/// instruction and, for a branch to a label, the label name.
fn parse_instruction(line: &str) -> Option<(Instruction, Option<String>)> {
    let body = line.strip_prefix("/*")?;
    let close = body.find("*/")?;
    let offset = u32::from_str_radix(body[..close].trim(), 16).ok()?;
    let mut rest = body[close + 2..].trim_start();
    // Drop the trailing encoding comment and the terminating semicolon.
    if let Some(semi) = rest.find(';') {
        rest = &rest[..semi];
    } else if let Some(c) = rest.find("/*") {
        rest = &rest[..c];
    }
    let rest = rest.trim();
    let (predicate, rest) = match rest.strip_prefix('@') {
        Some(p) => {
            let end = p.find(char::is_whitespace).unwrap_or(p.len());
            (Some(p[..end].to_string()), p[end..].trim_start())
        }
        None => (None, rest),
    };
    let end = rest.find(char::is_whitespace).unwrap_or(rest.len());
    let full = &rest[..end];
    if full.is_empty() || !full.as_bytes()[0].is_ascii_alphabetic() {
        return None;
    }
    let mut parts = full.split('.');
    let opcode = parts.next().unwrap_or_default().to_string();
    let modifiers: Vec<String> = parts.filter(|m| !m.is_empty()).map(str::to_string).collect();
    let operands = split_operands(rest[end..].trim());
    let mut label = None;
    let mut target = None;
    if matches!(
        opcode.as_str(),
        "BRA" | "JMP" | "CALL" | "BRX" | "JMX" | "BSSY" | "BREAK" | "BPT" | "SSY" | "PBK" | "CAL" | "JCAL"
    ) {
        for op in operands.iter().rev() {
            if let Some(l) = op.strip_prefix("`(").and_then(|s| s.strip_suffix(')')) {
                label = Some(l.to_string());
                break;
            }
            if let Some(hex) = op.strip_prefix("0x") {
                if let Ok(v) = u32::from_str_radix(hex, 16) {
                    target = Some(v);
                    break;
                }
            }
        }
    }
    Some((
        Instruction { offset, predicate, opcode, modifiers, operands, target, loc: None, inlined_at: Vec::new() },
        label,
    ))
}

/// Splits operands at commas outside brackets and braces.
fn split_operands(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut depth = 0i32;
    let mut start = 0;
    for (i, c) in s.char_indices() {
        match c {
            '[' | '{' | '(' => depth += 1,
            ']' | '}' | ')' => depth -= 1,
            ',' if depth <= 0 => {
                let op = s[start..i].trim();
                if !op.is_empty() {
                    out.push(op.to_string());
                }
                start = i + 1;
            }
            _ => {}
        }
    }
    let last = s[start..].trim();
    if !last.is_empty() {
        out.push(last.to_string());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cuobjdump_instruction_with_encoding_comment() {
        let (i, label) = parse_instruction(
            "/*00b0*/              @!P0 LDG.E.128.CONSTANT R4, desc[UR4][R2.64+0x10] ;   /* 0x0000000404057981 */",
        )
        .unwrap();
        assert_eq!(i.offset, 0xb0);
        assert_eq!(i.predicate.as_deref(), Some("!P0"));
        assert_eq!(i.opcode, "LDG");
        assert_eq!(i.modifiers, vec!["E", "128", "CONSTANT"]);
        assert_eq!(i.operands, vec!["R4", "desc[UR4][R2.64+0x10]"]);
        assert_eq!(label, None);
    }

    #[test]
    fn branch_targets_in_both_dialects() {
        let (i, _) = parse_instruction("/*1110*/ @P0 BRA 0xe0 ;").unwrap();
        assert_eq!(i.target, Some(0xe0));
        let (i, label) = parse_instruction("/*1110*/ @P0 BRA `(.L_x_0) ;").unwrap();
        assert_eq!((i.target, label.as_deref()), (None, Some(".L_x_0")));
        let (i, _) = parse_instruction("/*0020*/ BSSY B0, 0x200 ;").unwrap();
        assert_eq!(i.target, Some(0x200));
    }

    #[test]
    fn line_info_with_inlining() {
        let l = parse_line_info(r#" File "/a/b/fast.cu", line 12 inlined at "/a/b/fast.cu", line 25"#).unwrap();
        assert_eq!(l, SourceLoc { file: "/a/b/fast.cu".into(), line: 12 });
        assert_eq!(l.short(), "fast.cu:12");
        assert!(SourceLoc { file: "/usr/local/cuda/include/sm_30_intrinsics.hpp".into(), line: 1 }.is_toolkit());
        assert!(SourceLoc { file: "/usr/include/c++/12/cmath".into(), line: 426 }.is_toolkit());
        assert!(!l.is_toolkit());
    }

    #[test]
    fn nvdisasm_labels_resolve_forward_and_backward() {
        let text = r#"
//--------------------- .text.k           --------------------------
k:
.text.k:
	//## File "/w/k.cu", line 3
        /*0000*/                   MOV R2, RZ ;
.L_x_0:
	//## File "/usr/local/cuda/include/sm_30_intrinsics.hpp", line 449 inlined at "/w/k.cu", line 12
	//## File "/w/k.cu", line 12 inlined at "/w/k.cu", line 40
	//## File "/w/k.cu", line 40
        /*0010*/                   IADD3 R2, R2, 0x1, RZ ;
        /*0020*/               @P0 BRA `(.L_x_0) ;
        /*0030*/                   BRA `(.L_x_1) ;
.L_x_1:
        /*0040*/                   EXIT ;
//--------------------- SYMBOLS --------------------------
"#;
        let l = parse(text);
        assert_eq!(l.functions.len(), 1);
        let f = &l.functions[0];
        assert_eq!(f.instructions.len(), 5);
        assert_eq!(f.instructions[2].target, Some(0x10));
        assert_eq!(f.instructions[3].target, Some(0x40));
        assert_eq!(f.loc(&f.instructions[0]).unwrap().line, 3);
        let i = &f.instructions[1];
        assert_eq!(f.loc(i).unwrap().short(), "k.cu:12", "the toolkit frame is skipped");
        let chain: Vec<u32> = i.inlined_at.iter().map(|k| f.locations[*k as usize].line).collect();
        assert_eq!(chain, vec![40]);
    }

    #[test]
    fn empty_names_and_blocks_without_functions() {
        let text = "\nFatbin elf code:\n================\narch = sm_90\n\n\tcode for sm_90\n\t.target\tsm_90\n\n\t\tFunction : \n\t.headerflags\t@\"EF\"\n        /*0000*/                   EXIT ;\n";
        let l = parse(text);
        assert_eq!(l.functions.len(), 1);
        assert_eq!(l.functions[0].name, "");
        assert_eq!(l.functions[0].arch.as_deref(), Some("sm_90"));
    }
}

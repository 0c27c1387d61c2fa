//! Reading a model's reply tolerantly: one fenced code block holding the whole `.cu` file
//! (any of ```cuda, ```cpp, ```c++, ```cu or a bare fence; the block that defines the entry
//! wins when there are several), plus a `Technique: tag` line and optionally an
//! `Addresses: diagnosis-id` line outside the code. An unterminated fence, or a reply the
//! server cut at its token limit, is a truncated reply, not a kernel.

use crate::run::failure::NodeFailure;
use regex::Regex;
use std::sync::LazyLock;

#[derive(Debug, Clone, PartialEq)]
pub struct ParsedReply {
    pub code: String,
    pub technique: String,
    pub tool: Option<String>,
}

/// Why a reply holds no usable kernel: a failure class and a message.
#[derive(Debug, Clone, PartialEq)]
pub struct ReplyProblem {
    pub class: NodeFailure,
    pub message: String,
}

struct Block {
    lang: String,
    body: String,
    closed: bool,
}

fn blocks(text: &str) -> (Vec<Block>, String) {
    let mut out = Vec::new();
    let mut prose = String::new();
    let mut current: Option<Block> = None;
    for line in text.lines() {
        let t = line.trim_start();
        if let Some(rest) = t.strip_prefix("```") {
            match current.take() {
                Some(mut b) => {
                    b.closed = true;
                    out.push(b);
                }
                None => {
                    current = Some(Block { lang: rest.trim().to_ascii_lowercase(), body: String::new(), closed: false })
                }
            }
            continue;
        }
        match current.as_mut() {
            Some(b) => {
                b.body.push_str(line);
                b.body.push('\n');
            }
            None => {
                prose.push_str(line);
                prose.push('\n');
            }
        }
    }
    if let Some(b) = current {
        out.push(b);
    }
    (out, prose)
}

static TECHNIQUE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?im)^[\s>*_#-]*technique[\s*_]*[:=]\s*(.+?)\s*$").unwrap());
static TOOL: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?im)^[\s>*_#-]*(?:addresses|diagnosis|tool)[\s*_]*[:=]\s*`?([a-z0-9-]+)`?").unwrap()
});

/// `Vectorize loads (float4)` -> `vectorize-loads-float4`, at most 48 characters.
pub fn tag(s: &str) -> String {
    let mut out = String::new();
    for c in s.chars() {
        if c.is_ascii_alphanumeric() {
            out.push(c.to_ascii_lowercase());
        } else if !out.ends_with('-') && !out.is_empty() {
            out.push('-');
        }
        if out.len() >= 48 {
            break;
        }
    }
    out.trim_end_matches('-').to_string()
}

fn is_code_lang(lang: &str) -> bool {
    matches!(
        lang.split_whitespace().next().unwrap_or(""),
        "" | "cuda" | "cu" | "cpp" | "c++" | "c" | "cc" | "cxx" | "h"
    )
}

/// Parses `text`; `cut_at_limit` is true when the server says it stopped at max tokens.
pub fn parse(text: &str, entry: &str, cut_at_limit: bool) -> Result<ParsedReply, ReplyProblem> {
    let (blocks, prose) = blocks(text);
    let defines_entry = |b: &Block| b.body.contains(entry) && b.body.contains("extern");
    let code_blocks: Vec<&Block> = blocks.iter().filter(|b| is_code_lang(&b.lang)).collect();
    let chosen = code_blocks
        .iter()
        .filter(|b| defines_entry(b))
        .max_by_key(|b| b.body.len())
        .or_else(|| code_blocks.iter().max_by_key(|b| b.body.len()))
        .copied();
    let technique = TECHNIQUE.captures(&prose).map(|c| tag(&c[1])).filter(|t| !t.is_empty());
    let tool = TOOL.captures(&prose).map(|c| c[1].to_string());
    let Some(block) = chosen else {
        if cut_at_limit {
            return Err(ReplyProblem {
                class: NodeFailure::TruncatedReply,
                message: "the reply was cut at the token limit before any code block".into(),
            });
        }
        return Err(ReplyProblem {
            class: NodeFailure::NoCode,
            message: format!("the reply has no fenced code block ({} characters of prose)", text.chars().count()),
        });
    };
    // A closed block is whole even when the server stopped later, in the prose.
    if !block.closed {
        return Err(ReplyProblem {
            class: NodeFailure::TruncatedReply,
            message: format!(
                "the code block is never closed{}: {} lines arrived (raise --max-reply-tokens, or ask for shorter code)",
                if cut_at_limit { " (the server stopped at its token limit)" } else { "" },
                block.body.lines().count()
            ),
        });
    }
    if !block.body.contains(entry) {
        return Err(ReplyProblem {
            class: NodeFailure::NoCode,
            message: format!("the code block does not define the entry `{entry}`"),
        });
    }
    Ok(ParsedReply { code: block.body.clone(), technique: technique.unwrap_or_else(|| "unspecified".into()), tool })
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = "Here is a faster version.\n\n```cuda\n#include <cuda_runtime.h>\nextern \"C\" void softmax(const float* x, float* y, int r, int c, cudaStream_t s) {}\n```\n\n**Technique:** Vectorize loads (float4)\nAddresses: `scalar-global-access`\n";

    #[test]
    fn a_good_reply_gives_code_technique_and_tool() {
        let r = parse(GOOD, "softmax", false).unwrap();
        assert!(r.code.starts_with("#include"));
        assert!(r.code.contains("extern \"C\" void softmax"));
        assert_eq!(r.technique, "vectorize-loads-float4");
        assert_eq!(r.tool.as_deref(), Some("scalar-global-access"));
    }

    #[test]
    fn the_block_defining_the_entry_wins() {
        let text = "```bash\nnvcc x.cu\n```\n```cpp\n__device__ int helper();\n```\n```\nextern \"C\" void softmax() {}\n```\nTechnique: two-pass";
        let r = parse(text, "softmax", false).unwrap();
        assert_eq!(r.code.trim(), "extern \"C\" void softmax() {}");
        assert_eq!(r.technique, "two-pass");
    }

    #[test]
    fn no_code_truncation_and_missing_entry_are_classified() {
        assert_eq!(parse("I cannot help with that.", "softmax", false).unwrap_err().class, NodeFailure::NoCode);
        let cut = "```cuda\nextern \"C\" void softmax(const float* x) {\n  for (int i = 0;";
        let e = parse(cut, "softmax", false).unwrap_err();
        assert_eq!(e.class, NodeFailure::TruncatedReply);
        assert!(e.message.contains("never closed"), "{}", e.message);
        assert!(
            parse("```cuda\nextern \"C\" void softmax() {}\n```\nTechn", "softmax", true).is_ok(),
            "the code itself is whole"
        );
        assert_eq!(parse("Let me think step by step", "softmax", true).unwrap_err().class, NodeFailure::TruncatedReply);
        assert_eq!(
            parse("```cuda\n__global__ void k() {}\n```", "softmax", false).unwrap_err().class,
            NodeFailure::NoCode
        );
        assert_eq!(
            parse("```cuda\nextern \"C\" void softmax() {}\n```", "softmax", false).unwrap().technique,
            "unspecified"
        );
    }

    #[test]
    fn tags_are_short_kebab_case() {
        assert_eq!(tag("  Warp-per-row reduction + float4!!"), "warp-per-row-reduction-float4");
        assert!(tag(&"x".repeat(200)).len() <= 48);
    }
}

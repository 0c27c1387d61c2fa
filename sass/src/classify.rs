//! What each SASS instruction is, in the terms a performance engineer counts: which
//! pipe or memory space it uses, and how wide its memory accesses are.

use crate::parse::Instruction;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Class {
    Fp32,
    Fp16,
    Fp64,
    Int,
    Conversion,
    Mufu,
    GlobalLoad,
    GlobalStore,
    SharedLoad,
    SharedStore,
    LocalLoad,
    LocalStore,
    ConstantLoad,
    Tensor,
    AsyncCopy,
    Barrier,
    Shuffle,
    Atomic,
    WarpVote,
    Control,
    Move,
    Other,
}

impl Class {
    pub const ALL: [Class; 22] = [
        Class::Fp32,
        Class::Fp16,
        Class::Fp64,
        Class::Int,
        Class::Conversion,
        Class::Mufu,
        Class::GlobalLoad,
        Class::GlobalStore,
        Class::SharedLoad,
        Class::SharedStore,
        Class::LocalLoad,
        Class::LocalStore,
        Class::ConstantLoad,
        Class::Tensor,
        Class::AsyncCopy,
        Class::Barrier,
        Class::Shuffle,
        Class::Atomic,
        Class::WarpVote,
        Class::Control,
        Class::Move,
        Class::Other,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Class::Fp32 => "fp32",
            Class::Fp16 => "fp16",
            Class::Fp64 => "fp64",
            Class::Int => "int",
            Class::Conversion => "conversion",
            Class::Mufu => "mufu",
            Class::GlobalLoad => "global_load",
            Class::GlobalStore => "global_store",
            Class::SharedLoad => "shared_load",
            Class::SharedStore => "shared_store",
            Class::LocalLoad => "local_load",
            Class::LocalStore => "local_store",
            Class::ConstantLoad => "constant_load",
            Class::Tensor => "tensor",
            Class::AsyncCopy => "async_copy",
            Class::Barrier => "barrier",
            Class::Shuffle => "shuffle",
            Class::Atomic => "atomic",
            Class::WarpVote => "warp_vote",
            Class::Control => "control",
            Class::Move => "move",
            Class::Other => "other",
        }
    }
}

/// The class of one instruction.
pub fn classify(i: &Instruction) -> Class {
    let op = i.opcode.as_str();
    match op {
        "FADD" | "FMUL" | "FFMA" | "FMNMX" | "FSETP" | "FSEL" | "FSET" | "FCHK" | "FSWZADD" | "FADD32I" | "FMUL32I"
        | "FFMA32I" | "FCMP" => Class::Fp32,
        // HFMA2.MMA with zero operands is the compiler's way to load a constant.
        "HFMA2" if i.has_modifier("MMA") => Class::Move,
        "HADD2" | "HMUL2" | "HFMA2" | "HMNMX2" | "HSETP2" | "HSET2" | "HADD2_F32" | "HFMA2_MMA" => Class::Fp16,
        "DADD" | "DMUL" | "DFMA" | "DSETP" | "DMNMX" | "DSET" => Class::Fp64,
        "F2F" | "F2I" | "I2F" | "I2FP" | "F2FP" | "I2I" | "FRND" | "F2IP" | "I2IP" => Class::Conversion,
        "MUFU" => Class::Mufu,
        "LDG" | "LD" => Class::GlobalLoad,
        "STG" | "ST" => Class::GlobalStore,
        "LDS" | "LDSM" => Class::SharedLoad,
        "STS" | "STSM" => Class::SharedStore,
        "LDL" => Class::LocalLoad,
        "STL" => Class::LocalStore,
        "LDC" | "ULDC" => Class::ConstantLoad,
        "HMMA" | "HGMMA" | "QGMMA" | "IMMA" | "IGMMA" | "DMMA" | "BMMA" | "BGMMA" | "WARPGROUP" | "UTCHMMA"
        | "UTCQMMA" | "UTCIMMA" | "UTCMMA" => Class::Tensor,
        "LDGSTS" | "LDGDEPBAR" | "DEPBAR" | "UBLKCP" | "UBLKRED" | "UBLKPF" | "UTMALDG" | "UTMASTG" | "UTMAPF"
        | "UTMARED" | "UTMACCTL" | "UTMACMDFLUSH" => Class::AsyncCopy,
        "BAR" | "BARRIER" | "SYNCS" | "MEMBAR" | "FENCE" | "ERRBAR" | "CCTL" | "CCTLL" | "ARRIVES" => Class::Barrier,
        "SHFL" => Class::Shuffle,
        "ATOM" | "ATOMG" | "ATOMS" | "RED" | "REDG" | "REDAS" => Class::Atomic,
        "VOTE" | "VOTEU" | "MATCH" | "REDUX" | "ELECT" => Class::WarpVote,
        "BRA" | "BRX" | "JMP" | "JMX" | "CALL" | "RET" | "EXIT" | "BSSY" | "BSYNC" | "WARPSYNC" | "BPT" | "KILL"
        | "NANOSLEEP" | "YIELD" | "BMOV" | "RPCMOV" | "BREAK" | "ACQBULK" | "ENDCOLLECTIVE" => Class::Control,
        "MOV" | "MOV32I" | "UMOV" | "S2R" | "S2UR" | "CS2R" | "R2P" | "P2R" | "R2UR" | "UR2UP" | "UP2UR" | "MOVM"
        | "PRMT" | "UPRMT" => Class::Move,
        "NOP" => Class::Other,
        _ if op.starts_with('I')
            || op.starts_with("UI")
            || op.starts_with("LOP")
            || op.starts_with("ULOP")
            || op.starts_with("SH")
            || op.starts_with("USH")
            || op.starts_with("LEA")
            || op.starts_with("ULEA")
            || op.starts_with("VI")
            || op.starts_with("PLOP")
            || op.starts_with("UPLOP") =>
        {
            Class::Int
        }
        "SEL" | "USEL" | "POPC" | "UPOPC" | "FLO" | "UFLO" | "BREV" | "UBREV" | "BMSK" | "UBMSK" | "SGXT" | "USGXT"
        | "ISETP" | "UISETP" | "VABSDIFF" | "VABSDIFF4" => Class::Int,
        _ => Class::Other,
    }
}

/// Width in bits of a memory access (loads, stores, atomics), from its modifiers.
pub fn access_bits(i: &Instruction) -> Option<u32> {
    let memory = matches!(
        i.opcode.as_str(),
        "LDG"
            | "STG"
            | "LD"
            | "ST"
            | "LDS"
            | "STS"
            | "LDL"
            | "STL"
            | "ATOM"
            | "ATOMG"
            | "ATOMS"
            | "RED"
            | "REDG"
            | "LDGSTS"
    );
    if !memory {
        return None;
    }
    let mut bits = 32;
    for m in &i.modifiers {
        bits = match m.as_str() {
            "U8" | "S8" => 8,
            "U16" | "S16" => 16,
            "64" | "F64" | "U64" | "S64" => 64,
            "128" => 128,
            "BYPASS" if i.opcode == "LDGSTS" => bits,
            _ => continue,
        };
    }
    // LDGSTS copies 4, 8 or 16 bytes: its width modifier is the same vocabulary.
    Some(bits)
}

/// Whether an fp64 pipe instruction, or a conversion to or from fp64.
pub fn touches_fp64(i: &Instruction) -> bool {
    match classify(i) {
        Class::Fp64 => true,
        Class::Conversion => i.modifiers.iter().any(|m| m == "F64"),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ins(full: &str) -> Instruction {
        let mut parts = full.split('.');
        Instruction {
            offset: 0,
            predicate: None,
            opcode: parts.next().unwrap().to_string(),
            modifiers: parts.map(str::to_string).collect(),
            operands: vec![],
            target: None,
            loc: None,
            inlined_at: vec![],
        }
    }

    #[test]
    fn classes_of_common_opcodes() {
        let cases = [
            ("FFMA", Class::Fp32),
            ("HFMA2.MMA", Class::Move),
            ("HFMA2", Class::Fp16),
            ("DFMA", Class::Fp64),
            ("F2F.F64.F32", Class::Conversion),
            ("MUFU.EX2", Class::Mufu),
            ("LDG.E.128", Class::GlobalLoad),
            ("STG.E", Class::GlobalStore),
            ("LDS.U.128", Class::SharedLoad),
            ("LDL.LU", Class::LocalLoad),
            ("STL", Class::LocalStore),
            ("HMMA.16816.F32", Class::Tensor),
            ("HGMMA.64x128x16.F32.BF16", Class::Tensor),
            ("QGMMA.64x256x32.F32.E4M3.E4M3", Class::Tensor),
            ("LDGSTS.E.BYPASS.128", Class::AsyncCopy),
            ("UBLKCP.S.G", Class::AsyncCopy),
            ("UTMALDG.2D", Class::AsyncCopy),
            ("BAR.SYNC.DEFER_BLOCKING", Class::Barrier),
            ("SYNCS.ARRIVE.TRANS64.A1T0", Class::Barrier),
            ("SHFL.BFLY", Class::Shuffle),
            ("REDG.E.ADD.STRONG.GPU", Class::Atomic),
            ("ATOMG.E.CAS.STRONG.GPU", Class::Atomic),
            ("REDUX.SUM", Class::WarpVote),
            ("BRA", Class::Control),
            ("IMAD.WIDE", Class::Int),
            ("LOP3.LUT", Class::Int),
            ("ISETP.GE.AND", Class::Int),
            ("S2R", Class::Move),
            ("ULDC.64", Class::ConstantLoad),
        ];
        for (op, class) in cases {
            assert_eq!(classify(&ins(op)), class, "{op}");
        }
    }

    #[test]
    fn access_widths() {
        assert_eq!(access_bits(&ins("LDG.E")), Some(32));
        assert_eq!(access_bits(&ins("LDG.E.128.CONSTANT")), Some(128));
        assert_eq!(access_bits(&ins("STG.E.64")), Some(64));
        assert_eq!(access_bits(&ins("LDG.E.U8")), Some(8));
        assert_eq!(access_bits(&ins("LDS.U16")), Some(16));
        assert_eq!(access_bits(&ins("FFMA")), None);
    }

    #[test]
    fn fp64_conversions_count_as_fp64() {
        assert!(touches_fp64(&ins("F2F.F64.F32")));
        assert!(touches_fp64(&ins("F2F.F32.F64")));
        assert!(touches_fp64(&ins("DMUL")));
        assert!(!touches_fp64(&ins("F2F.F16.F32")));
    }
}

//! The diagnosis tools' names: one variant per entry of [`crate::tools::ALL`], written
//! (JSON, reports, the generator's guidance) as the kebab-case id the tool has always had.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

macro_rules! tool_ids {
    ($($variant:ident => $id:literal,)*) => {
        /// A diagnosis tool, by its stable id.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        pub enum ToolId {
            $(#[serde(rename = $id)] $variant,)*
        }

        impl ToolId {
            /// Every id, in declaration order.
            pub const ALL: &'static [ToolId] = &[$(ToolId::$variant,)*];

            pub fn as_str(self) -> &'static str {
                match self {
                    $(ToolId::$variant => $id,)*
                }
            }
        }
    };
}

tool_ids! {
    RegisterTiling => "register-tiling",
    NoTensorCores => "no-tensor-cores",
    LocalMemory => "local-memory",
    UncoalescedGlobal => "uncoalesced-global",
    DependentLoads => "dependent-loads",
    NarrowGlobalAccess => "narrow-global-access",
    SharedBankConflicts => "shared-bank-conflicts",
    SharedMemoryBound => "shared-memory-bound",
    AtomicContention => "atomic-contention",
    Fp64InFp32 => "fp64-in-fp32",
    UnderFilledGrid => "under-filled-grid",
    WarpDivergence => "warp-divergence",
    ScalarGlobalAccess => "scalar-global-access",
    RedundantDramTraffic => "redundant-dram-traffic",
    RedundantL2Traffic => "redundant-l2-traffic",
    RegisterPressure => "register-pressure",
    LowOccupancy => "low-occupancy",
    AccurateMath => "accurate-math",
    SpecialFunctionBound => "special-function-bound",
    BarrierStalls => "barrier-stalls",
    MemoryLatencyBound => "memory-latency-bound",
    AsyncCopyOpportunity => "async-copy-opportunity",
    IntegerOverhead => "integer-overhead",
    ConversionOverhead => "conversion-overhead",
    LaunchOverhead => "launch-overhead",
    AtRoofline => "at-roofline",
    Roofline => "roofline",
}

impl fmt::Display for ToolId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.as_str())
    }
}

/// A name that is no tool's id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownTool(pub String);

impl fmt::Display for UnknownTool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "no diagnosis tool is named '{}'", self.0)
    }
}

impl std::error::Error for UnknownTool {}

impl FromStr for ToolId {
    type Err = UnknownTool;

    fn from_str(s: &str) -> Result<ToolId, UnknownTool> {
        ToolId::ALL.iter().copied().find(|t| t.as_str() == s).ok_or_else(|| UnknownTool(s.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_display_and_parse_agree_on_every_id() {
        for &t in ToolId::ALL {
            assert_eq!(serde_json::to_string(&t).unwrap(), format!("\"{t}\""));
            assert_eq!(serde_json::from_str::<ToolId>(&format!("\"{t}\"")).unwrap(), t);
            assert_eq!(t.as_str().parse::<ToolId>(), Ok(t));
        }
        assert!("no-such-tool".parse::<ToolId>().is_err());
    }

    #[test]
    fn the_tool_table_has_every_id_once_in_order() {
        let table: Vec<ToolId> = crate::tools::ALL.iter().map(|t| t.id).collect();
        assert_eq!(table, ToolId::ALL);
    }
}

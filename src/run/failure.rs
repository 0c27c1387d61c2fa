//! Why a node has no passing kernel, as the run directory stores it: the wall's class for a
//! kernel that was judged, or a failure where no kernel exists to judge (the generator's
//! reply, the endpoint, nightshift itself). Stored as its name, as before the type existed;
//! a name this version does not know (a run directory from another version) is kept as
//! it was written.

use crate::wall::protocol::FailureClass;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum NodeFailure {
    /// The wall judged a kernel and rejected it.
    Kernel(FailureClass),
    /// The reply held no kernel.
    NoCode,
    /// The reply was cut off before its kernel ended.
    TruncatedReply,
    /// The endpoint failed (a 5xx, a reply without choices, a request that could not be built).
    ApiError,
    ApiTimeout,
    /// Authentication or a wrong model: a configuration problem no retry fixes.
    ApiRefused,
    /// Not the candidate's doing: a worker bug, a GPU error outside its code.
    Internal,
    /// A name written by another version.
    Other(String),
}

impl NodeFailure {
    pub fn name(&self) -> &str {
        match self {
            NodeFailure::Kernel(c) => c.name(),
            NodeFailure::NoCode => "no-code",
            NodeFailure::TruncatedReply => "truncated-reply",
            NodeFailure::ApiError => "api-error",
            NodeFailure::ApiTimeout => "api-timeout",
            NodeFailure::ApiRefused => "api-refused",
            NodeFailure::Internal => "internal-error",
            NodeFailure::Other(s) => s,
        }
    }

    /// Every failure that has no kernel behind it.
    const WITHOUT_KERNEL: [NodeFailure; 6] = [
        NodeFailure::NoCode,
        NodeFailure::TruncatedReply,
        NodeFailure::ApiError,
        NodeFailure::ApiTimeout,
        NodeFailure::ApiRefused,
        NodeFailure::Internal,
    ];

    pub fn parse(name: &str) -> NodeFailure {
        if let Some(f) = Self::WITHOUT_KERNEL.iter().find(|f| f.name() == name) {
            return f.clone();
        }
        match serde_json::from_value::<FailureClass>(serde_json::Value::String(name.to_string())) {
            Ok(c) => NodeFailure::Kernel(c),
            Err(_) => NodeFailure::Other(name.to_string()),
        }
    }

    /// No kernel exists to repair: the generator or nightshift failed, not a kernel.
    pub fn is_generation(&self) -> bool {
        matches!(
            self,
            NodeFailure::NoCode
                | NodeFailure::TruncatedReply
                | NodeFailure::ApiError
                | NodeFailure::ApiTimeout
                | NodeFailure::Internal
        )
    }
}

impl From<FailureClass> for NodeFailure {
    fn from(c: FailureClass) -> NodeFailure {
        NodeFailure::Kernel(c)
    }
}

impl fmt::Display for NodeFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl Serialize for NodeFailure {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl<'de> Deserialize<'de> for NodeFailure {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<NodeFailure, D::Error> {
        Ok(NodeFailure::parse(&String::deserialize(d)?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_reads_back_as_itself() {
        let all = [
            NodeFailure::Kernel(FailureClass::BuildError),
            NodeFailure::Kernel(FailureClass::WrongAnswer),
            NodeFailure::NoCode,
            NodeFailure::TruncatedReply,
            NodeFailure::ApiError,
            NodeFailure::ApiTimeout,
            NodeFailure::ApiRefused,
            NodeFailure::Internal,
            NodeFailure::Other("from-a-later-version".into()),
        ];
        for f in all {
            let json = serde_json::to_string(&f).unwrap();
            assert_eq!(json, format!("\"{}\"", f.name()));
            assert_eq!(serde_json::from_str::<NodeFailure>(&json).unwrap(), f);
        }
        assert_eq!(NodeFailure::parse("build-error"), NodeFailure::Kernel(FailureClass::BuildError));
    }

    #[test]
    fn only_failures_without_a_kernel_are_generation_failures() {
        assert!(NodeFailure::NoCode.is_generation() && NodeFailure::Internal.is_generation());
        assert!(!NodeFailure::Kernel(FailureClass::WrongAnswer).is_generation());
        assert!(!NodeFailure::ApiRefused.is_generation());
        assert!(!NodeFailure::Other("x".into()).is_generation());
    }
}

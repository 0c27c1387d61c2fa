//! Where every buffer of a judgment lives. A *layout* places each pointer argument of each
//! case (one size) in one allocation, with a guard zone of canary bytes before and after
//! every buffer; a *pool* is one exported allocation with a layout. The judge makes two
//! pools of each layout: one it lends to the reference's worker, one it lends to the
//! baseline's and the candidate's. Inputs are generated into both from the same seeds;
//! the reference writes into its own pool, which no candidate ever maps, and the judge
//! compares the two.

use super::super::verify::{GUARD_BYTE, GUARD_BYTES};
use crate::task::init::Init;
use crate::task::types::ElemType;
use crate::task::values::{args_at, ArgValue, ValueError};
use crate::task::{Size, Task};
use crate::wall::gpu::kernels::GenSpec;
use crate::wall::gpu::vmm::Exported;
use crate::wall::gpu::{Gpu, GpuResult};
use crate::wall::protocol::{Arg, Call};

/// One pointer argument of one case.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Place {
    /// Where its data starts in the pool (a guard zone lies on each side).
    pub offset: u64,
    pub elem: ElemType,
    pub count: u64,
    /// The distribution of an input or in-out buffer; None for outputs.
    pub init: Option<Init>,
}

impl Place {
    pub fn bytes(&self) -> u64 {
        self.count * self.elem.size() as u64
    }
}

/// One case: a size, and per argument a place or a scalar.
#[derive(Debug, Clone)]
pub struct Case {
    pub size: Size,
    pub places: Vec<Option<Place>>,
    pub scalars: Vec<[u8; 8]>,
}

#[derive(Debug, Clone)]
pub struct Layout {
    pub cases: Vec<Case>,
    pub bytes: u64,
}

impl Layout {
    /// One case per size, in order.
    pub fn new(task: &Task, sizes: &[Size]) -> Result<Layout, ValueError> {
        let mut at = 0u64;
        let mut cases = Vec::with_capacity(sizes.len());
        for size in sizes {
            let values = args_at(task, size)?;
            let mut places = Vec::with_capacity(values.len());
            let mut scalars = Vec::with_capacity(values.len());
            for v in values {
                match v {
                    ArgValue::Buffer { elem, count, init } => {
                        at += GUARD_BYTES as u64;
                        let place = Place { offset: at, elem, count: count as u64, init };
                        // 256 keeps every buffer as aligned as the allocation (16-byte
                        // vector loads stay legal).
                        at += place.bytes().next_multiple_of(GUARD_BYTES as u64);
                        places.push(Some(place));
                        scalars.push([0; 8]);
                    }
                    ArgValue::Scalar(b) => {
                        places.push(None);
                        scalars.push(b);
                    }
                }
            }
            cases.push(Case { size: size.clone(), places, scalars });
        }
        at += GUARD_BYTES as u64;
        Ok(Layout { cases, bytes: at })
    }

    /// `slots` cases of one size.
    pub fn slots(task: &Task, size: &Size, slots: usize) -> Result<Layout, ValueError> {
        Layout::new(task, &vec![size.clone(); slots])
    }

    /// Bytes one case of `size` takes, guards included.
    pub fn case_bytes(task: &Task, size: &Size) -> Result<u64, ValueError> {
        Ok(Layout::new(task, std::slice::from_ref(size))?.bytes)
    }
}

/// An exported allocation with its layout.
pub struct Pool {
    pub id: u32,
    pub layout: Layout,
    pub mem: Exported,
}

impl Pool {
    /// Allocates, maps and fills with canary bytes (data is written over it later).
    pub fn new(gpu: &Gpu, id: u32, layout: Layout) -> GpuResult<Pool> {
        let mem = gpu.alloc_exportable(layout.bytes as usize)?;
        gpu.fill_async(mem.mapped.ptr, 1, GUARD_BYTE as u64, mem.mapped.bytes)?;
        Ok(Pool { id, layout, mem })
    }

    pub fn ptr(&self, place: &Place) -> u64 {
        self.mem.mapped.ptr + place.offset
    }

    /// The call of case `k` on this pool's buffers.
    pub fn call(&self, k: usize) -> Call {
        let case = &self.layout.cases[k];
        let args = case
            .places
            .iter()
            .zip(&case.scalars)
            .map(|(p, s)| match p {
                Some(p) => Arg::Buffer { pool: self.id, offset: p.offset },
                None => Arg::Value { bytes: *s },
            })
            .collect();
        Call { args }
    }
}

/// What `seed` generates for argument `arg` of a case: the inputs, and a guard zone's
/// canaries (a constant).
pub fn input_spec(place: &Place, seed: u64, arg: usize) -> Option<GenSpec> {
    place.init.map(|init| GenSpec::new(&init, place.elem, place.count, seed, arg as u64))
}

/// The canaries of one guard zone, as a spec the judge's check kernel compares against.
pub fn guard_spec() -> GenSpec {
    GenSpec::new(&Init::Const { value: GUARD_BYTE as f64 }, ElemType::U8, GUARD_BYTES as u64, 0, 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn buffers_are_guarded_aligned_and_apart() {
        let task = Task::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("tasks/softmax")).unwrap();
        let layout = Layout::new(&task, &task.checks).unwrap();
        let mut places: Vec<Place> = layout.cases.iter().flat_map(|c| c.places.iter().flatten().copied()).collect();
        places.sort_by_key(|p| p.offset);
        assert!(places[0].offset >= GUARD_BYTES as u64);
        for p in &places {
            assert_eq!(p.offset % GUARD_BYTES as u64, 0, "aligned");
        }
        for w in places.windows(2) {
            assert!(w[0].offset + w[0].bytes() + GUARD_BYTES as u64 <= w[1].offset, "a guard zone between {w:?}");
        }
        let last = places.last().unwrap();
        assert!(last.offset + last.bytes() + GUARD_BYTES as u64 <= layout.bytes);
        assert_eq!(Layout::slots(&task, &task.bench, 3).unwrap().cases.len(), 3);
    }
}

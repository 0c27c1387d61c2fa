//! Buffers the judge owns and lends: CUDA virtual-memory allocations exportable only as a
//! POSIX file descriptor. The judge makes one, maps it into its own context and sends the
//! descriptor over its socket pair to the worker that should see it; the worker maps it in
//! its own context. A process without the descriptor cannot reach the memory (unlike
//! legacy IPC handles, which are data a process could guess), and no worker ever gets the
//! descriptor of the buffers the reference writes into or the judge keeps for itself.
//!
//! Access flags are the mapping process's own choice (an importer can map read-only and
//! then ask for read-write: measured on an H100), so a worker's write to its inputs is
//! caught by the judge's check afterwards, not prevented.

use super::{Ctx, Gpu, GpuResult};
use cudarc::driver::sys;
use std::os::fd::{AsRawFd, FromRawFd, IntoRawFd, OwnedFd};

fn props(device: i32) -> sys::CUmemAllocationProp {
    // SAFETY: a zeroed prop is the documented starting point; fields set below.
    let mut p: sys::CUmemAllocationProp = unsafe { std::mem::zeroed() };
    p.type_ = sys::CUmemAllocationType::CU_MEM_ALLOCATION_TYPE_PINNED;
    p.requestedHandleTypes = sys::CUmemAllocationHandleType::CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    p.location = location(device);
    p
}

fn location(device: i32) -> sys::CUmemLocation {
    // SAFETY: zeroed, then the two fields every CUDA version has.
    let mut l: sys::CUmemLocation = unsafe { std::mem::zeroed() };
    l.type_ = sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE;
    l.id = device;
    l
}

/// Reserves address space for `bytes`, maps `handle` there and allows read and write.
fn map(handle: sys::CUmemGenericAllocationHandle, bytes: usize, device: i32) -> GpuResult<sys::CUdeviceptr> {
    let mut ptr: sys::CUdeviceptr = 0;
    // SAFETY: out-pointer to a local; size is a multiple of the granularity (callers).
    unsafe { sys::cuMemAddressReserve(&mut ptr, bytes, 0, 0, 0) }.result().ctx("cuMemAddressReserve")?;
    // SAFETY: the range was just reserved with this size.
    if let Err(e) = unsafe { sys::cuMemMap(ptr, bytes, 0, handle, 0) }.result() {
        // SAFETY: releases the reservation made above.
        let _ = unsafe { sys::cuMemAddressFree(ptr, bytes) };
        return Err(super::GpuError::from_driver(e, "cuMemMap"));
    }
    let desc = sys::CUmemAccessDesc {
        location: location(device),
        flags: sys::CUmemAccess_flags::CU_MEM_ACCESS_FLAGS_PROT_READWRITE,
    };
    // SAFETY: the range is mapped; one descriptor.
    if let Err(e) = unsafe { sys::cuMemSetAccess(ptr, bytes, &desc, 1) }.result() {
        // SAFETY: undoes the mapping and reservation made above.
        unsafe {
            let _ = sys::cuMemUnmap(ptr, bytes);
            let _ = sys::cuMemAddressFree(ptr, bytes);
        }
        return Err(super::GpuError::from_driver(e, "cuMemSetAccess"));
    }
    Ok(ptr)
}

/// A mapped allocation: unmapped, its address range freed and its handle released on drop.
pub struct Mapped {
    pub ptr: sys::CUdeviceptr,
    pub bytes: usize,
    handle: sys::CUmemGenericAllocationHandle,
}

impl Drop for Mapped {
    fn drop(&mut self) {
        // SAFETY: the mapping, reservation and handle were made by this value and are
        // undone once; errors (a dead context) are moot.
        unsafe {
            let _ = sys::cuMemUnmap(self.ptr, self.bytes);
            let _ = sys::cuMemAddressFree(self.ptr, self.bytes);
            let _ = sys::cuMemRelease(self.handle);
        }
    }
}

/// An allocation of the judge's, mapped in its context, with the descriptor it lends.
pub struct Exported {
    pub mapped: Mapped,
    fd: OwnedFd,
}

impl Exported {
    /// The descriptor to send (the judge keeps its own; the kernel duplicates it in
    /// flight).
    pub fn fd(&self) -> std::os::fd::RawFd {
        self.fd.as_raw_fd()
    }
}

impl Gpu {
    /// The allocation granularity for exportable device memory.
    pub fn granularity(&self) -> GpuResult<usize> {
        self.bind()?;
        let p = props(self.ordinal);
        let mut g = 0usize;
        // SAFETY: out-pointer to a local and a valid prop.
        unsafe {
            sys::cuMemGetAllocationGranularity(
                &mut g,
                &p,
                sys::CUmemAllocationGranularity_flags::CU_MEM_ALLOC_GRANULARITY_MINIMUM,
            )
        }
        .result()
        .ctx("cuMemGetAllocationGranularity")?;
        Ok(g.max(1))
    }

    /// `bytes` (rounded up to the granularity) of device memory, mapped here and
    /// exportable as a file descriptor.
    pub fn alloc_exportable(&self, bytes: usize) -> GpuResult<Exported> {
        let g = self.granularity()?;
        let bytes = bytes.max(1).div_ceil(g) * g;
        let p = props(self.ordinal);
        let mut handle: sys::CUmemGenericAllocationHandle = 0;
        // SAFETY: out-pointer to a local; size is a multiple of the granularity.
        unsafe { sys::cuMemCreate(&mut handle, bytes, &p, 0) }.result().ctx("cuMemCreate")?;
        let mut raw: libc::c_int = -1;
        // SAFETY: for POSIX descriptors the out-parameter is an int.
        let exported = unsafe {
            sys::cuMemExportToShareableHandle(
                &mut raw as *mut libc::c_int as *mut std::ffi::c_void,
                handle,
                sys::CUmemAllocationHandleType::CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
                0,
            )
        }
        .result();
        if let Err(e) = exported {
            // SAFETY: releases the handle made above.
            let _ = unsafe { sys::cuMemRelease(handle) };
            return Err(super::GpuError::from_driver(e, "cuMemExportToShareableHandle"));
        }
        // SAFETY: a fresh descriptor the driver made for us.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        match map(handle, bytes, self.ordinal) {
            Ok(ptr) => Ok(Exported { mapped: Mapped { ptr, bytes, handle }, fd }),
            Err(e) => {
                // SAFETY: releases the handle made above.
                let _ = unsafe { sys::cuMemRelease(handle) };
                Err(e)
            }
        }
    }

    /// Maps an allocation another process lent by descriptor; the descriptor is closed
    /// once imported (the driver holds its own reference).
    pub fn import(&self, fd: OwnedFd, bytes: usize) -> GpuResult<Mapped> {
        self.bind()?;
        let mut handle: sys::CUmemGenericAllocationHandle = 0;
        let raw = fd.into_raw_fd();
        // SAFETY: for POSIX descriptors the handle argument is the descriptor's value.
        let imported = unsafe {
            sys::cuMemImportFromShareableHandle(
                &mut handle,
                raw as usize as *mut std::ffi::c_void,
                sys::CUmemAllocationHandleType::CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
            )
        }
        .result();
        // SAFETY: the descriptor is ours (taken from the OwnedFd above) and closed once.
        unsafe { libc::close(raw) };
        imported.ctx("cuMemImportFromShareableHandle")?;
        match map(handle, bytes, self.ordinal) {
            Ok(ptr) => Ok(Mapped { ptr, bytes, handle }),
            Err(e) => {
                // SAFETY: releases the imported handle.
                let _ = unsafe { sys::cuMemRelease(handle) };
                Err(e)
            }
        }
    }
}

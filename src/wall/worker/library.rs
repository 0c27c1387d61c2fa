//! A loaded kernel library: its constructors run at load (this is the untrusted code the
//! process exists to contain), then its shim entry is called with an argument array.

use std::ffi::{c_char, c_int, c_void, CStr};
use std::path::{Path, PathBuf};

type CallFn = unsafe extern "C" fn(*const *mut c_void, *mut c_void) -> c_int;
type ErrorNameFn = unsafe extern "C" fn(c_int) -> *const c_char;

pub(crate) struct Library {
    /// Never unloaded: a library may leave threads or callbacks behind that would run
    /// unmapped code after a dlclose.
    _lib: std::mem::ManuallyDrop<libloading::Library>,
    call: CallFn,
    error_name: ErrorNameFn,
}

/// Why a library gives no entry to call.
#[derive(Debug, thiserror::Error)]
pub(crate) enum LoadError {
    #[error("cannot load the library {}: {source}", path.display())]
    Open { path: PathBuf, source: libloading::Error },
    #[error("the library has no shim entry: {source}")]
    NoEntry { source: libloading::Error },
    #[error("the library has no shim error function: {source}")]
    NoErrorName { source: libloading::Error },
}

impl Library {
    pub fn load(path: &Path) -> Result<Library, LoadError> {
        use libloading::os::unix::{Library as Raw, RTLD_LOCAL, RTLD_NOW};
        // SAFETY: loading runs the library's constructors: this is exactly the untrusted
        // code this process exists to contain.
        let lib = unsafe { Raw::open(Some(path), RTLD_NOW | RTLD_LOCAL) }
            .map_err(|source| LoadError::Open { path: path.to_path_buf(), source })?;
        let lib: libloading::Library = lib.into();
        // SAFETY: symbol types match the generated shim (toolkit::build::shim).
        let call = unsafe { lib.get::<CallFn>(crate::toolkit::build::shim::CALL_SYMBOL.as_bytes()) }
            .map(|s| *s)
            .map_err(|source| LoadError::NoEntry { source })?;
        // SAFETY: as above.
        let error_name = unsafe { lib.get::<ErrorNameFn>(crate::toolkit::build::shim::ERROR_NAME_SYMBOL.as_bytes()) }
            .map(|s| *s)
            .map_err(|source| LoadError::NoErrorName { source })?;
        Ok(Library { _lib: std::mem::ManuallyDrop::new(lib), call, error_name })
    }

    /// Calls the entry with one 8-byte slot per argument on `stream`; the CUDA error's
    /// name when it returns one.
    pub fn call(&self, args: &mut [[u8; 8]], stream: *mut c_void) -> Result<(), String> {
        let ptrs: Vec<*mut c_void> = args.iter_mut().map(|a| a.as_mut_ptr() as *mut c_void).collect();
        // SAFETY: the shim unpacks exactly as many values as the task has arguments, each
        // pointed to by ptrs[i]; the stream belongs to the context the runtime uses.
        let code = unsafe { (self.call)(ptrs.as_ptr(), stream) };
        if code == 0 {
            return Ok(());
        }
        // SAFETY: cudaGetErrorName returns a static string for any code.
        Err(unsafe {
            let p = (self.error_name)(code);
            if p.is_null() {
                format!("cuda error {code}")
            } else {
                CStr::from_ptr(p).to_string_lossy().into_owned()
            }
        })
    }
}

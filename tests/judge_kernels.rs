//! The judge's GPU kernels (src/wall/gpu/kernels) without a GPU. The committed PTX must
//! be what the sources compile to, and ptxas must accept it for sm_90 (so will the driver's
//! JIT). The element logic the kernels run lives in `__host__ __device__` headers: built
//! for the CPU by nvcc's host pass (tests/judge_kernels/host.cu, a small shared library,
//! each entry point running a launch's threads one after another), it must give exactly
//! `verify::compare`'s answers and the host generator's distributions and conversions.
//! Needs the CUDA 13.0 wheels in .cuda/ (.ci/run installs them), as tests/builds.rs does.

mod common;

use libloading::Library;
use nightshift::task::init::Init;
use nightshift::task::types::ElemType;
use nightshift::task::Tolerance;
use nightshift::wall::gpu::kernels::{self, elem_code, CmpResult, CmpSpec, GenSpec, COMPARE_PTX, GENERATE_PTX, NONE};
use nightshift::wall::judge::verify;
use proptest::prelude::*;
use sha2::{Digest, Sha256};
use std::mem::{offset_of, size_of};
use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;

const KERNELS: &str = "src/wall/gpu/kernels";

const ALL: [ElemType; 14] = [
    ElemType::F32,
    ElemType::F64,
    ElemType::F16,
    ElemType::Bf16,
    ElemType::I8,
    ElemType::U8,
    ElemType::I16,
    ElemType::U16,
    ElemType::I32,
    ElemType::U32,
    ElemType::I64,
    ElemType::U64,
    ElemType::F8E4M3,
    ElemType::F8E5M2,
];

/// The pinned wheel toolchain: the committed PTX is reproducible only with that nvcc.
fn wheel_home() -> PathBuf {
    nightshift::toolkit::toolchain::wheel_homes(&common::root().join(".cuda")).into_iter().next().unwrap_or_else(|| {
        panic!("these tests compile the judge kernels with the CUDA 13.0 wheels: run .ci/run once to install them into .cuda/")
    })
}

fn run(cmd: &mut Command) {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn committed_ptx_is_what_the_sources_compile_to() {
    wheel_home();
    let dir = tempfile::tempdir().unwrap();
    run(Command::new("bash").arg(common::root().join("scripts/ptx.sh")).arg(dir.path()));
    for (name, committed) in [("generate.ptx", GENERATE_PTX), ("compare.ptx", COMPARE_PTX)] {
        let fresh = std::fs::read_to_string(dir.path().join(name)).unwrap();
        assert!(fresh == committed, "{KERNELS}/{name} is stale: run scripts/ptx.sh and commit the result");
    }
}

#[test]
fn ptxas_accepts_the_ptx_for_sm_90_and_it_targets_compute_75() {
    let ptxas = wheel_home().join("bin/ptxas");
    let dir = tempfile::tempdir().unwrap();
    for (name, ptx, entries) in [
        ("generate.ptx", GENERATE_PTX, &[kernels::GENERATE_KERNEL, kernels::CHECK_GENERATED_KERNEL][..]),
        ("compare.ptx", COMPARE_PTX, &[kernels::COMPARE_KERNEL][..]),
    ] {
        assert!(ptx.contains("\n.target sm_75\n"), "{name}: built for compute_75");
        assert!(!ptx.contains(".file") && !ptx.contains(".loc"), "{name}: no line info");
        for entry in entries {
            assert!(ptx.contains(&format!(".visible .entry {entry}(")), "{name} defines {entry}");
        }
        let path = dir.path().join(name);
        std::fs::write(&path, ptx).unwrap();
        run(Command::new(&ptxas).arg("-arch=sm_90").arg(&path).arg("-o").arg(dir.path().join("out.cubin")));
    }
}

type GenerateFn = unsafe extern "C" fn(*mut u8, GenSpec, u64);
type CheckFn = unsafe extern "C" fn(*const u8, GenSpec, u64) -> u64;
type CompareFn = unsafe extern "C" fn(*const u8, *const u8, CmpSpec, u64, *mut CmpResult);
type EncodeFn = unsafe extern "C" fn(u32, f64) -> u64;
type DecodeFn = unsafe extern "C" fn(u32, u64) -> f64;
type LayoutFn = unsafe extern "C" fn(*mut u64);

/// The host build of the kernels' headers.
struct Host {
    _lib: Library,
    generate: GenerateFn,
    check: CheckFn,
    compare: CompareFn,
    encode: EncodeFn,
    decode: DecodeFn,
    layout: LayoutFn,
}

/// Built once per test process; a failed build fails every test that needs it at once
/// (a proptest would otherwise rebuild on every case it shrinks through).
fn host() -> &'static Host {
    static HOST: OnceLock<Result<Host, String>> = OnceLock::new();
    let host = HOST.get_or_init(|| {
        let library = std::panic::catch_unwind(build_host_library).map_err(|e| {
            e.downcast_ref::<String>().cloned().unwrap_or_else(|| "building the host library panicked".into())
        })?;
        // SAFETY: our own library, built from the sources under test; each symbol has the
        // signature host.cu declares.
        unsafe {
            let lib = Library::new(&library).map_err(|e| format!("loading {}: {e}", library.display()))?;
            Ok(Host {
                generate: *lib.get::<GenerateFn>(b"nightshift_host_generate\0").unwrap(),
                check: *lib.get::<CheckFn>(b"nightshift_host_check_generated\0").unwrap(),
                compare: *lib.get::<CompareFn>(b"nightshift_host_compare\0").unwrap(),
                encode: *lib.get::<EncodeFn>(b"nightshift_host_encode\0").unwrap(),
                decode: *lib.get::<DecodeFn>(b"nightshift_host_decode\0").unwrap(),
                layout: *lib.get::<LayoutFn>(b"nightshift_host_layout\0").unwrap(),
                _lib: lib,
            })
        }
    });
    host.as_ref().unwrap_or_else(|e| panic!("{e}"))
}

/// Builds tests/judge_kernels/host.cu with the kernels' headers into the test cache, named
/// by the sources' content (so concurrent test runs share one build).
fn build_host_library() -> PathBuf {
    let root = common::root();
    let home = wheel_home();
    let nvcc = home.join("bin/nvcc");
    let mut sources: Vec<PathBuf> = std::fs::read_dir(root.join(KERNELS))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "cuh"))
        .collect();
    sources.sort();
    sources.push(root.join("tests/judge_kernels/host.cu"));
    let mut hash = Sha256::new();
    hash.update(nvcc.to_string_lossy().as_bytes());
    for s in &sources {
        hash.update(s.file_name().unwrap().to_string_lossy().as_bytes());
        hash.update(std::fs::read(s).unwrap());
    }
    let digest = format!("{:x}", hash.finalize());
    let dir = common::test_cache().join("judge-kernels");
    std::fs::create_dir_all(&dir).unwrap();
    let library = dir.join(format!("host-{}.so", &digest[..16]));
    if !library.is_file() {
        let partial = dir.join(format!(".host-{}-{}.so", &digest[..16], std::process::id()));
        run(Command::new(&nvcc)
            .args(["-shared", "-Xcompiler", "-fPIC,-ffp-contract=off", "-O2", "-I"])
            .arg(root.join(KERNELS))
            .arg(format!("-L{}", home.join("lib").display())) // the wheel's static CUDA runtime
            .arg("-o")
            .arg(&partial)
            .arg(root.join("tests/judge_kernels/host.cu")));
        std::fs::rename(&partial, &library).unwrap();
    }
    library
}

fn size_bytes(spec: &GenSpec) -> usize {
    spec.count as usize * ALL[spec.elem as usize].size()
}

/// A buffer as `threads` grid threads of nightshift_generate leave it (unwritten bytes 0xEE).
fn generate(spec: GenSpec, threads: u64) -> Vec<u8> {
    let mut out = vec![0xEE; size_bytes(&spec)];
    // SAFETY: `out` holds spec.count elements of spec.elem.
    unsafe { (host().generate)(out.as_mut_ptr(), spec, threads) };
    out
}

fn check(buf: &[u8], spec: GenSpec, threads: u64) -> u64 {
    assert!(buf.len() >= size_bytes(&spec));
    // SAFETY: `buf` holds spec.count elements of spec.elem.
    unsafe { (host().check)(buf.as_ptr(), spec, threads) }
}

fn compare(elem: ElemType, got: &[u8], expected: &[u8], tol: Tolerance, threads: u64) -> CmpResult {
    assert_eq!(got.len(), expected.len());
    let spec = CmpSpec::new(elem, (got.len() / elem.size()) as u64, tol);
    let mut result = CmpResult::INITIAL;
    // SAFETY: both buffers hold spec.count elements; `result` is a live CmpResult.
    unsafe { (host().compare)(got.as_ptr(), expected.as_ptr(), spec, threads, &mut result) };
    result
}

fn encode(elem: ElemType, v: f64) -> u64 {
    // SAFETY: a pure function of its arguments.
    unsafe { (host().encode)(elem_code(elem), v) }
}

fn decode(elem: ElemType, bits: u64) -> f64 {
    // SAFETY: a pure function of its arguments.
    unsafe { (host().decode)(elem_code(elem), bits) }
}

/// The host's bytes for `v` as `elem` (ElemType::write_f64), as the low bits of a u64.
fn write_f64(elem: ElemType, v: f64) -> u64 {
    let mut b = [0u8; 8];
    elem.write_f64(&mut b, 0, v);
    u64::from_le_bytes(b)
}

/// Element `i` as its raw bits.
fn raw(elem: ElemType, bytes: &[u8], i: usize) -> u64 {
    let s = elem.size();
    let mut b = [0u8; 8];
    b[..s].copy_from_slice(&bytes[i * s..(i + 1) * s]);
    u64::from_le_bytes(b)
}

/// Element `i` of an integer type, exactly.
fn int(elem: ElemType, bytes: &[u8], i: usize) -> i128 {
    let r = raw(elem, bytes, i);
    match elem {
        ElemType::I8 => r as u8 as i8 as i128,
        ElemType::I16 => r as u16 as i16 as i128,
        ElemType::I32 => r as u32 as i32 as i128,
        ElemType::I64 => r as i64 as i128,
        _ => r as i128,
    }
}

fn values(elem: ElemType, bytes: &[u8]) -> Vec<f64> {
    (0..bytes.len() / elem.size()).map(|i| elem.read_f64(bytes, i)).collect()
}

#[test]
fn host_build_lays_the_structs_out_as_the_rust_mirrors() {
    let mut c = [0u64; 23];
    // SAFETY: host.cu writes exactly 23 values.
    unsafe { (host().layout)(c.as_mut_ptr()) };
    let rust = [
        size_of::<GenSpec>(),
        offset_of!(GenSpec, count),
        offset_of!(GenSpec, seed),
        offset_of!(GenSpec, stream),
        offset_of!(GenSpec, dist),
        offset_of!(GenSpec, elem),
        offset_of!(GenSpec, a),
        offset_of!(GenSpec, b),
        offset_of!(GenSpec, lo),
        offset_of!(GenSpec, hi),
        size_of::<CmpSpec>(),
        offset_of!(CmpSpec, count),
        offset_of!(CmpSpec, elem),
        offset_of!(CmpSpec, pad),
        offset_of!(CmpSpec, rtol),
        offset_of!(CmpSpec, atol),
        size_of::<CmpResult>(),
        offset_of!(CmpResult, mismatches),
        offset_of!(CmpResult, first_mismatch),
        offset_of!(CmpResult, max_abs_err_bits),
        offset_of!(CmpResult, max_rel_err_bits),
        offset_of!(CmpResult, expected_nonfinite),
        offset_of!(CmpResult, first_expected_nonfinite),
    ];
    assert_eq!(c.map(|v| v as usize), rust);
}

// ---- element conversions -------------------------------------------------------------

/// Doubles worth converting: any bit pattern, and values near each type's edges.
fn any_f64() -> impl Strategy<Value = f64> {
    prop_oneof![
        any::<u64>().prop_map(f64::from_bits),
        any::<f64>(),
        (-70000.0..70000.0f64),
        (-1e-4..1e-4f64),
        prop::sample::select(vec![
            0.0,
            -0.0,
            0.5,
            -0.5,
            2.5,
            -2.5,
            127.5,
            128.0,
            -128.7,
            255.9,
            256.0,
            65504.0,
            65519.99,
            65520.0,
            3.4e38,
            3.4028235677973366e38,
            1e39,
            5.960464477539063e-8,
            2.98e-8,
            1e-45,
            9007199254740993.0,
            9.223_372_036_854_776e18, // 2^63
            9.223_372_036_854_775e18,
            -9.223_372_036_854_776e18,
            1.8446744073709552e19,
            f64::MAX,
            f64::MIN_POSITIVE,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::NAN,
        ]),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 4096, ..ProptestConfig::default() })]

    /// encode_f64 is ElemType::write_f64. For f16 the host rounds through f32 (x86's F16C
    /// path of `half`); NaNs must stay NaNs (their payload is not a value).
    #[test]
    fn encoding_is_write_f64(v in any_f64()) {
        for elem in ALL {
            let ours = encode(elem, v);
            let host = if elem == ElemType::F16 { half::f16::from_f32(v as f32).to_bits() as u64 } else { write_f64(elem, v) };
            if elem.is_float() && v.is_nan() {
                prop_assert!(decode(elem, ours).is_nan(), "{elem}: NaN stays NaN");
            } else {
                prop_assert_eq!(ours, host, "{} of {:e} ({:#x})", elem, v, v.to_bits());
            }
        }
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("f16c") && !v.is_nan() {
            prop_assert_eq!(encode(ElemType::F16, v), write_f64(ElemType::F16, v), "f16 of {:e}", v);
        }
    }

    /// decode_f64 is ElemType::read_f64 on every bit pattern.
    #[test]
    fn decoding_is_read_f64(bits in any::<u64>()) {
        for elem in ALL {
            let mask = if elem.size() == 8 { u64::MAX } else { (1u64 << (8 * elem.size())) - 1 };
            let b = bits & mask;
            let host = elem.read_f64(&b.to_le_bytes(), 0);
            let ours = decode(elem, b);
            prop_assert!(ours.to_bits() == host.to_bits() || (ours.is_nan() && host.is_nan()), "{} {:#x}: {} vs {}", elem, b, ours, host);
        }
    }
}

// ---- comparison ----------------------------------------------------------------------

/// Values with a meaning for `elem`: zeros, ones, extremes, subnormals, infinities, NaNs.
fn specials(elem: ElemType) -> Vec<f64> {
    let mut v = vec![0.0, -0.0, 1.0, -1.0, 7.0, -3.0, 1000.0];
    match elem {
        ElemType::F32 => v.extend([f32::MAX as f64, f32::MIN_POSITIVE as f64, 1e-45, f32::EPSILON as f64]),
        ElemType::F64 => v.extend([f64::MAX, f64::MIN, f64::MIN_POSITIVE, 5e-324, f64::EPSILON]),
        ElemType::F16 => v.extend([65504.0, -65504.0, 6.103515625e-5, 5.960464477539063e-8]),
        ElemType::Bf16 => v.extend([3.3895313892515355e38, 1.1754943508222875e-38, 9.183549615799121e-41]),
        // Largest finite, past it (saturates), the smallest subnormal and half of it (a tie).
        ElemType::F8E4M3 => v.extend([448.0, 464.0, -500.0, 0.001953125, 0.0009765625, 0.015625]),
        ElemType::F8E5M2 => v.extend([57344.0, 61440.0, -1e9, 1.52587890625e-5, 7.62939453125e-6, 6.103515625e-5]),
        _ => {}
    }
    if elem.is_float() {
        v.extend([f64::NAN, -f64::NAN, f64::INFINITY, f64::NEG_INFINITY]);
    } else {
        v.extend([-1e30, 1e30]); // saturate to each type's extremes
    }
    v
}

const TOLS: [Tolerance; 5] = [
    Tolerance { rtol: 1e-5, atol: 1e-6 },
    Tolerance { rtol: 0.0, atol: 0.0 },
    Tolerance { rtol: 1e-3, atol: 1.0 },
    Tolerance { rtol: 0.5, atol: 2.5 },
    Tolerance { rtol: 1e-2, atol: 0.0 },
];

/// One (got, expected) pair's bits, built from a few random numbers: the reference is
/// random bits, a special or an ordinary value; got is the same, one ulp (or one) away, at
/// a multiple of the tolerance, random bits, or a special.
fn pair(elem: ElemType, tol: Tolerance, (ce, cg, r1, r2): (u8, u8, u64, u64)) -> (u64, u64) {
    let mask = if elem.size() == 8 { u64::MAX } else { (1u64 << (8 * elem.size())) - 1 };
    let sp = specials(elem);
    let e = match ce % 3 {
        0 => r1 & mask,
        1 => write_f64(elem, sp[r1 as usize % sp.len()]),
        _ => write_f64(elem, (r1 as i32 as f64) / 1000.0),
    };
    let ev = elem.read_f64(&e.to_le_bytes(), 0);
    let width = if elem.is_float() { tol.atol + tol.rtol * ev.abs() } else { tol.atol.floor() };
    let g = match cg % 6 {
        0 => e,
        1 => (if r2 & 1 == 0 { e.wrapping_add(1) } else { e.wrapping_sub(1) }) & mask,
        2 => {
            let k = [0.5, 1.0, 1.0 + 1e-9, 1.0 - 1e-9, 2.0, -1.0][r2 as usize % 6];
            write_f64(elem, ev + k * width)
        }
        3 => r2 & mask,
        4 => write_f64(elem, sp[r2 as usize % sp.len()]),
        _ => write_f64(elem, ev - width - if r2 & 1 == 0 { 0.0 } else { 1.0 }),
    };
    (g, e)
}

fn bytes(elem: ElemType, words: impl Iterator<Item = u64>) -> Vec<u8> {
    words.flat_map(|w| w.to_le_bytes()[..elem.size()].to_vec()).collect()
}

/// The device comparison and the host's must agree on everything the device reports.
fn assert_same_as_verify(elem: ElemType, got: &[u8], expected: &[u8], tol: Tolerance, threads: u64) {
    let n = got.len() / elem.size();
    let host = verify::compare(elem, got, expected, tol, 1);
    let device = compare(elem, got, expected, tol, threads).comparison(n as u64);
    let ctx = format!("{elem}, {n} elements, tol {tol:?}, {threads} threads");
    assert_eq!(device.mismatches, host.mismatches, "{ctx}");
    assert_eq!(device.first_mismatch, host.first_mismatch.as_ref().map(|m| m.index), "{ctx}");
    assert_eq!(
        device.max_abs_err.to_bits(),
        host.max_abs_err.to_bits(),
        "{ctx}: {} vs {}",
        device.max_abs_err,
        host.max_abs_err
    );
    assert_eq!(
        device.max_rel_err.to_bits(),
        host.max_rel_err.to_bits(),
        "{ctx}: {} vs {}",
        device.max_rel_err,
        host.max_rel_err
    );
    let nonfinite: Vec<usize> = (0..n).filter(|&i| !elem.read_f64(expected, i).is_finite()).collect();
    assert_eq!(device.expected_nonfinite, nonfinite.len(), "{ctx}");
    assert_eq!(device.first_expected_nonfinite, nonfinite.first().copied(), "{ctx}");
    // Completed with the values the host reads, it is the host's comparison.
    let full = device.complete(|i| (elem.read_f64(got, i), elem.read_f64(expected, i)));
    assert_eq!(format!("{full:?}"), format!("{host:?}"), "{ctx}");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn comparison_is_verify_compare(
        elem in prop::sample::select(ALL.to_vec()),
        tol in prop::sample::select(TOLS.to_vec()),
        threads in prop::sample::select(vec![1u64, 2, 31, 32, 33, 256]),
        cases in prop::collection::vec((any::<u8>(), any::<u8>(), any::<u64>(), any::<u64>()), 0..300),
    ) {
        let pairs: Vec<(u64, u64)> = cases.into_iter().map(|c| pair(elem, tol, c)).collect();
        let got = bytes(elem, pairs.iter().map(|p| p.0));
        let expected = bytes(elem, pairs.iter().map(|p| p.1));
        assert_same_as_verify(elem, &got, &expected, tol, threads);
    }
}

#[test]
fn comparison_edges_by_hand() {
    let tol = Tolerance { rtol: 1e-5, atol: 1e-6 };
    let f64s = |v: &[f64]| bytes(ElemType::F64, v.iter().map(|x| x.to_bits()));
    // Exactly at atol + rtol * |expected| (0.5 + 0.25 * 2, all exact) passes, the next
    // double above fails; in f32 as well.
    let wide = Tolerance { rtol: 0.25, atol: 0.5 };
    let above = f64::from_bits(3f64.to_bits() + 1);
    let (got, expected) = (f64s(&[3.0, above, 1.0, -0.0, f64::NAN]), f64s(&[2.0, 2.0, 2.0, 0.0, f64::NAN]));
    assert_same_as_verify(ElemType::F64, &got, &expected, wide, 1);
    let r = compare(ElemType::F64, &got, &expected, wide, 1).comparison(5);
    assert_eq!((r.mismatches, r.first_mismatch, r.expected_nonfinite), (1, Some(1), 1));
    let f32s = |v: &[f32]| bytes(ElemType::F32, v.iter().map(|x| x.to_bits() as u64));
    let (got, expected) = (f32s(&[3.0, f32::from_bits(3f32.to_bits() + 1)]), f32s(&[2.0, 2.0]));
    assert_same_as_verify(ElemType::F32, &got, &expected, wide, 1);
    assert_eq!(compare(ElemType::F32, &got, &expected, wide, 1).comparison(2).first_mismatch, Some(1));
    // Infinite errors between finite extremes count, and only finite pairs count.
    let (got, expected) = (f64s(&[f64::MAX, f64::INFINITY, 1.0]), f64s(&[f64::MIN, f64::INFINITY, f64::NEG_INFINITY]));
    assert_same_as_verify(ElemType::F64, &got, &expected, tol, 3);
    assert_eq!(compare(ElemType::F64, &got, &expected, tol, 3).comparison(3).max_abs_err, f64::INFINITY);
    // Integers: within floor(atol), rtol ignored; i64 extremes read as f64 as the host does.
    let i64s = |v: &[i64]| bytes(ElemType::I64, v.iter().map(|&x| x as u64));
    let (got, expected) = (i64s(&[i64::MAX, i64::MIN, 10, 13]), i64s(&[i64::MAX - 1, i64::MIN, 12, 10]));
    assert_same_as_verify(ElemType::I64, &got, &expected, Tolerance { rtol: 0.5, atol: 2.9 }, 2);
    // No elements: nothing found.
    assert_eq!(compare(ElemType::F32, &[], &[], tol, 4), CmpResult::INITIAL);
    // An element type the kernels do not know fails every element.
    let spec = CmpSpec { elem: 99, ..CmpSpec::new(ElemType::U8, 5, tol) };
    let mut result = CmpResult::INITIAL;
    // SAFETY: 5-byte buffers, a live result.
    unsafe { (host().compare)([0u8; 5].as_ptr(), [0u8; 5].as_ptr(), spec, 3, &mut result) };
    assert_eq!((result.mismatches, result.first_mismatch), (5, 0));
}

// ---- generation ----------------------------------------------------------------------

/// A GenSpec for `init` as `elem`, if the host allows the pair.
fn spec(init: Init, elem: ElemType, count: u64, seed: u64, stream: u64) -> Option<GenSpec> {
    init.check_fits(elem).ok().map(|_| GenSpec::new(&init, elem, count, seed, stream))
}

fn inits() -> Vec<Init> {
    let mut v: Vec<Init> = [
        "normal(0, 1)",
        "normal(3, 0.5)",
        "uniform(0, 1)",
        "uniform(-3, 5)",
        "uniform(1, 1.0078125)",
        "uniform(1.001, 2)",
        "uniform(-100000, 100000)",
        "uniform(-1e-3, 0)",
        "randint(0, 2)",
        "randint(0, 256)",
        "randint(-128, 128)",
        "randint(-7, 100)",
        "randint(0, 65536)",
        "randint(-2147483648, 2147483648)",
        "const(2.5)",
        "const(-0.1)",
        "const(100000)",
        "zeros",
        "ones",
        "arange",
        "randperm",
    ]
    .iter()
    .map(|t| Init::parse(t).unwrap())
    .collect();
    v.push(Init::RandInt { lo: i64::MIN, hi: i64::MAX });
    v.push(Init::RandInt { lo: 0, hi: i64::MAX });
    v
}

#[test]
fn generated_values_lie_in_each_distribution_support() {
    let n = 70_000; // past u16 and f16's ranges, for arange's saturation and rounding
    for init in inits() {
        for elem in ALL {
            let Some(s) = spec(init, elem, n, 42, 3) else { continue };
            let buf = generate(s, 97);
            let ctx = format!("{init} as {elem}");
            let vals = values(elem, &buf);
            match init {
                Init::Normal { .. } => assert!(vals.iter().all(|v| v.is_finite()), "{ctx}"),
                // An fp8 may have no element in [lo, hi) (uniform(-0.001, 0): its
                // smallest magnitude is 2^-9): the nearest is kept, as for every type.
                Init::Uniform { lo, hi }
                    if elem.is_float()
                        && elem.size() == 1
                        && !(0..=255u64).any(|b| (lo..hi).contains(&elem.read_f64(&b.to_le_bytes(), 0))) =>
                {
                    assert!(vals.iter().all(|&v| (v - lo).abs() < 0.002 || (v - hi).abs() < 0.002), "{ctx}");
                }
                Init::Uniform { lo, hi } => {
                    let bad = vals.iter().find(|&&v| !(lo..hi).contains(&v));
                    assert!(bad.is_none(), "{ctx}: {bad:?} outside [lo, hi)");
                    // The element after lo (lo is positive here where it matters).
                    let after_lo = elem.is_float() && elem.size() < 4 && lo > 0.0 && {
                        let next = write_f64(elem, lo) + 1;
                        elem.read_f64(&next.to_le_bytes(), 0) >= hi
                    };
                    if after_lo {
                        // One ulp of the type wide (bf16's, or fp8's): lo is the only
                        // element in range (the host rounds half the draws up to hi).
                        assert!(vals.iter().all(|&v| v == lo), "{ctx}");
                    } else {
                        assert!(vals.iter().any(|&v| v != vals[0]), "{ctx}: not constant");
                    }
                }
                Init::RandInt { lo, hi } if !elem.is_float() => {
                    let bad =
                        (0..n as usize).map(|i| int(elem, &buf, i)).find(|&v| !(lo as i128..hi as i128).contains(&v));
                    assert!(bad.is_none(), "{ctx}: {bad:?} outside [lo, hi)");
                }
                // A float element rounds the integer drawn, as the host's does (past f16's
                // largest finite, to infinity): within lo and hi so rounded.
                Init::RandInt { lo, hi } => {
                    let [lo, hi] = [lo, hi].map(|b| elem.read_f64(&write_f64(elem, b as f64).to_le_bytes(), 0));
                    assert!(vals.iter().all(|&v| (lo..=hi).contains(&v)), "{ctx}");
                    assert!(vals.iter().all(|&v| v.fract() == 0.0 || v.is_infinite()), "{ctx}");
                }
                Init::Const { value } => {
                    assert!((0..n as usize).all(|i| raw(elem, &buf, i) == write_f64(elem, value)), "{ctx}")
                }
                Init::Arange => {
                    let bad = (0..n as usize).find(|&i| raw(elem, &buf, i) != write_f64(elem, i as f64));
                    assert!(bad.is_none(), "{ctx}: element {bad:?}");
                }
                // A permutation of 0..n, each index converted as the host writes it
                // (saturated in narrow integers, rounded in narrow floats).
                Init::RandPerm => {
                    let mut got: Vec<u64> = (0..n as usize).map(|i| raw(elem, &buf, i)).collect();
                    let mut want: Vec<u64> = (0..n).map(|p| write_f64(elem, p as f64)).collect();
                    got.sort_unstable();
                    want.sort_unstable();
                    assert!(got == want, "{ctx}: the indices, each once");
                }
            }
        }
    }
}

#[test]
fn any_grid_writes_every_element_and_the_same_bytes() {
    for init in inits() {
        for elem in ALL {
            let Some(s) = spec(init, elem, 5_003, 9, 1) else { continue };
            let one = generate(s, 1);
            for threads in [3, 32, 256, 10_000] {
                assert!(generate(s, threads) == one, "{init} as {elem} on {threads} threads");
            }
            assert_eq!(check(&one, s, 7), NONE, "{init} as {elem}: an intact buffer passes");
        }
    }
}

fn mean_var(v: &[f64]) -> (f64, f64) {
    let n = v.len() as f64;
    let mean = v.iter().sum::<f64>() / n;
    (mean, v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n)
}

#[test]
fn normal_and_uniform_have_their_moments() {
    let n: u64 = 1 << 17;
    let sd = |s: f64| 5.0 * s / (n as f64).sqrt(); // five standard errors
    for elem in [ElemType::F64, ElemType::F32, ElemType::F16, ElemType::Bf16] {
        let v = values(elem, &generate(spec(Init::Normal { mean: 2.0, std: 3.0 }, elem, n, 1, 0).unwrap(), 256));
        let (mean, var) = mean_var(&v);
        assert!((mean - 2.0).abs() < sd(3.0), "{elem}: mean {mean}");
        assert!((var.sqrt() - 3.0).abs() < 0.03, "{elem}: std {}", var.sqrt());
        let within = v.iter().filter(|x| (**x - 2.0).abs() < 3.0).count() as f64 / n as f64;
        assert!((within - 0.682_689).abs() < 0.007, "{elem}: {within} within one std");
        let far = v.iter().filter(|x| (**x - 2.0).abs() > 6.0).count() as f64 / n as f64;
        assert!((far - 0.045_500).abs() < 0.004, "{elem}: {far} beyond two std");

        let v = values(elem, &generate(spec(Init::Uniform { lo: -3.0, hi: 5.0 }, elem, n, 1, 0).unwrap(), 256));
        let (mean, var) = mean_var(&v);
        assert!((mean - 1.0).abs() < sd(8.0 / 12f64.sqrt()), "{elem}: mean {mean}");
        assert!((var - 64.0 / 12.0).abs() < 0.07, "{elem}: var {var}");
        for (k, eighth) in
            (0..8).map(|k| (k, v.iter().filter(|&&x| x >= -3.0 + k as f64 && x < -2.0 + k as f64).count()))
        {
            let share = eighth as f64 / n as f64;
            assert!((share - 0.125).abs() < 0.006, "{elem}: {share} in eighth {k}");
        }
    }
}

#[test]
fn randint_covers_its_range_evenly() {
    let n: u64 = 1 << 17;
    let buf = generate(spec(Init::RandInt { lo: -7, hi: 100 }, ElemType::I32, n, 5, 2).unwrap(), 64);
    let mut counts = [0u64; 107];
    for i in 0..n as usize {
        counts[(int(ElemType::I32, &buf, i) + 7) as usize] += 1;
    }
    let expect = n as f64 / 107.0;
    assert!(counts.iter().all(|&c| (c as f64 - expect).abs() < 5.0 * expect.sqrt()), "{counts:?}");
    // The full i64 range: both signs, and the top bits as often set as not.
    let buf = generate(spec(Init::RandInt { lo: i64::MIN, hi: i64::MAX }, ElemType::I64, n, 5, 2).unwrap(), 64);
    let v: Vec<i128> = (0..n as usize).map(|i| int(ElemType::I64, &buf, i)).collect();
    let negative = v.iter().filter(|&&x| x < 0).count() as f64 / n as f64;
    let bit62 = v.iter().filter(|&&x| (x as i64 >> 62) & 1 == 1).count() as f64 / n as f64;
    assert!((negative - 0.5).abs() < 0.01 && (bit62 - 0.5).abs() < 0.01, "{negative} {bit62}");
}

#[test]
fn randperm_is_a_permutation_for_every_count() {
    let counts = (0..=300).chain([511, 512, 513, 1000, 4097, 65_535, 65_536, 65_537, (1 << 20) + 3]);
    for count in counts {
        for (elem, seed) in [(ElemType::U32, 1), (ElemType::I64, 2)] {
            let s = spec(Init::RandPerm, elem, count, seed, 4).unwrap();
            let buf = generate(s, 1000);
            let mut p: Vec<i128> = (0..count as usize).map(|i| int(elem, &buf, i)).collect();
            if count >= 16 {
                assert!(p.iter().enumerate().any(|(i, &v)| v != i as i128), "{count}: shuffled");
            }
            p.sort_unstable();
            assert!(p.iter().enumerate().all(|(i, &v)| v == i as i128), "{count} as {elem}: a permutation");
        }
    }
    // Looks random: few fixed points, no relation between position and value.
    let n = 1u64 << 16;
    let buf = generate(spec(Init::RandPerm, ElemType::U32, n, 3, 0).unwrap(), 256);
    let p: Vec<f64> = (0..n as usize).map(|i| int(ElemType::U32, &buf, i) as f64).collect();
    let fixed = p.iter().enumerate().filter(|(i, &v)| *i as f64 == v).count();
    assert!(fixed < 10, "{fixed} fixed points");
    let idx: Vec<f64> = (0..n).map(|i| i as f64).collect();
    assert!(correlation(&idx, &p).abs() < 5.0 / (n as f64).sqrt(), "position and value correlate");
}

fn correlation(x: &[f64], y: &[f64]) -> f64 {
    let (mx, vx) = mean_var(x);
    let (my, vy) = mean_var(y);
    x.iter().zip(y).map(|(a, b)| (a - mx) * (b - my)).sum::<f64>() / x.len() as f64 / (vx * vy).sqrt()
}

#[test]
fn seeds_streams_and_neighbours_are_independent() {
    let n: u64 = 1 << 16;
    let bound = 5.0 / (n as f64).sqrt();
    for init in [
        Init::Normal { mean: 0.0, std: 1.0 },
        Init::Uniform { lo: 0.0, hi: 1.0 },
        Init::RandInt { lo: 0, hi: 1000 },
        Init::RandPerm,
    ] {
        let elem = if init.check_fits(ElemType::F32).is_ok() && !matches!(init, Init::RandInt { .. }) {
            ElemType::F32
        } else {
            ElemType::I32
        };
        let set = |seed, stream| values(elem, &generate(spec(init, elem, n, seed, stream).unwrap(), 256));
        let base = set(1, 0);
        for (other, what) in [(set(1, 1), "stream"), (set(2, 0), "seed"), (set(u64::MAX, 0), "seed")] {
            assert!(base != other, "{init}: another {what} draws other data");
            let r = correlation(&base, &other);
            assert!(r.abs() < bound, "{init}: another {what} correlates ({r})");
        }
        let lag = correlation(&base[..n as usize - 1], &base[1..]);
        assert!(lag.abs() < bound, "{init}: neighbours correlate ({lag})");
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// An altered buffer fails its check at the first altered element, whatever the grid.
    #[test]
    fn check_finds_the_first_altered_element(
        init in prop::sample::select(inits()),
        elem in prop::sample::select(ALL.to_vec()),
        count in 1u64..3000,
        at in any::<prop::sample::Index>(),
        later in any::<prop::sample::Index>(),
        flip in any::<u64>(),
        threads in prop::sample::select(vec![1u64, 5, 64, 256, 5000]),
        seed in any::<u64>(),
    ) {
        let Some(s) = spec(init, elem, count, seed, 2) else { return Ok(()) };
        let mut buf = generate(s, threads);
        prop_assert_eq!(check(&buf, s, threads), NONE);
        let size = elem.size();
        let bits = 8 * size as u32;
        let flip = flip & if bits == 64 { u64::MAX } else { (1u64 << bits) - 1 };
        let flip = if flip == 0 { 1 } else { flip };
        let (i, j) = (at.index(count as usize), later.index(count as usize));
        for k in if j > i { vec![i, j] } else { vec![i] } {
            let b = raw(elem, &buf, k) ^ flip;
            buf[k * size..(k + 1) * size].copy_from_slice(&b.to_le_bytes()[..size]);
        }
        prop_assert_eq!(check(&buf, s, threads), i as u64);
        // A spec the kernels do not know never passes.
        prop_assert_eq!(check(&buf, GenSpec { dist: 99, ..s }, threads), 0);
    }
}

//! Input distributions (`init = "normal(0, 1)"`) and their seeded, parallel generation.
//!
//! Generation is split into fixed 64 Ki-element chunks, each with its own generator keyed
//! by ChaCha8 from (seed, argument, chunk), so the bytes are identical whatever the
//! number of threads: a check that fails on one machine fails the same way on another.

use super::types::ElemType;
use rand::{Rng, RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, Normal};
use serde::{Deserialize, Serialize};
use std::fmt;

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase", tag = "dist")]
pub enum Init {
    Normal {
        mean: f64,
        std: f64,
    },
    Uniform {
        lo: f64,
        hi: f64,
    },
    /// Integers in `lo..hi` (half-open).
    RandInt {
        lo: i64,
        hi: i64,
    },
    Const {
        value: f64,
    },
    /// 0, 1, 2, ... (for index buffers).
    Arange,
    /// A uniformly random permutation of 0..len (routing maps, gather indices).
    RandPerm,
}

pub const INIT_FORMS: &str =
    "normal(mean, std), uniform(lo, hi), randint(lo, hi), const(v), zeros, ones, arange, randperm";

/// Why an `init` spelling is refused, or does not fit its buffer's element type. `text` is
/// the spelling as written (trimmed).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum InitError {
    #[error("`{text}`: missing `)`; expected one of {INIT_FORMS}")]
    MissingParen { text: String },
    #[error("`{text}`: `{arg}` is not a number")]
    NotANumber { text: String, arg: String },
    #[error("`{text}`: `{value}` is not a finite number")]
    NotFinite { text: String, value: f64 },
    #[error("`{text}`: `{name}` takes {want} argument(s), got {got}")]
    Arity { text: String, name: String, want: usize, got: usize },
    #[error("`{text}`: the standard deviation must be positive")]
    StdNotPositive { text: String },
    #[error("`{text}`: needs lo < hi")]
    EmptyRange { text: String },
    #[error("`{text}`: hi - lo must be a finite number")]
    SpanNotFinite { text: String },
    #[error("`{text}`: needs integers lo < hi (hi is excluded)")]
    IntRange { text: String },
    #[error("`{text}`: lo and hi must lie within the 64-bit integer range")]
    Beyond64Bit { text: String },
    #[error("unknown distribution `{name}`; expected one of {INIT_FORMS}")]
    Unknown { name: String },
    #[error("{init} draws non-integers but the buffer holds {elem}")]
    NotIntegers { init: Init, elem: ElemType },
    #[error("{init} draws values outside the range of {elem}")]
    OutOfRange { init: Init, elem: ElemType },
}

impl Init {
    pub fn parse(text: &str) -> Result<Init, InitError> {
        let t = text.trim();
        let spelled = || t.to_string();
        let (name, args) = match t.find('(') {
            Some(open) => {
                let Some(inner) = t[open + 1..].strip_suffix(')') else {
                    return Err(InitError::MissingParen { text: spelled() });
                };
                let args = inner
                    .split(',')
                    .map(|a| {
                        a.trim()
                            .parse::<f64>()
                            .map_err(|_| InitError::NotANumber { text: spelled(), arg: a.trim().into() })
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                (t[..open].trim(), args)
            }
            None => (t, Vec::new()),
        };
        // `inf` and `nan` parse as numbers, but nothing can be drawn from them; and the
        // samplers panic on a uniform range wider than f64 or a randint bound past i64:
        // in the worker, mid-generation.
        if let Some(&value) = args.iter().find(|a| !a.is_finite()) {
            return Err(InitError::NotFinite { text: spelled(), value });
        }
        let want = |n: usize| -> Result<(), InitError> {
            if args.len() == n {
                Ok(())
            } else {
                Err(InitError::Arity { text: spelled(), name: name.into(), want: n, got: args.len() })
            }
        };
        let init = match name {
            "normal" => {
                want(2)?;
                if !(args[1] > 0.0 && args[1].is_finite()) {
                    return Err(InitError::StdNotPositive { text: spelled() });
                }
                Init::Normal { mean: args[0], std: args[1] }
            }
            "uniform" => {
                want(2)?;
                if args[0].partial_cmp(&args[1]) != Some(std::cmp::Ordering::Less) {
                    return Err(InitError::EmptyRange { text: spelled() });
                }
                if !(args[1] - args[0]).is_finite() {
                    return Err(InitError::SpanNotFinite { text: spelled() });
                }
                Init::Uniform { lo: args[0], hi: args[1] }
            }
            "randint" => {
                want(2)?;
                if args.iter().any(|a| a.fract() != 0.0)
                    || args[0].partial_cmp(&args[1]) != Some(std::cmp::Ordering::Less)
                {
                    return Err(InitError::IntRange { text: spelled() });
                }
                // Both bounds must survive the conversion to i64 unchanged (a saturated pair
                // would be an empty range).
                if args.iter().any(|&a| !(-(2f64.powi(63))..2f64.powi(63)).contains(&a)) {
                    return Err(InitError::Beyond64Bit { text: spelled() });
                }
                Init::RandInt { lo: args[0] as i64, hi: args[1] as i64 }
            }
            "const" => {
                want(1)?;
                Init::Const { value: args[0] }
            }
            "zeros" => {
                want(0)?;
                Init::Const { value: 0.0 }
            }
            "ones" => {
                want(0)?;
                Init::Const { value: 1.0 }
            }
            "arange" => {
                want(0)?;
                Init::Arange
            }
            "randperm" => {
                want(0)?;
                Init::RandPerm
            }
            other => return Err(InitError::Unknown { name: other.into() }),
        };
        Ok(init)
    }

    /// Whether every value this distribution draws is representable in `elem`.
    pub fn check_fits(&self, elem: ElemType) -> Result<(), InitError> {
        let (lo, hi) = match *self {
            Init::RandInt { lo, hi } => (lo as f64, (hi - 1) as f64),
            Init::Const { value } => (value, value),
            _ if elem.is_float() => return Ok(()),
            Init::Arange | Init::RandPerm => return Ok(()),
            _ => return Err(InitError::NotIntegers { init: *self, elem }),
        };
        let (min, max) = match elem {
            ElemType::I8 => (i8::MIN as f64, i8::MAX as f64),
            ElemType::U8 => (0.0, u8::MAX as f64),
            ElemType::I16 => (i16::MIN as f64, i16::MAX as f64),
            ElemType::U16 => (0.0, u16::MAX as f64),
            ElemType::I32 => (i32::MIN as f64, i32::MAX as f64),
            ElemType::U32 => (0.0, u32::MAX as f64),
            ElemType::U64 => (0.0, f64::MAX),
            _ => (f64::MIN, f64::MAX),
        };
        if lo < min || hi > max {
            return Err(InitError::OutOfRange { init: *self, elem });
        }
        Ok(())
    }
}

impl fmt::Display for Init {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Init::Normal { mean, std } => write!(f, "normal({mean}, {std})"),
            Init::Uniform { lo, hi } => write!(f, "uniform({lo}, {hi})"),
            Init::RandInt { lo, hi } => write!(f, "randint({lo}, {hi})"),
            Init::Const { value } => write!(f, "const({value})"),
            Init::Arange => f.write_str("arange"),
            Init::RandPerm => f.write_str("randperm"),
        }
    }
}

/// Elements per chunk: small enough that 16 threads share a bench-size buffer evenly,
/// large enough that a chunk's key (one ChaCha8 block) costs nothing beside its elements.
const CHUNK: usize = 1 << 16;

fn chunk_rng(seed: u64, stream: u64, chunk: u64) -> ChaCha8Rng {
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x6e69_6768_7473_6866);
    rng.set_stream(stream.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ chunk);
    rng
}

/// The generator inside one chunk: SplitMix64 (Steele, Lea and Flood 2014; passes
/// BigCrush), under half ChaCha8's cost per draw (a normal draw: 4.5 ns, not 8). It
/// starts from a ChaCha8 output, so reading a chunk tells nothing about the seed, other
/// chunks or other input sets. (The judge generates on the GPU, `wall::gpu::kernels`;
/// `tests/judge_kernels.rs` holds its distributions and conversions to this generator's.)
struct SplitMix64(u64);

impl SplitMix64 {
    fn for_chunk(seed: u64, stream: u64, chunk: u64) -> SplitMix64 {
        SplitMix64(chunk_rng(seed, stream, chunk).next_u64())
    }
}

impl RngCore for SplitMix64 {
    fn next_u32(&mut self) -> u32 {
        (self.next_u64() >> 32) as u32
    }

    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn fill_bytes(&mut self, dst: &mut [u8]) {
        for chunk in dst.chunks_mut(8) {
            let n = chunk.len();
            chunk.copy_from_slice(&self.next_u64().to_le_bytes()[..n]);
        }
    }
}

/// Writes `values` as the elements of `bytes`, converting exactly as
/// [`ElemType::write_f64`] does, with the type's dispatch outside the loop.
fn write_values(elem: ElemType, bytes: &mut [u8], values: &[f64]) {
    macro_rules! each {
        ($size:literal, $convert:expr) => {
            for (b, &v) in bytes.chunks_exact_mut($size).zip(values) {
                let le: [u8; $size] = $convert(v).to_le_bytes();
                b.copy_from_slice(&le);
            }
        };
    }
    match elem {
        ElemType::F32 => each!(4, |v: f64| v as f32),
        ElemType::F64 => each!(8, |v: f64| v),
        ElemType::F16 => each!(2, half::f16::from_f64),
        ElemType::Bf16 => each!(2, half::bf16::from_f64),
        ElemType::I8 => each!(1, |v: f64| v as i8),
        ElemType::U8 => each!(1, |v: f64| v as u8),
        ElemType::I16 => each!(2, |v: f64| v as i16),
        ElemType::U16 => each!(2, |v: f64| v as u16),
        ElemType::I32 => each!(4, |v: f64| v as i32),
        ElemType::U32 => each!(4, |v: f64| v as u32),
        ElemType::I64 => each!(8, |v: f64| v as i64),
        ElemType::U64 => each!(8, |v: f64| v as u64),
        ElemType::F8E4M3 => each!(1, |v: f64| float8::F8E4M3::from_f64(v).to_bits()),
        ElemType::F8E5M2 => each!(1, |v: f64| float8::F8E5M2::from_f64(v).to_bits()),
    }
}

/// Values are drawn this many at a time, then converted: a draw written straight into
/// its element type was a call per element (one closure inlined into twelve loops is
/// too big for the compiler), half again the cost of the draws themselves.
const BATCH: usize = 256;

/// Fills `len` elements of `elem` drawn from `init`, deterministically for
/// (`seed`, `stream`), using up to `threads` threads.
pub fn generate(init: Init, elem: ElemType, len: usize, seed: u64, stream: u64, threads: usize) -> Vec<u8> {
    let mut out = crate::hostmem::zeroed(len * elem.size());
    generate_into(init, elem, &mut out, seed, stream, threads);
    out
}

/// [`generate`] into a buffer the caller already has (a bench set's, reused for the
/// next set: faulting in a fresh buffer of hundreds of MB costs as much as filling it).
/// Every byte is overwritten; the bytes are those [`generate`] returns.
pub fn generate_into(init: Init, elem: ElemType, out: &mut [u8], seed: u64, stream: u64, threads: usize) {
    let size = elem.size();
    let len = out.len() / size;
    if let Init::RandPerm = init {
        // Fisher-Yates is sequential: one generator for the whole buffer.
        let mut perm: Vec<u64> = (0..len as u64).collect();
        let mut rng = SplitMix64::for_chunk(seed, stream, u64::MAX);
        for i in (1..len).rev() {
            let j = rng.random_range(0..=i);
            perm.swap(i, j);
        }
        let mut values = [0f64; BATCH];
        for (bytes, perm) in out.chunks_mut(BATCH * size).zip(perm.chunks(BATCH)) {
            for (v, &p) in values.iter_mut().zip(perm) {
                *v = p as f64;
            }
            write_values(elem, bytes, &values[..perm.len()]);
        }
        return;
    }
    let fill = |chunk_index: usize, bytes: &mut [u8]| {
        let mut rng = SplitMix64::for_chunk(seed, stream, chunk_index as u64);
        let mut values = [0f64; BATCH];
        for (k, bytes) in bytes.chunks_mut(BATCH * size).enumerate() {
            let values = &mut values[..bytes.len() / size];
            match init {
                Init::Normal { mean, std } => {
                    let dist = Normal::new(mean, std).expect("validated at parse time");
                    values.iter_mut().for_each(|v| *v = dist.sample(&mut rng));
                }
                Init::Uniform { lo, hi } => values.iter_mut().for_each(|v| *v = rng.random_range(lo..hi)),
                Init::RandInt { lo, hi } => values.iter_mut().for_each(|v| *v = rng.random_range(lo..hi) as f64),
                Init::Const { value } => values.fill(value),
                Init::Arange => {
                    let base = chunk_index * CHUNK + k * BATCH;
                    values.iter_mut().enumerate().for_each(|(i, v)| *v = (base + i) as f64);
                }
                Init::RandPerm => unreachable!("handled above"),
            }
            write_values(elem, bytes, values);
        }
    };
    let chunks = len.div_ceil(CHUNK);
    let threads = threads.clamp(1, chunks.max(1));
    if threads == 1 {
        for (i, c) in out.chunks_mut(CHUNK * size).enumerate() {
            fill(i, c);
        }
        return;
    }
    // Chunks are handed out as threads come for them, so a thread slowed by a busy core
    // (nvcc builds share them) takes fewer; each chunk's bytes depend on its index alone.
    let work = std::sync::Mutex::new(out.chunks_mut(CHUNK * size).enumerate());
    let next = || work.lock().unwrap_or_else(|p| p.into_inner()).next();
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                while let Some((i, c)) = next() {
                    fill(i, c);
                }
            });
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_documented_form() {
        assert_eq!(Init::parse("normal(0, 1)"), Ok(Init::Normal { mean: 0.0, std: 1.0 }));
        assert_eq!(Init::parse(" uniform(-1,1) "), Ok(Init::Uniform { lo: -1.0, hi: 1.0 }));
        assert_eq!(Init::parse("randint(0, 256)"), Ok(Init::RandInt { lo: 0, hi: 256 }));
        assert_eq!(Init::parse("zeros"), Ok(Init::Const { value: 0.0 }));
        assert_eq!(Init::parse("ones"), Ok(Init::Const { value: 1.0 }));
        assert_eq!(Init::parse("const(2.5)"), Ok(Init::Const { value: 2.5 }));
        assert_eq!(Init::parse("arange"), Ok(Init::Arange));
        assert_eq!(Init::parse("randperm"), Ok(Init::RandPerm));
    }

    #[test]
    fn bad_forms_say_what_is_expected() {
        assert!(Init::parse("gauss(0,1)").unwrap_err().to_string().contains("expected one of normal"));
        assert!(Init::parse("normal(0)").unwrap_err().to_string().contains("takes 2"));
        assert!(Init::parse("normal(0, -1)").unwrap_err().to_string().contains("positive"));
        assert!(Init::parse("uniform(1, 0)").unwrap_err().to_string().contains("lo < hi"));
        assert!(Init::parse("randint(0.5, 3)").unwrap_err().to_string().contains("integers"));
        assert!(Init::parse("normal(0, x)").unwrap_err().to_string().contains("`x` is not a number"));
        assert!(Init::parse("normal(0, 1").unwrap_err().to_string().contains("missing `)`"));
        assert!(Init::parse("uniform(0, inf)").unwrap_err().to_string().contains("not a finite number"));
        assert!(Init::parse("normal(nan, 1)").unwrap_err().to_string().contains("not a finite number"));
        assert!(Init::parse("uniform(-1e308, 1e308)").unwrap_err().to_string().contains("hi - lo"));
        assert!(Init::parse("randint(1e19, 2e19)").unwrap_err().to_string().contains("64-bit"));
        assert!(Init::parse("randint(-9223372036854775808, 0)").is_ok());
        assert!(Init::RandInt { lo: 0, hi: 300 }.check_fits(ElemType::U8).is_err());
        assert!(Init::Normal { mean: 0.0, std: 1.0 }.check_fits(ElemType::I32).is_err());
        assert!(Init::RandInt { lo: 0, hi: 256 }.check_fits(ElemType::U8).is_ok());
    }

    const EVERY_INIT: [Init; 6] = [
        Init::Normal { mean: 1.0, std: 2.0 },
        Init::Uniform { lo: -3.0, hi: 5.0 },
        Init::RandInt { lo: -7, hi: 100 },
        Init::Const { value: 3.0 },
        Init::Arange,
        Init::RandPerm,
    ];

    #[test]
    fn generation_is_independent_of_thread_count_and_seeded() {
        let n = 3 * CHUNK + 17;
        let a = generate(Init::Normal { mean: 0.0, std: 1.0 }, ElemType::F32, n, 7, 1, 1);
        let b = generate(Init::Normal { mean: 0.0, std: 1.0 }, ElemType::F32, n, 7, 1, 4);
        assert_eq!(a, b);
        for init in EVERY_INIT {
            for elem in [ElemType::F32, ElemType::Bf16, ElemType::I32, ElemType::U8] {
                if init.check_fits(elem).is_err() {
                    continue;
                }
                let one = generate(init, elem, n, 11, 3, 1);
                for threads in [2, 3, 16] {
                    assert!(one == generate(init, elem, n, 11, 3, threads), "{init} as {elem} on {threads} threads");
                }
                // Into a used buffer of another set: every byte is written, and the same.
                let mut reused = generate(init, elem, n, 12, 3, 2);
                generate_into(init, elem, &mut reused, 11, 3, 5);
                assert!(one == reused, "{init} as {elem} into a used buffer");
            }
        }
        let c = generate(Init::Normal { mean: 0.0, std: 1.0 }, ElemType::F32, n, 8, 1, 4);
        assert_ne!(a, c, "another seed draws other data");
        let d = generate(Init::Normal { mean: 0.0, std: 1.0 }, ElemType::F32, n, 7, 2, 4);
        assert_ne!(a, d, "another argument draws other data");
    }

    #[test]
    fn distributions_have_the_declared_shape() {
        let n = 200_000;
        let bytes = generate(Init::Normal { mean: 2.0, std: 3.0 }, ElemType::F64, n, 1, 0, 2);
        let v: Vec<f64> = (0..n).map(|i| ElemType::F64.read_f64(&bytes, i)).collect();
        let mean = v.iter().sum::<f64>() / n as f64;
        let var = v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n as f64;
        assert!((mean - 2.0).abs() < 0.05, "mean {mean}");
        assert!((var.sqrt() - 3.0).abs() < 0.05, "std {}", var.sqrt());

        let bytes = generate(Init::RandInt { lo: 3, hi: 7 }, ElemType::I32, 10_000, 1, 0, 1);
        let ints: Vec<f64> = (0..10_000).map(|i| ElemType::I32.read_f64(&bytes, i)).collect();
        assert!(ints.iter().all(|x| (3.0..7.0).contains(x)));
        for k in 3..7 {
            assert!(ints.contains(&(k as f64)), "{k} is drawn");
        }

        let bytes = generate(Init::Uniform { lo: -3.0, hi: 5.0 }, ElemType::F64, n, 1, 0, 2);
        let v: Vec<f64> = (0..n).map(|i| ElemType::F64.read_f64(&bytes, i)).collect();
        assert!(v.iter().all(|x| (-3.0..=5.0).contains(x)));
        let mean = v.iter().sum::<f64>() / n as f64;
        assert!((mean - 1.0).abs() < 0.03, "mean {mean}");
        let low = v.iter().filter(|&&x| x < -2.0).count() as f64 / n as f64;
        assert!((low - 1.0 / 8.0).abs() < 0.01, "share in the lowest eighth {low}");

        let n = 2 * CHUNK + 5;
        let bytes = generate(Init::Arange, ElemType::I32, n, 1, 0, 3);
        assert!((0..n).all(|i| ElemType::I32.read_f64(&bytes, i) == i as f64));
        let bytes = generate(Init::Const { value: -2.5 }, ElemType::F16, n, 1, 0, 3);
        assert!((0..n).all(|i| ElemType::F16.read_f64(&bytes, i) == -2.5));

        // Chunks draw from their own keys: no chunk repeats the one before it.
        let bytes = generate(Init::Uniform { lo: 0.0, hi: 1.0 }, ElemType::F32, n, 1, 0, 1);
        let (first, second) = (&bytes[..4 * CHUNK], &bytes[4 * CHUNK..8 * CHUNK]);
        assert_ne!(first[..400], second[..400]);

        let bytes = generate(Init::RandPerm, ElemType::I32, 1000, 5, 0, 1);
        let mut perm: Vec<i64> = (0..1000).map(|i| ElemType::I32.read_f64(&bytes, i) as i64).collect();
        assert_ne!(perm, (0..1000).collect::<Vec<_>>(), "shuffled");
        perm.sort();
        assert_eq!(perm, (0..1000).collect::<Vec<_>>(), "a permutation");
    }

    #[test]
    fn values_are_written_as_write_f64_writes_them() {
        let values = [0.0, -0.0, 1.5, -2.5, 255.7, 256.0, -129.0, 65_504.0, 1e10, -1e20, 3.1e38, f64::NAN, 1e-8];
        for elem in [
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
        ] {
            let mut expected = vec![0u8; values.len() * elem.size()];
            for (i, &v) in values.iter().enumerate() {
                elem.write_f64(&mut expected, i, v);
            }
            let mut got = vec![0xEEu8; values.len() * elem.size()];
            write_values(elem, &mut got, &values);
            assert_eq!(got, expected, "{elem}");
        }
    }
}

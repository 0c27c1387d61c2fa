//! Input distributions (`init = "normal(0, 1)"`) and their seeded, parallel generation.
//!
//! Generation is split into fixed 1 Mi-element chunks, each with its own ChaCha8 stream
//! derived from (seed, argument, chunk), so the bytes are identical whatever the number
//! of threads: a check that fails on one machine fails the same way on another.

use super::types::ElemType;
use rand::{Rng, SeedableRng};
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

impl Init {
    pub fn parse(text: &str) -> Result<Init, String> {
        let t = text.trim();
        let (name, args) = match t.find('(') {
            Some(open) => {
                let Some(inner) = t[open + 1..].strip_suffix(')') else {
                    return Err(format!("`{t}`: missing `)`; expected one of {INIT_FORMS}"));
                };
                let args = inner
                    .split(',')
                    .map(|a| a.trim().parse::<f64>().map_err(|_| format!("`{t}`: `{}` is not a number", a.trim())))
                    .collect::<Result<Vec<_>, _>>()?;
                (t[..open].trim(), args)
            }
            None => (t, Vec::new()),
        };
        let want = |n: usize| -> Result<(), String> {
            if args.len() == n {
                Ok(())
            } else {
                Err(format!("`{t}`: `{name}` takes {n} argument(s), got {}", args.len()))
            }
        };
        let init = match name {
            "normal" => {
                want(2)?;
                if !(args[1] > 0.0 && args[1].is_finite()) {
                    return Err(format!("`{t}`: the standard deviation must be positive"));
                }
                Init::Normal { mean: args[0], std: args[1] }
            }
            "uniform" => {
                want(2)?;
                if args[0].partial_cmp(&args[1]) != Some(std::cmp::Ordering::Less) {
                    return Err(format!("`{t}`: needs lo < hi"));
                }
                Init::Uniform { lo: args[0], hi: args[1] }
            }
            "randint" => {
                want(2)?;
                if args.iter().any(|a| a.fract() != 0.0)
                    || args[0].partial_cmp(&args[1]) != Some(std::cmp::Ordering::Less)
                {
                    return Err(format!("`{t}`: needs integers lo < hi (hi is excluded)"));
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
            other => return Err(format!("unknown distribution `{other}`; expected one of {INIT_FORMS}")),
        };
        Ok(init)
    }

    /// Whether every value this distribution draws is representable in `elem`.
    pub fn check_fits(&self, elem: ElemType) -> Result<(), String> {
        let (lo, hi) = match *self {
            Init::RandInt { lo, hi } => (lo as f64, (hi - 1) as f64),
            Init::Const { value } => (value, value),
            _ if elem.is_float() => return Ok(()),
            Init::Arange | Init::RandPerm => return Ok(()),
            _ => return Err(format!("{self} draws non-integers but the buffer holds {elem}")),
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
            return Err(format!("{self} draws values outside the range of {elem}"));
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

const CHUNK: usize = 1 << 20;

fn chunk_rng(seed: u64, stream: u64, chunk: u64) -> ChaCha8Rng {
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x6e69_6768_7473_6866);
    rng.set_stream(stream.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ chunk);
    rng
}

/// Fills `len` elements of `elem` drawn from `init`, deterministically for
/// (`seed`, `stream`), using up to `threads` threads.
pub fn generate(init: Init, elem: ElemType, len: usize, seed: u64, stream: u64, threads: usize) -> Vec<u8> {
    let size = elem.size();
    let mut out = vec![0u8; len * size];
    if let Init::RandPerm = init {
        let mut perm: Vec<u64> = (0..len as u64).collect();
        let mut rng = chunk_rng(seed, stream, u64::MAX);
        for i in (1..len).rev() {
            let j = rng.random_range(0..=i);
            perm.swap(i, j);
        }
        for (i, v) in perm.into_iter().enumerate() {
            elem.write_f64(&mut out, i, v as f64);
        }
        return out;
    }
    let fill = |chunk_index: usize, bytes: &mut [u8]| {
        let mut rng = chunk_rng(seed, stream, chunk_index as u64);
        let base = chunk_index * CHUNK;
        let n = bytes.len() / size;
        match init {
            Init::Normal { mean, std } => {
                let dist = Normal::new(mean, std).expect("validated at parse time");
                for i in 0..n {
                    elem.write_f64(bytes, i, dist.sample(&mut rng));
                }
            }
            Init::Uniform { lo, hi } => {
                for i in 0..n {
                    elem.write_f64(bytes, i, rng.random_range(lo..hi));
                }
            }
            Init::RandInt { lo, hi } => {
                for i in 0..n {
                    elem.write_f64(bytes, i, rng.random_range(lo..hi) as f64);
                }
            }
            Init::Const { value } => {
                for i in 0..n {
                    elem.write_f64(bytes, i, value);
                }
            }
            Init::Arange => {
                for i in 0..n {
                    elem.write_f64(bytes, i, (base + i) as f64);
                }
            }
            Init::RandPerm => unreachable!("handled above"),
        }
    };
    let chunks: Vec<(usize, &mut [u8])> = out.chunks_mut(CHUNK * size).enumerate().collect();
    let threads = threads.max(1).min(chunks.len().max(1));
    if threads <= 1 {
        for (i, c) in chunks {
            fill(i, c);
        }
        return out;
    }
    let mut per_thread: Vec<Vec<(usize, &mut [u8])>> = (0..threads).map(|_| Vec::new()).collect();
    for (k, item) in chunks.into_iter().enumerate() {
        per_thread[k % threads].push(item);
    }
    std::thread::scope(|s| {
        for work in per_thread {
            s.spawn(|| {
                for (i, c) in work {
                    fill(i, c);
                }
            });
        }
    });
    out
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
        assert!(Init::parse("gauss(0,1)").unwrap_err().contains("expected one of normal"));
        assert!(Init::parse("normal(0)").unwrap_err().contains("takes 2"));
        assert!(Init::parse("normal(0, -1)").unwrap_err().contains("positive"));
        assert!(Init::parse("uniform(1, 0)").unwrap_err().contains("lo < hi"));
        assert!(Init::parse("randint(0.5, 3)").unwrap_err().contains("integers"));
        assert!(Init::parse("normal(0, x)").unwrap_err().contains("`x` is not a number"));
        assert!(Init::parse("normal(0, 1").unwrap_err().contains("missing `)`"));
        assert!(Init::RandInt { lo: 0, hi: 300 }.check_fits(ElemType::U8).is_err());
        assert!(Init::Normal { mean: 0.0, std: 1.0 }.check_fits(ElemType::I32).is_err());
        assert!(Init::RandInt { lo: 0, hi: 256 }.check_fits(ElemType::U8).is_ok());
    }

    #[test]
    fn generation_is_independent_of_thread_count_and_seeded() {
        let n = 3 * CHUNK + 17;
        let a = generate(Init::Normal { mean: 0.0, std: 1.0 }, ElemType::F32, n, 7, 1, 1);
        let b = generate(Init::Normal { mean: 0.0, std: 1.0 }, ElemType::F32, n, 7, 1, 4);
        assert_eq!(a, b);
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

        let bytes = generate(Init::RandPerm, ElemType::I32, 1000, 5, 0, 1);
        let mut perm: Vec<i64> = (0..1000).map(|i| ElemType::I32.read_f64(&bytes, i) as i64).collect();
        assert_ne!(perm, (0..1000).collect::<Vec<_>>(), "shuffled");
        perm.sort();
        assert_eq!(perm, (0..1000).collect::<Vec<_>>(), "a permutation");
    }
}

//! What the benchmarks share: a deterministic generator, so that every run measures the same
//! data (no `rand`: figures must not depend on where a seed came from).

// Each bench uses part of this module.
#![allow(dead_code)]

/// xorshift64*: deterministic, dependency-free.
pub struct Gen(pub u64);

impl Gen {
    pub fn new(seed: u64) -> Self {
        Self(seed)
    }

    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// A number in `0..n`.
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    /// A number in `lo..hi`.
    pub fn between(&mut self, lo: usize, hi: usize) -> usize {
        lo + self.below(hi - lo)
    }

    pub fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len())]
    }

    pub fn hex(&mut self, digits: usize) -> String {
        (0..digits)
            .map(|_| char::from_digit((self.next() % 16) as u32, 16).expect("hex digit"))
            .collect()
    }
}

//! A 128-bit running hash of 64-bit words ([`hash_step`]): the structural keys of parser rows,
//! key-set states and whole masks.

#[inline]
fn mix64(mut x: u64) -> u64 {
    // splitmix64 finaliser
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58476d1ce4e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d049bb133111eb);
    x ^ (x >> 31)
}

/// Combines `v` into a 128-bit running hash (two independent 64-bit lanes).
#[inline]
pub(crate) fn hash_step(h: u128, v: u64) -> u128 {
    let lo = mix64((h as u64) ^ v.wrapping_mul(0x9e3779b97f4a7c15));
    let hi = mix64(((h >> 64) as u64).wrapping_add(v ^ 0x5851f42d4c957f2d).rotate_left(17));
    ((hi as u128) << 64) | lo as u128
}

//! Filling many matchers' masks at once on the rayon thread pool.

use crate::error::{Error, Result};
use crate::matcher::Matcher;
use rayon::prelude::*;

/// Fills `mask` rows for several matchers in parallel: matcher `i` writes row `rows[i]` of
/// `mask` (rows of `words` words each). Rows must be distinct and in range.
pub fn fill_batch(matchers: &mut [&mut Matcher], mask: &mut [u32], words: usize, rows: &[usize]) -> Result<()> {
    if matchers.len() != rows.len() {
        return Err(Error::Usage(format!("{} matchers but {} row indices", matchers.len(), rows.len())));
    }
    if words == 0 || mask.len() % words != 0 {
        return Err(Error::Usage("bitmask rows are empty or ragged".into()));
    }
    let n_rows = mask.len() / words;
    let mut slot: Vec<Option<&mut [u32]>> = mask.chunks_mut(words).map(Some).collect();
    let mut jobs: Vec<(&mut Matcher, &mut [u32])> = Vec::with_capacity(rows.len());
    for (m, &r) in matchers.iter_mut().zip(rows) {
        if r >= n_rows {
            return Err(Error::Usage(format!("row index {r} is out of range for a bitmask with {n_rows} rows")));
        }
        let Some(row) = slot[r].take() else {
            return Err(Error::Usage(format!("row index {r} appears twice")));
        };
        jobs.push((&mut **m, row));
    }
    if jobs.len() <= 1 {
        for (m, row) in jobs {
            m.fill_next_token_bitmask(row)?;
        }
        return Ok(());
    }
    jobs.into_par_iter().try_for_each(|(m, row)| m.fill_next_token_bitmask(row))
}

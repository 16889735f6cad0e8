//! Profiles the compile of chosen schemas inside a warm process: each stdin line is the path
//! of a JSONSchemaBench-style file; the others warm the process-wide caches as a serving
//! process would be, and those prefixed with `!` are compiled with `perf` enabled only around
//! the compile: `perf record --control fifo:CTL,ACK -- sh -c 'for i in $(seq 30); do
//! compile_prof < list; done'` with `PERF_CTL=CTL PERF_ACK=ACK` in the environment (each
//! process ends with perf enabled, so perf sees where the next one's code is mapped).
//! Prints the profiled compiles' times and minor page faults. `THRASH=MB` writes that many
//! megabytes before each profiled compile (cold CPU caches, as after the benchmark's garbage
//! collection). Two experiments on where a first compile's page faults go (session 17: the
//! first compile of o60295 faults in ~1 MB, 170–255 faults at ~4 µs each on the benchmark
//! VM, its re-compiles none): `PREFAULT=MB` allocates, touches and frees that much before
//! each profiled compile, `POPULATE=MB` faults in (`MADV_POPULATE_WRITE`) that much after a
//! fresh small allocation's address. Neither reliably removed the faults (o60295 250 →
//! 56–207): the allocator does not grow where either guesses. `AHEAD_KB=KB` faults in that
//! much after every resident run of the allocator's arena (found with `mincore`): the faults
//! go (o60295 253 → 18, 2.21 → 1.90 ms median of six), but the arena holds tens of runs, and
//! the same done on the extension's background thread after compiles and cache-missing fills
//! cost the Python benchmark loop 236 MB of peak RSS; extending only the runs that grew cost
//! 30 MB and kept only part of the gain (session 17; not adopted).
use corral_schema::{compile_schema, Options};
use std::io::{BufRead, Read, Write};
use std::time::Instant;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Sends one command to perf's control fifo and waits for its acknowledgement.
fn perf(cmd: &str) {
    let (Ok(ctl), Ok(ack)) = (std::env::var("PERF_CTL"), std::env::var("PERF_ACK")) else { return };
    std::fs::OpenOptions::new().write(true).open(ctl).unwrap().write_all(format!("{cmd}\n").as_bytes()).unwrap();
    let mut buf = [0u8; 5];
    let _ = std::fs::File::open(ack).unwrap().read(&mut buf);
}

/// Minor page faults of this process so far (`/proc/self/stat`; 0 where it cannot be read).
fn minflt() -> i64 {
    let s = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let rest = s.rsplit_once(')').map(|x| x.1).unwrap_or("");
    rest.split_whitespace().nth(7).and_then(|v| v.parse().ok()).unwrap_or(0)
}

/// The anonymous mapping holding a fresh heap allocation (the allocator's arena), from
/// `/proc/self/maps`.
fn arena_region() -> Option<(usize, usize)> {
    let probe = Box::new(0u64);
    let a = &*probe as *const u64 as usize;
    let maps = std::fs::read_to_string("/proc/self/maps").ok()?;
    for l in maps.lines() {
        let range = l.split_whitespace().next()?;
        let (lo, hi) = range.split_once('-')?;
        let (lo, hi) = (usize::from_str_radix(lo, 16).ok()?, usize::from_str_radix(hi, 16).ok()?);
        if lo <= a && a < hi {
            return Some((lo, hi));
        }
    }
    None
}

/// Faults in up to `kb` KiB after each resident run of the arena (where it grows next).
fn populate_ahead(kb: usize) {
    let Some((lo, hi)) = arena_region() else { return };
    let n = (hi - lo) / 4096;
    let mut v = vec![0u8; n];
    // SAFETY: mincore only reads the page tables of this mapping.
    if unsafe { libc::mincore(lo as *mut libc::c_void, hi - lo, v.as_mut_ptr()) } != 0 {
        return;
    }
    let k = kb / 4;
    let mut i = 1;
    let mut done = 0;
    while i < n && done < 16 {
        if v[i - 1] & 1 == 1 && v[i] & 1 == 0 {
            let len = k.min(n - i);
            // SAFETY: MADV_POPULATE_WRITE faults pages in without changing their contents.
            unsafe { libc::madvise((lo + i * 4096) as *mut libc::c_void, len * 4096, libc::MADV_POPULATE_WRITE) };
            done += 1;
            i += len;
        }
        i += 1;
    }
}

fn main() {
    perf("disable");
    let opts = Options::default();
    // `THRASH=MB`: write that many megabytes before each profiled compile.
    let mut thrash: Option<Vec<u64>> = std::env::var("THRASH").ok().map(|v| vec![1u64; v.parse::<usize>().unwrap_or(64) << 17]);
    // `PREFAULT=MB`: allocate, touch and free that many megabytes before each profiled compile.
    let prefault: Option<usize> = std::env::var("PREFAULT").ok().and_then(|v| v.parse().ok());
    let ahead: Option<usize> = std::env::var("AHEAD_KB").ok().and_then(|v| v.parse().ok());
    let populate: Option<usize> = std::env::var("POPULATE").ok().and_then(|v| v.parse().ok());
    for line in std::io::stdin().lock().lines() {
        let line = line.unwrap();
        let (prof, path) = match line.strip_prefix('!') {
            Some(p) => (true, p.to_string()),
            None => (false, line),
        };
        let doc: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        if !prof {
            let _ = compile_schema(&doc["schema"], &opts);
            continue;
        }
        if let Some(t) = thrash.as_mut() {
            // (Cold CPU caches, as after the benchmark's garbage collection.)
            for (i, w) in t.iter_mut().enumerate() {
                *w = w.wrapping_add(i as u64);
            }
            std::hint::black_box(&t);
        }
        if let Some(mb) = prefault {
            // Touch and free that much memory first (does the allocator reuse it?).
            let blocks: Vec<Vec<u8>> = (0..mb).map(|_| vec![1u8; 1 << 20]).collect();
            std::hint::black_box(&blocks);
        }
        if let Some(mb) = populate {
            // Fault in the memory after a fresh allocation's (where the heap grows next?).
            let probe = vec![0u8; 8192];
            let a = (probe.as_ptr() as usize) & !4095;
            // SAFETY: MADV_POPULATE_WRITE faults pages in without changing their contents.
            let rc = unsafe { libc::madvise(a as *mut libc::c_void, mb << 20, libc::MADV_POPULATE_WRITE) };
            if rc != 0 { eprintln!("populate: {}", std::io::Error::last_os_error()); }
        }
        if let Some(kb) = ahead {
            populate_ahead(kb);
        }
        let f0 = minflt();
        perf("enable");
        let t = Instant::now();
        let r = compile_schema(&doc["schema"], &opts);
        let e = t.elapsed();
        perf("disable");
        let faults = minflt() - f0;
        println!("{path}: {e:?} {} {faults} faults", if r.is_ok() { "ok" } else { "err" });
    }
    // Enabled again for the next process's start, so perf sees where its code is mapped.
    perf("enable");
}

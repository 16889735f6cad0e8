//! Process-wide ids for terminal languages, so caches keyed by (terminal, DFA state) are
//! shared by every grammar that contains the same terminal (e.g. JSON string contents).

use crate::rx::Rx;
use rustc_hash::FxHashMap;
use std::sync::{Mutex, OnceLock};

fn table() -> &'static Mutex<FxHashMap<Rx, u32>> {
    static T: OnceLock<Mutex<FxHashMap<Rx, u32>>> = OnceLock::new();
    T.get_or_init(|| Mutex::new(FxHashMap::default()))
}

/// The process-wide id of the language of `rx` (structurally equal expressions share an id;
/// DFA construction is deterministic, so equal ids mean identical automata and state numbers).
pub fn terminal_id(rx: &Rx) -> u32 {
    let mut t = table().lock().unwrap_or_else(|p| p.into_inner());
    if let Some(&id) = t.get(rx) {
        return id;
    }
    let id = t.len() as u32;
    t.insert(rx.clone(), id);
    id
}

//! A tokenizer's vocabulary as the matcher sees it: token id to exact bytes, special and
//! end-of-sequence ids, the model-side size (padding included), and the token trie.

use crate::frontend::token_class::{TokenClass, TokenRef};
use crate::runtime::error::{Error, Result};
use crate::vocab::ci_cache::CiCache;
use crate::vocab::toktrie::TokTrie;

/// Token id to bytes, built once per tokenizer and shared (`Send + Sync`). Besides the
/// immutable token data it owns the cache of token sets per lexer configuration, shared by
/// every grammar compiled against it.
#[derive(Debug)]
pub struct Vocabulary {
    tokens: Vec<Vec<u8>>,
    special: Vec<bool>,
    eos: Vec<u32>,
    size: usize,
    trie: TokTrie,
    fingerprint: u64,
    cache: std::sync::Arc<CiCache>,
    /// Added and special tokens by name ([`Vocabulary::with_token_names`]).
    names: std::collections::HashMap<String, u32>,
}

/// A vocabulary's token-set cache has no cap of its own by default: the process's memory
/// budget bounds it with every other cache ([`crate::runtime::memory`]).
pub(crate) const DEFAULT_CACHE_BUDGET: usize = usize::MAX;

impl Vocabulary {
    /// Builds a vocabulary.
    ///
    /// * `tokens[i]` are the bytes token `i` stands for (empty: never produced by a grammar).
    /// * `eos` ids are allowed exactly when the grammar can end; they may lie in the padding.
    /// * `special` ids are never produced by a grammar (EOS aside).
    /// * `size` is the model's logits width (`None` = `tokens.len()`); ids past the tokenizer are masked.
    pub fn new(tokens: Vec<Vec<u8>>, eos: Vec<u32>, special: Vec<u32>, size: Option<usize>) -> Result<Vocabulary> {
        let n = tokens.len();
        let size = size.unwrap_or(n);
        if size < n {
            return Err(Error::Vocabulary(format!(
                "vocab_size={size} is smaller than the tokenizer's {n} tokens; the model's logits must cover every token"
            )));
        }
        if n == 0 {
            return Err(Error::Vocabulary("the vocabulary has no tokens".into()));
        }
        for &e in &eos {
            if e as usize >= size {
                return Err(Error::Vocabulary(format!("EOS token id {e} is out of range for vocab_size={size}")));
            }
        }
        let mut is_special = vec![false; n];
        for &s in special.iter().chain(eos.iter()) {
            if (s as usize) < n {
                is_special[s as usize] = true;
            } else if !eos.contains(&s) {
                return Err(Error::Vocabulary(format!("special token id {s} is out of range for {n} tokens")));
            }
        }
        let mut eos = eos;
        eos.sort_unstable();
        eos.dedup();
        let trie = TokTrie::build(tokens.iter().enumerate().filter(|(i, _)| !is_special[*i]).map(|(i, b)| (i as u32, b.as_slice()))).with_below_sets();
        // Part of the one-time preprocessing, so no mask fill pays for it.
        trie.plain_slice();
        // FNV-1a over everything that affects masks.
        let mut h: u64 = 0xcbf29ce484222325;
        let mut mix = |bytes: &[u8]| {
            for &b in bytes {
                h ^= b as u64;
                h = h.wrapping_mul(0x100000001b3);
            }
        };
        for (i, t) in tokens.iter().enumerate() {
            mix(&(t.len() as u32).to_le_bytes());
            mix(t);
            mix(&[is_special[i] as u8]);
        }
        for e in &eos {
            mix(&e.to_le_bytes());
        }
        mix(&(size as u64).to_le_bytes());
        Ok(Vocabulary { tokens, special: is_special, eos, size, trie, fingerprint: h, cache: CiCache::new(DEFAULT_CACHE_BUDGET), names: Default::default() })
    }

    /// Model-side vocabulary size (logits width).
    pub fn size(&self) -> usize {
        self.size
    }

    /// Number of tokens the tokenizer defines.
    pub fn num_tokens(&self) -> usize {
        self.tokens.len()
    }

    /// Words in one bitmask row: `ceil(size / 32)`.
    pub fn mask_words(&self) -> usize {
        self.size.div_ceil(32)
    }

    /// End-of-sequence ids, sorted.
    pub fn eos_token_ids(&self) -> &[u32] {
        &self.eos
    }

    /// Whether `id` is an EOS id.
    #[inline]
    pub fn is_eos(&self, id: u32) -> bool {
        self.eos.binary_search(&id).is_ok()
    }

    /// Whether `id` is special (never produced by a grammar; EOS aside). Padding ids count as special.
    pub fn is_special(&self, id: u32) -> bool {
        self.special.get(id as usize).copied().unwrap_or(true)
    }

    /// Bytes of token `id` (empty for padding and ids without bytes).
    pub fn token_bytes(&self, id: u32) -> &[u8] {
        self.tokens.get(id as usize).map(|t| t.as_slice()).unwrap_or(&[])
    }

    /// The token trie (special tokens excluded).
    pub fn trie(&self) -> &TokTrie {
        &self.trie
    }

    /// This vocabulary with a token-set cache of at most `bytes` of its own, besides the
    /// process's memory budget (default: no cap of its own); when full it evicts its oldest
    /// entries. For tests that make the cache evict often.
    pub fn with_cache_budget(mut self, bytes: usize) -> Vocabulary {
        self.cache = CiCache::new(bytes);
        self
    }

    /// This vocabulary with names for its added and special tokens (`<|eot_id|>`,
    /// `[TOOL_CALLS]`): grammars that name tokens ([`crate::frontend::token_class`]) find them by these.
    /// A special token has no bytes, so without its name a grammar can name it only by id.
    /// Ids past the tokenizer are ignored.
    pub fn with_token_names(mut self, names: Vec<(String, u32)>) -> Vocabulary {
        let n = self.tokens.len() as u32;
        let mut h = self.fingerprint;
        let mut sorted: Vec<&(String, u32)> = names.iter().filter(|(_, id)| *id < n).collect();
        sorted.sort();
        for (name, id) in sorted {
            for &b in name.as_bytes().iter().chain(&id.to_le_bytes()) {
                h ^= b as u64;
                h = h.wrapping_mul(0x100000001b3);
            }
        }
        self.fingerprint = h;
        self.names = names.into_iter().filter(|(_, id)| *id < n).collect();
        self
    }

    /// The id of the token named `name`: an added or special token of that name
    /// ([`Vocabulary::with_token_names`]), else the lowest-numbered token whose bytes are
    /// exactly `name`.
    pub fn token_id(&self, name: &str) -> Option<u32> {
        if let Some(&id) = self.names.get(name) {
            return Some(id);
        }
        self.tokens.iter().position(|t| t.as_slice() == name.as_bytes()).map(|i| i as u32)
    }

    /// The shared cache of token sets per lexer configuration.
    pub fn cache(&self) -> &CiCache {
        &self.cache
    }

    /// A hash of everything that affects masks; equal vocabularies have equal fingerprints.
    pub fn fingerprint(&self) -> u64 {
        self.fingerprint
    }

    /// Heap bytes used.
    pub fn memory_bytes(&self) -> usize {
        self.tokens.iter().map(|t| t.capacity() + 24).sum::<usize>() + self.special.len() + self.trie.memory_bytes()
    }

    /// Checks a token id against the model-side size.
    pub fn check_id(&self, id: u32) -> Result<()> {
        if (id as usize) < self.size {
            Ok(())
        } else {
            Err(Error::Usage(format!("token id {id} is out of range for a vocabulary of size {}", self.size)))
        }
    }
}

/// A grammar's token classes ([`crate::frontend::token_class`]) resolved against a vocabulary.
impl TokenClass {
    /// The class's token ids as a bitmask of `vocab.mask_words()` words. Errors name a token
    /// the vocabulary lacks or an id outside it.
    pub fn resolve(&self, vocab: &Vocabulary) -> Result<Vec<u32>> {
        let words = vocab.mask_words();
        let n = vocab.num_tokens() as u32;
        let mut listed = vec![0u32; words];
        let refs = match self {
            TokenClass::OneOf(v) | TokenClass::AllBut(v) => v,
        };
        for r in refs {
            let (lo, hi) = match r {
                TokenRef::Id(i) => (*i, *i),
                TokenRef::Range(a, b) => (*a, *b),
                TokenRef::Name(name) => {
                    let id = vocab.token_id(name).ok_or_else(|| Error::Vocabulary(format!("the grammar names token {name:?}, which the vocabulary has neither as an added or special token nor as a token's text")))?;
                    (id, id)
                }
            };
            if lo > hi || hi >= n {
                return Err(Error::Vocabulary(format!("the grammar names token {r}, outside the vocabulary's {n} token ids")));
            }
            for i in lo..=hi {
                listed[i as usize / 32] |= 1 << (i % 32);
            }
        }
        if let TokenClass::AllBut(_) = self {
            for (i, w) in listed.iter_mut().enumerate() {
                // Ids past the tokenizer (padding) stay out.
                let lo = i as u32 * 32;
                let valid = if lo + 32 <= n { u32::MAX } else if lo >= n { 0 } else { (1u32 << (n - lo)) - 1 };
                *w = !*w & valid;
            }
            for &e in vocab.eos_token_ids() {
                if e < n {
                    listed[e as usize / 32] &= !(1 << (e % 32));
                }
            }
        }
        Ok(listed)
    }
}

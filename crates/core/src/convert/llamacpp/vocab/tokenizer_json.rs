//! `tokenizer.json`, read as far as the export needs it and streamed, never held as a JSON
//! tree: the vocabulary as `(token, id)` pairs, the merges as gguf-py writes them, the added
//! tokens, and the three small objects the export inspects (`pre_tokenizer`, `normalizer`,
//! `post_processor`) as JSON. Every other key is skipped unread.
//!
//! Memory: a JSON tree costs ~12 times the text of a vocabulary (a `BTreeMap` entry per
//! token) and ~16 times an array of small numbers; this form costs about twice the
//! vocabulary's and merges' text (a `String` per token or merge), and nothing for keys it
//! skips. A small object over [`MAX_SUBTREE_BYTES`] is refused.
//!
//! Values of the wrong kind are kept as the JSON accessors (`as_str`, `as_u64`) would see
//! them (absent), so the checks and messages of the export are the same as over a tree.

use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;
use serde_json::Value as Json;
use std::fmt;

/// The most text one of the small objects may have (real ones are a few KiB; a SentencePiece
/// normalizer's `precompiled_charsmap` a few hundred): parsed as a tree, it costs up to ~16
/// times that.
pub const MAX_SUBTREE_BYTES: usize = 4 << 20;

/// What the export reads of `tokenizer.json`.
#[derive(Debug, Default)]
pub struct TokenizerJson {
    /// `model`, when it is an object.
    pub model: Option<TokenizerModel>,
    /// `added_tokens`, when it is a list.
    pub added_tokens: Option<Vec<AddedToken>>,
    pub pre_tokenizer: Option<Json>,
    pub normalizer: Option<Json>,
    pub post_processor: Option<Json>,
}

/// `model` of `tokenizer.json`.
#[derive(Debug, Default)]
pub struct TokenizerModel {
    /// `type`, when a string.
    pub kind: Option<String>,
    /// `byte_fallback`, when a boolean.
    pub byte_fallback: Option<bool>,
    /// `vocab`, when it is an object.
    pub vocab: Option<Vocabulary>,
    /// `merges`, when present: `Err` when it is not a list of strings or of string pairs.
    pub merges: Option<std::result::Result<Vec<String>, ()>>,
}

/// `model.vocab`: its entries with an integer id, in file order.
#[derive(Debug, Default)]
pub struct Vocabulary {
    pub entries: Vec<(String, u64)>,
    /// The first token whose id is not a non-negative integer.
    pub without_id: Option<String>,
}

/// An entry of `added_tokens` (`content` and `id` absent when not a string / an integer).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AddedToken {
    pub content: Option<String>,
    pub id: Option<i64>,
    /// `special`, false unless `true`.
    pub special: bool,
}

impl TokenizerJson {
    /// Parse the text of a `tokenizer.json`: `Ok(None)` when it is JSON but not an object;
    /// an error when it is not JSON, or a small object is too large (a `Data` error).
    pub fn parse(text: impl std::io::Read) -> serde_json::Result<Option<Self>> {
        let mut de = serde_json::Deserializer::from_reader(text);
        let parsed = object::<TokenizerJson>().deserialize(&mut de)?;
        de.end()?;
        Ok(parsed)
    }

    /// Parse `json` as its text would be.
    #[cfg(test)]
    pub fn from_value(json: &Json) -> serde_json::Result<Self> {
        let text = serde_json::to_vec(json)?;
        Self::parse(text.as_slice())?.ok_or_else(|| de::Error::custom("must hold a JSON object"))
    }

    /// `model.type`.
    pub fn kind(&self) -> Option<&str> {
        self.model.as_ref()?.kind.as_deref()
    }

    /// `added_tokens` (none when absent or not a list).
    pub fn added(&self) -> &[AddedToken] {
        self.added_tokens.as_deref().unwrap_or_default()
    }
}

/// Visitor methods for the kinds of JSON value a visitor does not read: each value of those
/// kinds is skipped unread and gives `$other`. `other_values!`: booleans, numbers and null;
/// `other_scalars!`: strings too; `other_lists!`, `other_objects!`.
macro_rules! other_values {
    ($other:expr) => {
        fn visit_bool<E: de::Error>(self, _: bool) -> std::result::Result<Self::Value, E> {
            Ok($other)
        }
        fn visit_i64<E: de::Error>(self, _: i64) -> std::result::Result<Self::Value, E> {
            Ok($other)
        }
        fn visit_u64<E: de::Error>(self, _: u64) -> std::result::Result<Self::Value, E> {
            Ok($other)
        }
        fn visit_f64<E: de::Error>(self, _: f64) -> std::result::Result<Self::Value, E> {
            Ok($other)
        }
        fn visit_unit<E: de::Error>(self) -> std::result::Result<Self::Value, E> {
            Ok($other)
        }
    };
}

macro_rules! other_scalars {
    ($other:expr) => {
        other_values!($other);
        fn visit_str<E: de::Error>(self, _: &str) -> std::result::Result<Self::Value, E> {
            Ok($other)
        }
    };
}

macro_rules! other_lists {
    ($other:expr) => {
        skip_container!(visit_seq, SeqAccess, $other);
    };
}

macro_rules! other_objects {
    ($other:expr) => {
        skip_container!(visit_map, MapAccess, $other);
    };
}

/// `$method` skipping a list or an object whole (through serde's `IgnoredAny`).
macro_rules! skip_container {
    ($method:ident, $access:ident, $other:expr) => {
        fn $method<A: $access<'de>>(self, access: A) -> std::result::Result<Self::Value, A::Error> {
            IgnoredAny.$method(access).map(|_| $other)
        }
    };
}

/// A visitor given every kind of value (`deserialize_any`).
struct Any<V>(V);

impl<'de, V: Visitor<'de>> DeserializeSeed<'de> for Any<V> {
    type Value = V::Value;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> std::result::Result<V::Value, D::Error> {
        d.deserialize_any(self.0)
    }
}

/// A value of which only a string, an integer or a boolean is kept.
enum Scalar {
    Str(String),
    Int(i64),
    UInt(u64),
    Bool(bool),
    Other,
}

impl Scalar {
    fn string(self) -> Option<String> {
        match self {
            Scalar::Str(s) => Some(s),
            _ => None,
        }
    }
    /// As `Value::as_u64`.
    fn u64(&self) -> Option<u64> {
        match *self {
            Scalar::UInt(n) => Some(n),
            Scalar::Int(n) => u64::try_from(n).ok(),
            _ => None,
        }
    }
    /// As `Value::as_i64`.
    fn i64(&self) -> Option<i64> {
        match *self {
            Scalar::Int(n) => Some(n),
            Scalar::UInt(n) => i64::try_from(n).ok(),
            _ => None,
        }
    }
    fn bool(&self) -> Option<bool> {
        match *self {
            Scalar::Bool(b) => Some(b),
            _ => None,
        }
    }
}

impl<'de> de::Deserialize<'de> for Scalar {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Scalar;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_bool<E: de::Error>(self, b: bool) -> std::result::Result<Scalar, E> {
                Ok(Scalar::Bool(b))
            }
            fn visit_i64<E: de::Error>(self, n: i64) -> std::result::Result<Scalar, E> {
                Ok(Scalar::Int(n))
            }
            fn visit_u64<E: de::Error>(self, n: u64) -> std::result::Result<Scalar, E> {
                Ok(Scalar::UInt(n))
            }
            fn visit_f64<E: de::Error>(self, _: f64) -> std::result::Result<Scalar, E> {
                Ok(Scalar::Other)
            }
            fn visit_str<E: de::Error>(self, s: &str) -> std::result::Result<Scalar, E> {
                Ok(Scalar::Str(s.to_string()))
            }
            fn visit_string<E: de::Error>(self, s: String) -> std::result::Result<Scalar, E> {
                Ok(Scalar::Str(s))
            }
            fn visit_unit<E: de::Error>(self) -> std::result::Result<Scalar, E> {
                Ok(Scalar::Other)
            }
            other_lists!(Scalar::Other);
            other_objects!(Scalar::Other);
        }
        d.deserialize_any(V)
    }
}

/// Read a small object's text, refused past [`MAX_SUBTREE_BYTES`], as JSON.
fn subtree<'de, A: MapAccess<'de>>(map: &mut A, key: &str) -> std::result::Result<Json, A::Error> {
    let raw: Box<RawValue> = map.next_value()?;
    let text = raw.get();
    if text.len() > MAX_SUBTREE_BYTES {
        return Err(de::Error::custom(format!(
            "'{key}' is {} bytes, more than the {MAX_SUBTREE_BYTES} read",
            text.len()
        )));
    }
    serde_json::from_str(text).map_err(de::Error::custom)
}

/// A JSON object read key by key into `Self`; the keys it does not take are skipped unread.
trait Fields: Default {
    /// Read the value of `key` from `map` if `Self` takes it (`false`: it does not).
    fn read<'de, A: MapAccess<'de>>(
        &mut self,
        key: String,
        map: &mut A,
    ) -> std::result::Result<bool, A::Error>;

    /// The object has ended.
    fn end(&mut self) {}
}

/// An object read into `T` ([`Fields`]), or `None` for a value of another kind.
struct Object<T>(std::marker::PhantomData<T>);

fn object<T>() -> Any<Object<T>> {
    Any(Object(std::marker::PhantomData))
}

impl<'de, T: Fields> Visitor<'de> for Object<T> {
    type Value = Option<T>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an object")
    }
    fn visit_map<A: MapAccess<'de>>(
        self,
        mut map: A,
    ) -> std::result::Result<Self::Value, A::Error> {
        let mut t = T::default();
        while let Some(key) = map.next_key::<String>()? {
            if !t.read(key, &mut map)? {
                map.next_value::<IgnoredAny>()?;
            }
        }
        t.end();
        Ok(Some(t))
    }
    other_scalars!(None);
    other_lists!(None);
}

/// `impl Fields` for a struct read from the keys named: `$t`, the object it is read into
/// and the map, then `"key" => read its value`.
macro_rules! fields {
    ($t:ty, |$this:ident, $map:ident| { $($key:literal => $read:expr),* $(,)? }) => {
        impl Fields for $t {
            fn read<'de, A: MapAccess<'de>>(
                &mut self,
                key: String,
                $map: &mut A,
            ) -> std::result::Result<bool, A::Error> {
                let $this = self;
                match key.as_str() {
                    $($key => $read,)*
                    _ => return Ok(false),
                }
                Ok(true)
            }
        }
    };
}

fields!(TokenizerJson, |t, map| {
    "model" => t.model = map.next_value_seed(object())?,
    "added_tokens" => t.added_tokens = map.next_value_seed(Any(AddedTokens))?,
    "pre_tokenizer" => t.pre_tokenizer = Some(subtree(map, "pre_tokenizer")?),
    "normalizer" => t.normalizer = Some(subtree(map, "normalizer")?),
    "post_processor" => t.post_processor = Some(subtree(map, "post_processor")?),
});

fields!(TokenizerModel, |m, map| {
    "type" => m.kind = map.next_value::<Scalar>()?.string(),
    "byte_fallback" => m.byte_fallback = map.next_value::<Scalar>()?.bool(),
    "vocab" => m.vocab = map.next_value_seed(object())?,
    "merges" => m.merges = Some(map.next_value_seed(Any(MergesVisitor))?),
});

fields!(AddedToken, |a, map| {
    "content" => a.content = map.next_value::<Scalar>()?.string(),
    "id" => a.id = map.next_value::<Scalar>()?.i64(),
    "special" => a.special = map.next_value::<Scalar>()?.bool().unwrap_or(false),
});

/// `model.vocab`: every key a token, its value the id.
impl Fields for Vocabulary {
    fn read<'de, A: MapAccess<'de>>(
        &mut self,
        token: String,
        map: &mut A,
    ) -> std::result::Result<bool, A::Error> {
        match map.next_value::<Scalar>()?.u64() {
            Some(id) => self.entries.push((token, id)),
            None => {
                self.without_id.get_or_insert(token);
            }
        }
        Ok(true)
    }

    fn end(&mut self) {
        // Built by doubling: up to half of it unused, beside the lists read next.
        self.entries.shrink_to_fit();
    }
}

/// `model.merges`: a list of `"a b"` strings or `["a", "b"]` pairs (whose spaces gguf-py
/// encodes as U+0120 + 256, `Ġ` shifted, to keep `a b` parseable); `Err` for anything else.
struct MergesVisitor;

impl<'de> Visitor<'de> for MergesVisitor {
    type Value = std::result::Result<Vec<String>, ()>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a list of merges")
    }
    fn visit_seq<A: SeqAccess<'de>>(
        self,
        mut seq: A,
    ) -> std::result::Result<Self::Value, A::Error> {
        let mut out = Ok(Vec::new());
        while let Some(merge) = seq.next_element_seed(Any(MergeVisitor))? {
            match (&mut out, merge) {
                (Ok(list), Some(m)) => list.push(m),
                (out, _) => *out = Err(()),
            }
        }
        if let Ok(list) = &mut out {
            list.shrink_to_fit();
        }
        Ok(out)
    }
    other_scalars!(Err(()));
    other_objects!(Err(()));
}

/// One merge (see [`MergesVisitor`]), `None` when it is neither form.
struct MergeVisitor;

impl<'de> Visitor<'de> for MergeVisitor {
    type Value = Option<String>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a merge")
    }
    fn visit_str<E: de::Error>(self, s: &str) -> std::result::Result<Self::Value, E> {
        Ok(Some(s.to_string()))
    }
    fn visit_string<E: de::Error>(self, s: String) -> std::result::Result<Self::Value, E> {
        Ok(Some(s))
    }
    fn visit_seq<A: SeqAccess<'de>>(
        self,
        mut seq: A,
    ) -> std::result::Result<Self::Value, A::Error> {
        let mut parts = Vec::with_capacity(2);
        while let Some(part) = seq.next_element::<Scalar>()? {
            parts.push(part.string());
        }
        Ok(match parts.as_slice() {
            [Some(a), Some(b)] => {
                let escape = |s: &str| -> String {
                    s.chars()
                        .map(|c| if c == ' ' { '\u{120}' } else { c })
                        .collect()
                };
                Some(format!("{} {}", escape(a), escape(b)))
            }
            _ => None,
        })
    }
    other_values!(None);
    other_objects!(None);
}

/// `added_tokens`: a list, or anything else (`None`).
struct AddedTokens;

impl<'de> Visitor<'de> for AddedTokens {
    type Value = Option<Vec<AddedToken>>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a list of added tokens")
    }
    fn visit_seq<A: SeqAccess<'de>>(
        self,
        mut seq: A,
    ) -> std::result::Result<Self::Value, A::Error> {
        let mut out = Vec::new();
        // An entry that is not an object has no content and no id.
        while let Some(token) = seq.next_element_seed(object::<AddedToken>())? {
            out.push(token.unwrap_or_default());
        }
        Ok(Some(out))
    }
    other_scalars!(None);
    other_objects!(None);
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse(json: Json) -> TokenizerJson {
        TokenizerJson::from_value(&json).unwrap()
    }

    #[test]
    fn reads_what_the_export_needs_and_skips_the_rest() {
        let t = parse(json!({
            "version": "1.0", "truncation": null, "decoder": {"type": "ByteLevel", "big": [1, 2, 3]},
            "added_tokens": [{"id": 5, "content": "<|x|>", "special": true, "lstrip": false},
                             {"id": -1, "content": 7}, "junk"],
            "normalizer": {"type": "NFC"}, "pre_tokenizer": null,
            "post_processor": {"type": "ByteLevel"},
            "model": {"type": "BPE", "byte_fallback": false, "dropout": null,
                      "vocab": {"a": 0, "b": 1.0, "c": -2, "d": 3},
                      "merges": [["a", "b c"], "d e"]}
        }));
        assert_eq!(t.kind(), Some("BPE"));
        let m = t.model.as_ref().unwrap();
        assert_eq!(m.byte_fallback, Some(false));
        let v = m.vocab.as_ref().unwrap();
        assert_eq!(v.entries, [("a".to_string(), 0), ("d".to_string(), 3)]);
        assert_eq!(v.without_id.as_deref(), Some("b"));
        assert_eq!(m.merges, Some(Ok(vec!["a b\u{120}c".into(), "d e".into()])));
        assert_eq!(
            t.added(),
            [
                AddedToken {
                    content: Some("<|x|>".into()),
                    id: Some(5),
                    special: true
                },
                AddedToken {
                    content: None,
                    id: Some(-1),
                    special: false
                },
                AddedToken::default()
            ]
        );
        assert_eq!(t.normalizer, Some(json!({"type": "NFC"})));
        assert_eq!(t.pre_tokenizer, Some(Json::Null));
        assert_eq!(t.post_processor, Some(json!({"type": "ByteLevel"})));
    }

    #[test]
    fn values_of_the_wrong_kind_read_as_absent() {
        let t = parse(
            json!({"model": {"type": 3, "vocab": [["a", 0.5]], "merges": [1]},
                             "added_tokens": {}}),
        );
        let m = t.model.as_ref().unwrap();
        assert_eq!(m.kind, None);
        assert!(m.vocab.is_none());
        assert_eq!(m.merges, Some(Err(())));
        assert!(t.added_tokens.is_none());
        for merges in [
            json!("a b"),
            json!([["a"]]),
            json!([["a", 1]]),
            json!([["a", "b", "c"]]),
        ] {
            let t = parse(json!({"model": {"merges": merges}}));
            assert_eq!(t.model.unwrap().merges, Some(Err(())), "{merges}");
        }
        assert!(parse(json!({"model": []})).model.is_none());
        assert!(TokenizerJson::parse(&b"[1, 2]"[..]).unwrap().is_none());
        assert!(TokenizerJson::parse(&b"{\"model\": "[..]).is_err());
        assert!(TokenizerJson::parse(&b"{} x"[..]).is_err());
    }

    #[test]
    fn a_large_small_object_is_refused() {
        let big = "1,".repeat(MAX_SUBTREE_BYTES / 2 + 1);
        let text = format!("{{\"post_processor\": [{big}1]}}");
        let e = TokenizerJson::parse(text.as_bytes()).unwrap_err();
        assert_eq!(e.classify(), serde_json::error::Category::Data);
        assert!(e.to_string().contains("'post_processor' is"), "{e}");
        // A large key the export does not read costs nothing and is no error.
        let text = format!("{{\"decoder\": [{big}1], \"model\": {{\"type\": \"BPE\"}}}}");
        assert_eq!(
            TokenizerJson::parse(text.as_bytes())
                .unwrap()
                .unwrap()
                .kind(),
            Some("BPE")
        );
    }
}

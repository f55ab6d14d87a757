//! The rules of a model directory, as functions over names and bytes: which files are looked
//! for and in what order, what a shard name may be, how `config.json` and a sharded index
//! are read, how shards must agree with their index, and the messages when they do not.
//!
//! Local directories ([`super::ModelDir`]) and remote ones (`lib/remote.js`, through the
//! binding) both apply exactly these, so the same listing gets the same verdict and message
//! wherever it is read from. Errors carry no path: each caller attaches its own (a file
//! path, or a URL).

use crate::error::{CoreError, Result};
use crate::names;
use std::collections::BTreeMap;
use std::fmt::Write;

pub const CONFIG_FILE: &str = "config.json";
pub const INDEX_FILE: &str = "model.safetensors.index.json";
/// A PyTorch checkpoint (`torch.save` of a state dict), and the index of its shards.
pub const PYTORCH_FILE: &str = "pytorch_model.bin";
pub const PYTORCH_INDEX_FILE: &str = "pytorch_model.bin.index.json";

/// The most of `config.json` read (ERR_INVALID_MODEL past it): real ones are a few KiB.
pub const CONFIG_MAX_BYTES: u64 = 16 << 20;
/// The most of a sharded index read (ERR_INVALID_MODEL past it): the largest public ones
/// (~90,000 tensors) are under 10 MiB.
pub const INDEX_MAX_BYTES: u64 = 64 << 20;

/// The files of a model directory besides its config and weights that say how to use it:
/// tokenizers, chat templates, generation and processor settings, sentence-transformers'
/// modules and pooling. A save copies them from the model's own directory; a copy of a remote
/// directory (what `convert` of a URL or a model id reads) fetches them.
pub const COMPANION_FILES: [&str; 17] = [
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "added_tokens.json",
    "tokenizer.model",
    "spiece.model",
    "sentencepiece.bpe.model",
    "vocab.txt",
    "vocab.json",
    "merges.txt",
    "chat_template.jinja",
    "chat_template.json",
    "generation_config.json",
    "preprocessor_config.json",
    "processor_config.json",
    "modules.json",
    "1_Pooling/config.json",
];

/// The most of one companion file copied (the largest tokenizers are ~35 MB; no reader of
/// them reads more than 128 MiB).
pub const COMPANION_MAX_BYTES: u64 = 512 << 20;

/// How a candidate weight file holds the weights.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// One weights file, of whatever format its bytes are.
    File,
    /// A JSON index (`{"weight_map": {tensor: shard}}`) naming shard files beside it.
    Sharded,
}

impl Layout {
    pub fn name(self) -> &'static str {
        match self {
            Layout::File => "file",
            Layout::Sharded => "sharded",
        }
    }
}

/// A weight file looked for in a model directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Candidate {
    pub file: &'static str,
    pub layout: Layout,
}

/// The weight files of a model directory, in discovery order: the first present wins
/// (SafeTensors first, then PyTorch, as transformers prefers them; weights.mlx last).
pub const DISCOVERY: [Candidate; 6] = [
    Candidate {
        file: "weights.safetensors",
        layout: Layout::File,
    },
    Candidate {
        file: "model.safetensors",
        layout: Layout::File,
    },
    Candidate {
        file: INDEX_FILE,
        layout: Layout::Sharded,
    },
    Candidate {
        file: PYTORCH_FILE,
        layout: Layout::File,
    },
    Candidate {
        file: PYTORCH_INDEX_FILE,
        layout: Layout::Sharded,
    },
    Candidate {
        file: "weights.mlx",
        layout: Layout::File,
    },
];

/// `config.json`'s contents: a JSON object, keys as written.
pub fn parse_config(bytes: &[u8]) -> Result<serde_json::Value> {
    let config: serde_json::Value = serde_json::from_slice(bytes)
        .map_err(|e| CoreError::invalid_model(format!("config.json is not valid JSON: {e}")))?;
    if !config.is_object() {
        return Err(CoreError::invalid_model(
            "config.json must hold a JSON object",
        ));
    }
    Ok(config)
}

/// A sharded index: which shard holds each tensor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShardIndex {
    /// Tensor → shard, as the index lists them.
    pub weight_map: BTreeMap<String, String>,
    /// The shards, each once, in name order (`model-00001-of-…`, `model-00002-of-…`): the
    /// order they are opened and served in.
    pub shards: Vec<String>,
}

impl ShardIndex {
    /// Where `shard` is in [`shards`](Self::shards).
    pub fn position(&self, shard: &str) -> Option<usize> {
        self.shards.binary_search_by(|s| s.as_str().cmp(shard)).ok()
    }
}

#[derive(serde::Deserialize)]
struct RawIndex {
    weight_map: BTreeMap<String, String>,
}

/// Parse a sharded index and check every shard name (see [`check_shard_name`]).
pub fn parse_index(bytes: &[u8]) -> Result<ShardIndex> {
    let raw: RawIndex = serde_json::from_slice(bytes).map_err(|e| {
        CoreError::invalid_model(format!(
            "not a valid sharded index ({{\"weight_map\": {{tensor: file}}}}): {e}"
        ))
    })?;
    let shards: std::collections::BTreeSet<&String> = raw.weight_map.values().collect();
    let shards: Vec<String> = shards.into_iter().cloned().collect();
    for name in &shards {
        check_shard_name(name)?;
    }
    Ok(ShardIndex {
        weight_map: raw.weight_map,
        shards,
    })
}

/// A shard name is a plain relative path: `/`-separated names, none of them empty, `.` or
/// `..`, none holding a control character or starting or ending with whitespace
/// ([`names::unprintable`]: a URL parser deletes TAB, LF and CR, so `.\t.` would climb and
/// `\t/\t/host` name another host); no leading `/`, backslash, URL scheme (`x:`) or
/// percent-encoded `.`/`/`/`\` (which a URL would decode into one). One spelling per file, so
/// a name means the same file locally and under a base URL ([`shard_url`]). (Symlinks
/// inside the directory are the directory's own business: only names that come from the
/// index are checked here.)
pub fn check_shard_name(name: &str) -> Result<()> {
    let scheme = name.split_once(':').is_some_and(|(s, _)| {
        s.bytes().next().is_some_and(|b| b.is_ascii_alphabetic())
            && s.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"+.-".contains(&b))
    });
    let lower = name.to_ascii_lowercase();
    let bad = name.is_empty()
        || name.starts_with('/')
        || name.contains('\\')
        || scheme
        || lower.contains("%2e")
        || lower.contains("%2f")
        || lower.contains("%5c")
        || name.split('/').any(|part| {
            part.is_empty() || part == "." || part == ".." || names::unprintable(part).is_some()
        });
    if bad {
        return Err(CoreError::unsafe_path(format!(
            "'{}' is not a plain relative path inside the model directory",
            names::printable(name)
        )));
    }
    Ok(())
}

/// The bytes a shard URL keeps as they are: what huggingface_hub's `quote` keeps (RFC 3986's
/// unreserved characters, and `/` between names).
fn url_keeps(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"-._~/".contains(&b)
}

/// The URL of the shard `name` (checked by [`check_shard_name`] first) of the model whose
/// files lie under `base`: an absolute `http(s)://` URL whose path ends in `/` (its query
/// and fragment, if any, are dropped, as resolving a relative path drops them).
///
/// Every byte of `name` but `A-Z a-z 0-9 - . _ ~ /` is percent-encoded (`%` too), so the
/// result is `base`'s path followed by exactly `name`: no segment a URL parser reads as `.`
/// or `..` (literally or as `%2e`), nothing it deletes or strips, no `?` or `#` ending the
/// path early, no `\` it reads as `/`. It stays under `base` (same origin, path below
/// `base`'s) whatever parser reads it, and the server, decoding it once, sees the name the
/// index wrote, as a local directory does.
pub fn shard_url(base: &str, name: &str) -> Result<String> {
    check_shard_name(name)?;
    let base = base.split(['?', '#']).next().unwrap_or_default();
    let lower = base.to_ascii_lowercase();
    let rest = lower
        .strip_prefix("http://")
        .or_else(|| lower.strip_prefix("https://"));
    let directory =
        rest.is_some_and(|r| r.find('/').is_some_and(|slash| slash > 0)) && base.ends_with('/');
    if !directory {
        // Not echoed: a base URL may carry credentials (`user:password@`).
        return Err(CoreError::invalid_argument(
            "the base of a shard URL must be an http(s) URL whose path ends in '/'",
        ));
    }
    let mut url = String::with_capacity(base.len() + name.len() * 3);
    url.push_str(base);
    for &b in name.as_bytes() {
        if url_keeps(b) {
            url.push(char::from(b));
        } else {
            let _ = write!(url, "%{b:02X}");
        }
    }
    Ok(url)
}

/// No candidate of [`DISCOVERY`] is present.
pub fn no_weights() -> CoreError {
    let names: Vec<&str> = DISCOVERY.iter().map(|c| c.file).collect();
    let (last, rest) = names.split_last().unwrap_or((&"", &[]));
    CoreError::no_weights(format!(
        "no weight file found; looked for {} and {last}",
        rest.join(", ")
    ))
}

/// A shard the index names does not exist.
pub fn shard_missing() -> CoreError {
    CoreError::invalid_model(format!("shard listed in {INDEX_FILE} is missing"))
}

/// A shard exists but could not be opened: its error (`code`, message without path and
/// tensor, tensor) says why.
pub fn shard_failed(shard: &str, code: &str, detail: &str, tensor: Option<&str>) -> CoreError {
    let e = CoreError::invalid_model(format!(
        "shard '{shard}' failed validation: [{code}] {detail}"
    ));
    match tensor {
        Some(t) => e.with_tensor(t),
        None => e,
    }
}

/// The index places `tensor` in `shard`, which does not hold it.
pub fn tensor_not_in_shard(tensor: &str, shard: &str) -> CoreError {
    CoreError::invalid_model(format!(
        "{INDEX_FILE} places this tensor in '{shard}', which does not hold it"
    ))
    .with_tensor(tensor)
}

/// `tensor` is stored in two shards.
pub fn tensor_in_two_shards(tensor: &str, first: &str, second: &str) -> CoreError {
    CoreError::invalid_model(format!(
        "tensor is stored in two shards: '{first}' and '{second}'"
    ))
    .with_tensor(tensor)
}

/// One opened shard, as [`assemble`] sees it.
#[derive(Debug, Clone, Default)]
pub struct ShardListing<'a> {
    /// Its tensors, in its own order.
    pub tensors: Vec<&'a str>,
}

/// The tensors of shards opened in [`ShardIndex::shards`] order, checked against the index:
/// every tensor the index lists must be in the shard it names, and no tensor may be in two shards (tensors a shard holds
/// beyond the index are served too, as loaders do). Returns each tensor with its shard's
/// position, in serving order (shard by shard, each in its own order); an error names the
/// shard it concerns (for the caller to make a path of).
pub fn assemble<'a>(
    index: &ShardIndex,
    shards: &[ShardListing<'a>],
) -> std::result::Result<Vec<(&'a str, usize)>, (CoreError, String)> {
    let held: std::collections::HashSet<(&str, usize)> = shards
        .iter()
        .enumerate()
        .flat_map(|(i, s)| s.tensors.iter().map(move |&n| (n, i)))
        .collect();
    for (tensor, shard) in &index.weight_map {
        let holds = index
            .position(shard)
            .is_some_and(|i| held.contains(&(tensor.as_str(), i)));
        if !holds {
            return Err((tensor_not_in_shard(tensor, shard), shard.clone()));
        }
    }
    let mut seen: std::collections::HashMap<&str, usize> =
        std::collections::HashMap::with_capacity(held.len());
    let mut order = Vec::with_capacity(held.len());
    for (i, shard) in shards.iter().enumerate() {
        for &name in &shard.tensors {
            if let Some(&first) = seen.get(name) {
                let shard = index.shards[i].clone();
                return Err((
                    tensor_in_two_shards(name, &index.shards[first], &shard),
                    shard,
                ));
            }
            seen.insert(name, i);
            order.push((name, i));
        }
    }
    Ok(order)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shard_names_are_plain_relative_paths_with_one_spelling() {
        for ok in [
            "model-00001-of-00002.safetensors",
            "sub/dir/shard.safetensors",
            "weird name (1).safetensors",
            "a..b.safetensors",
            "1:2.safetensors",
        ] {
            assert!(check_shard_name(ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            "/abs.safetensors",
            "../up.safetensors",
            "a/../../up.safetensors",
            "./a.safetensors",
            "a/./b.safetensors",
            "a//b.safetensors",
            "a/",
            "a\\b.safetensors",
            "http:x.safetensors",
            "C:model.safetensors",
            "%2e%2e/x.safetensors",
            "a%2Fb.safetensors",
            "..",
            ".",
        ] {
            let e = check_shard_name(bad).unwrap_err();
            assert_eq!(e.code(), "ERR_UNSAFE_PATH", "{bad:?}");
            assert_eq!(
                e.detail(),
                format!("'{bad}' is not a plain relative path inside the model directory")
            );
        }
        // What a URL parser deletes or strips (TAB, LF, CR anywhere; C0 and space at either
        // end) would make another host or a parent directory of these; shown escaped.
        for (bad, shown) in [
            (
                "\t/\t/evil:8080/x.safetensors",
                "\\t/\\t/evil:8080/x.safetensors",
            ),
            (".\t./x.safetensors", ".\\t./x.safetensors"),
            ("a/.\n./.\r./x", "a/.\\n./.\\r./x"),
            ("x.safetensors\u{7f}", "x.safetensors\\x7f"),
            ("x\u{1b}[2J", "x\\x1b[2J"),
            ("a\0b", "a\\x00b"),
            (" x.safetensors", " x.safetensors"),
            ("x.safetensors ", "x.safetensors "),
            ("a /x.safetensors", "a /x.safetensors"),
            ("a/ x.safetensors", "a/ x.safetensors"),
        ] {
            let e = check_shard_name(bad).unwrap_err();
            assert_eq!(e.code(), "ERR_UNSAFE_PATH", "{bad:?}");
            assert_eq!(
                e.detail(),
                format!("'{shown}' is not a plain relative path inside the model directory")
            );
        }
    }

    #[test]
    fn shard_urls_name_the_shard_under_the_base() {
        let base = "https://host:8080/org/m/resolve/0123/";
        for (name, want) in [
            (
                "model-00001-of-00002.safetensors",
                "model-00001-of-00002.safetensors",
            ),
            ("sub/dir/x.safetensors", "sub/dir/x.safetensors"),
            (
                "weird name (1).safetensors",
                "weird%20name%20%281%29.safetensors",
            ),
            ("a?b#c.safetensors", "a%3Fb%23c.safetensors"),
            ("%41.safetensors", "%2541.safetensors"),
            ("1:2@h.safetensors", "1%3A2%40h.safetensors"),
            ("é.safetensors", "%C3%A9.safetensors"),
        ] {
            assert_eq!(
                shard_url(base, name).unwrap(),
                format!("{base}{want}"),
                "{name}"
            );
        }
        // A base's query and fragment are not part of its directory.
        assert_eq!(
            shard_url("http://h/m/?sig=1#top", "x").unwrap(),
            "http://h/m/x"
        );
        for bad in ["..", ".\t./x", "\t/\t/evil/x", "/x", "%2e%2e/x"] {
            assert_eq!(
                shard_url(base, bad).unwrap_err().code(),
                "ERR_UNSAFE_PATH",
                "{bad:?}"
            );
        }
        for base in [
            "http://h/m",
            "ftp://h/m/",
            "http:///m/",
            "h/m/",
            "http://h?x/",
        ] {
            assert_eq!(
                shard_url(base, "x").unwrap_err().code(),
                "ERR_INVALID_ARGUMENT",
                "{base}"
            );
        }
    }

    #[test]
    fn an_index_lists_its_shards_once_in_name_order() {
        let index = parse_index(
            br#"{"metadata": {"total_size": 3}, "weight_map": {"z": "b.st", "y": "a.st", "x": "b.st"}}"#,
        )
        .unwrap();
        assert_eq!(index.shards, ["a.st", "b.st"]);
        assert_eq!(index.position("b.st"), Some(1));
        for bad in [&b"[]"[..], b"{}", br#"{"weight_map": {"a": 1}}"#, b"{"] {
            let e = parse_index(bad).unwrap_err();
            assert_eq!(e.code(), "ERR_INVALID_MODEL");
            assert!(e.detail().starts_with("not a valid sharded index"), "{e}");
        }
        let e = parse_index(br#"{"weight_map": {"a": "../x"}}"#).unwrap_err();
        assert_eq!(e.code(), "ERR_UNSAFE_PATH");
        assert_eq!(parse_config(b"{\"a\": 1}").unwrap()["a"], 1);
        assert_eq!(
            parse_config(b"[1]").unwrap_err().detail(),
            "config.json must hold a JSON object"
        );
        assert!(parse_config(b"{")
            .unwrap_err()
            .detail()
            .starts_with("config.json is not valid JSON"));
    }

    #[test]
    fn shards_must_agree_with_their_index() {
        let index = parse_index(br#"{"weight_map": {"x": "a", "y": "b"}}"#).unwrap();
        let shards = |lists: &[&[&'static str]]| -> Vec<ShardListing<'static>> {
            lists
                .iter()
                .map(|t| ShardListing {
                    tensors: t.to_vec(),
                })
                .collect()
        };
        let order = assemble(&index, &shards(&[&["x", "extra"], &["y"]])).unwrap();
        assert_eq!(order, [("x", 0), ("extra", 0), ("y", 1)]);
        let (e, shard) = assemble(&index, &shards(&[&["x"], &["z"]])).unwrap_err();
        assert_eq!((e.tensor(), shard.as_str()), (Some("y"), "b"));
        assert_eq!(
            e.detail(),
            "model.safetensors.index.json places this tensor in 'b', which does not hold it"
        );
        let (e, shard) = assemble(&index, &shards(&[&["x", "y"], &["y"]])).unwrap_err();
        assert_eq!((e.tensor(), shard.as_str()), (Some("y"), "b"));
        assert_eq!(e.detail(), "tensor is stored in two shards: 'a' and 'b'");
        assert_eq!(
            no_weights().detail(),
            "no weight file found; looked for weights.safetensors, model.safetensors, \
             model.safetensors.index.json, pytorch_model.bin, pytorch_model.bin.index.json \
             and weights.mlx"
        );
    }
}

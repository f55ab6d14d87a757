//! The model-directory rules of the core (`stcore::pretrained::layout`), for the HTTP layer
//! in `lib/remote.js`: it fetches, these decide, so a remote directory gets exactly the
//! verdicts and messages a local one does.

use crate::args::{bytes_arg, with_view};
use crate::convert::Json;
use crate::error::{guard, invalid_argument, CoreResult, OrThrow};
use napi::bindgen_prelude::*;
use napi::Env;
use napi_derive::napi;
use stcore::pretrained::layout::{self, ShardListing, DISCOVERY};

#[napi(object, object_from_js = false)]
pub struct LayoutCandidate {
    pub file: String,
    #[napi(ts_type = "'file' | 'sharded'")]
    pub layout: String,
}

#[napi(object, object_from_js = false)]
pub struct ModelLayout {
    pub config_file: String,
    /// Weight files in discovery order: the first present wins.
    pub discovery: Vec<LayoutCandidate>,
    /// The most of config.json read.
    pub config_max_bytes: f64,
    /// The most of a sharded index read.
    pub index_max_bytes: f64,
    /// The files beside config and weights that say how to use the model (tokenizers,
    /// templates, generation settings), relative to the directory.
    pub companion_files: Vec<String>,
    /// The most of one companion file copied.
    pub companion_max_bytes: f64,
}

/// The files of a model directory and their discovery order.
#[napi(catch_unwind)]
pub fn model_layout(env: Env) -> napi::Result<ModelLayout> {
    guard(&env, "modelLayout", || {
        Ok(ModelLayout {
            config_file: layout::CONFIG_FILE.to_string(),
            discovery: DISCOVERY
                .iter()
                .map(|c| LayoutCandidate {
                    file: c.file.to_string(),
                    layout: c.layout.name().to_string(),
                })
                .collect(),
            config_max_bytes: layout::CONFIG_MAX_BYTES as f64,
            index_max_bytes: layout::INDEX_MAX_BYTES as f64,
            companion_files: layout::COMPANION_FILES
                .iter()
                .map(|f| f.to_string())
                .collect(),
            companion_max_bytes: layout::COMPANION_MAX_BYTES as f64,
        })
    })
}

/// `config.json`'s object (keys as written), or ERR_INVALID_MODEL.
#[napi(
    catch_unwind,
    strict,
    ts_args_type = "bytes: Uint8Array",
    ts_return_type = "Record<string, unknown>"
)]
pub fn parse_model_config(env: Env, bytes: Unknown) -> napi::Result<Json> {
    guard(&env, "parseModelConfig", || {
        let run = || {
            let bytes = bytes_arg(&bytes, "bytes")?;
            with_view(&bytes, layout::parse_config)
        };
        run().map(Json).or_throw(&env)
    })
}

/// The shard names of a sharded index, each once, in the order they are opened; a name that
/// is not a plain relative path is ERR_UNSAFE_PATH.
#[napi(catch_unwind, strict, ts_args_type = "bytes: Uint8Array")]
pub fn parse_shard_index(env: Env, bytes: Unknown) -> napi::Result<Vec<String>> {
    guard(&env, "parseShardIndex", || {
        let run = || {
            let bytes = bytes_arg(&bytes, "bytes")?;
            with_view(&bytes, layout::parse_index).map(|i| i.shards)
        };
        run().or_throw(&env)
    })
}

/// The URL of the shard `name` of the model whose files lie under `base` (an http(s) URL
/// ending in `/`): the name checked (ERR_UNSAFE_PATH) and percent-encoded, so the URL stays
/// under `base` whatever its parser deletes or decodes.
#[napi(catch_unwind, strict)]
pub fn shard_url(env: Env, base: String, name: String) -> napi::Result<String> {
    guard(&env, "shardUrl", || {
        layout::shard_url(&base, &name).or_throw(&env)
    })
}

#[napi(object, object_to_js = false)]
pub struct OpenedShard {
    /// Where the shard was read from (a URL), named by errors about it.
    pub path: String,
    pub tensor_names: Vec<String>,
}

/// Check shards (opened in `parseShardIndex` order) against their index: every tensor the
/// index lists in the shard it names, and none in two shards.
#[napi(
    catch_unwind,
    strict,
    ts_args_type = "index: Uint8Array, shards: Array<OpenedShard>"
)]
pub fn check_shards(env: Env, index: Unknown, shards: Vec<OpenedShard>) -> napi::Result<()> {
    guard(&env, "checkShards", || {
        let run = || -> CoreResult<()> {
            // `shards` was converted (running any getters) before the bytes are taken.
            let index = bytes_arg(&index, "index")?;
            let index = with_view(&index, layout::parse_index)?;
            if shards.len() != index.shards.len() {
                return Err(invalid_argument(format!(
                    "{} shards given for an index of {}",
                    shards.len(),
                    index.shards.len()
                )));
            }
            let listings: Vec<ShardListing> = shards
                .iter()
                .map(|s| ShardListing {
                    tensors: s.tensor_names.iter().map(String::as_str).collect(),
                })
                .collect();
            layout::assemble(&index, &listings)
                .map(|_| ())
                .map_err(|(e, shard)| {
                    let at = index
                        .position(&shard)
                        .and_then(|i| shards.get(i))
                        .map_or(shard.clone(), |s| s.path.clone());
                    e.with_path(at)
                })
        };
        run().or_throw(&env)
    })
}

#[napi(object, object_to_js = false)]
pub struct LayoutCause {
    pub code: String,
    /// The cause's message without its path and tensor prefix.
    pub detail: String,
    pub tensor: Option<String>,
}

/// Throw the model-directory error `kind` ('no-weights', 'shard-missing', 'shard-failed',
/// the latter naming `shard` and its `cause`) with `path`: the same error a local directory
/// gives.
#[napi(catch_unwind, strict)]
pub fn throw_layout_error(
    env: Env,
    kind: String,
    path: String,
    shard: Option<String>,
    cause: Option<LayoutCause>,
) -> napi::Result<()> {
    guard(&env, "throwLayoutError", || {
        let error = match (kind.as_str(), shard, cause) {
            ("no-weights", _, _) => layout::no_weights(),
            ("shard-missing", _, _) => layout::shard_missing(),
            ("shard-failed", Some(shard), Some(cause)) => {
                layout::shard_failed(&shard, &cause.code, &cause.detail, cause.tensor.as_deref())
            }
            (other, _, _) => invalid_argument(format!("unknown layout error '{other}'")),
        };
        Err(crate::error::to_js(&env, &error.with_path(path)))
    })
}

/// What the first bytes of a file (and its total length) are: a format name, or
/// `{ foreign }` describing a file this package does not read.
#[napi(
    catch_unwind,
    strict,
    ts_args_type = "head: Uint8Array, fileLength: number",
    ts_return_type = "WeightsFormat | { foreign: string }"
)]
pub fn sniff_format(
    env: Env,
    head: Unknown,
    file_length: f64,
) -> napi::Result<Either<String, SniffForeign>> {
    guard(&env, "sniffFormat", || {
        let run = || {
            let head = bytes_arg(&head, "head")?;
            with_view(&head, |b| Ok(stcore::format::detect::Head::of(b)))
        };
        let mut h = run().or_throw(&env)?;
        h.file_len = file_length as u64;
        Ok(match stcore::format::detect::sniff(&h) {
            stcore::format::detect::Detected::Format(f) => Either::A(f.name().to_string()),
            stcore::format::detect::Detected::Foreign(what) => Either::B(SniffForeign {
                foreign: what.to_string(),
            }),
        })
    })
}

#[napi(object, object_from_js = false)]
pub struct SniffForeign {
    pub foreign: String,
}

/// Where the header of a SafeTensors file starting with `head` ends (8 + its length), when
/// the length prefix is one the format allows and fits `fileLength`; otherwise null (opening
/// then reports why).
#[napi(
    catch_unwind,
    strict,
    ts_args_type = "head: Uint8Array, fileLength: number"
)]
pub fn safetensors_header_end(
    env: Env,
    head: Unknown,
    file_length: f64,
) -> napi::Result<Option<f64>> {
    guard(&env, "safetensorsHeaderEnd", || {
        let run = || {
            let head = bytes_arg(&head, "head")?;
            with_view(&head, |b| {
                Ok(stcore::format::safetensors::SafeTensors::header_end(
                    b,
                    file_length as u64,
                ))
            })
        };
        run().map(|n| n.map(|n| n as f64)).or_throw(&env)
    })
}

/// Where a Hugging Face model id stands in the local cache (from `resolveModelId`).
#[napi(object, object_from_js = false)]
pub struct ModelIdTarget {
    pub id: String,
    pub revision: String,
    /// The cache directory looked in (null: no HF_HUB_CACHE / HF_HOME / home directory).
    pub cache_dir: Option<String>,
    /// The commit the revision names in the cache, if the cache knows it.
    pub commit: Option<String>,
    /// The cached snapshot directory holding config.json and weights, if any.
    pub snapshot: Option<String>,
}

/// `target` as a Hugging Face model id: null when it names an existing path or does not look
/// like `org/name` (it is then a path); ERR_INVALID_ARGUMENT for an id (or revision) that
/// breaks huggingface_hub's rules; else the id's place in the cache (`cacheDir`, else the one
/// `vars` name: HF_HUB_CACHE / HF_HOME / XDG_CACHE_HOME / HOME, passed from `process.env`,
/// which a worker thread keeps apart from the process's). Reads the filesystem, never the
/// network.
#[napi(catch_unwind, strict)]
pub fn resolve_model_id(
    env: Env,
    target: String,
    revision: Option<String>,
    cache_dir: Option<String>,
    vars: std::collections::HashMap<String, String>,
) -> napi::Result<Option<ModelIdTarget>> {
    guard(&env, "resolveModelId", || {
        use stcore::pretrained::hub;
        let run = || -> CoreResult<Option<ModelIdTarget>> {
            if !hub::looks_like_model_id(&target) || std::fs::symlink_metadata(&target).is_ok() {
                return Ok(None);
            }
            hub::check_model_id(&target).map_err(|e| {
                invalid_argument(format!(
                    "there is no file or directory '{target}', and {}",
                    e.detail()
                ))
            })?;
            let revision = revision.unwrap_or_else(|| hub::DEFAULT_REVISION.to_string());
            hub::check_revision(&revision)?;
            let cache = match cache_dir {
                Some(dir) if dir.is_empty() => {
                    return Err(invalid_argument("options.cacheDir must not be empty"))
                }
                Some(dir) => Some(std::path::PathBuf::from(dir)),
                None => hub::default_cache_dir(|k| vars.get(k).cloned()),
            };
            let found = match &cache {
                Some(c) => Some(hub::find_cached(c, &target, &revision)?),
                None => None,
            };
            let text = |p: &std::path::Path| p.to_string_lossy().into_owned();
            Ok(Some(ModelIdTarget {
                id: target.clone(),
                revision,
                cache_dir: cache.as_deref().map(text),
                commit: found.as_ref().and_then(|f| f.commit.clone()),
                snapshot: found.and_then(|f| f.snapshot).as_deref().map(text),
            }))
        };
        run().or_throw(&env)
    })
}

//! The Hugging Face Hub from Node: `download`'s cache writes (`HubRepo`, `HubBlob`) and its
//! plan (`hubPlan`), `verify` and `diff`. Internal calls: `lib/hub.js` does the HTTP and
//! index.js exports the functions; the decisions are the core's (`stcore::hub`,
//! `stcore::verify`, `stcore::diff`).

use crate::args::{bytes_arg, with_view};
use crate::convert::{json, Json};
use crate::error::{guard, invalid_argument, CoreResult, OrThrow};
use crate::tasks::CoreTask;
use napi::bindgen_prelude::*;
use napi::Env;
use napi_derive::napi;
use stcore::diff::{self, NameMap};
use stcore::hub::cache::{BlobWriter, RepoCache};
use stcore::hub::glob::FileFilter;
use stcore::hub::hash::blob_etag;
use stcore::hub::plan::parse_revision;
use stcore::pretrained::hub as ids;
use stcore::verify::{self, Expected};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

#[napi(object, object_from_js = false)]
pub struct HubFile {
    pub path: String,
    pub size: Option<f64>,
    pub etag: Option<String>,
}

#[napi(object, object_from_js = false)]
pub struct HubPlan {
    pub commit: String,
    /// The files the filter takes.
    pub files: Vec<HubFile>,
    /// The files of the revision in all.
    pub listed: f64,
}

/// The files of a revision a download takes: the Hub API's answer (`bytes`) read and
/// checked, filtered by the `include` / `exclude` globs.
#[napi(
    catch_unwind,
    strict,
    ts_args_type = "bytes: Uint8Array, include: string[] | null, exclude: string[]"
)]
pub fn hub_plan(
    env: Env,
    bytes: Unknown,
    include: Option<Vec<String>>,
    exclude: Vec<String>,
) -> napi::Result<HubPlan> {
    guard(&env, "hubPlan", || {
        let run = || {
            let filter = FileFilter::new(include.as_deref(), &exclude)?;
            let bytes = bytes_arg(&bytes, "bytes")?;
            let revision = with_view(&bytes, |b| parse_revision(b, &filter))?;
            Ok(HubPlan {
                commit: revision.commit,
                listed: revision.listed as f64,
                files: revision
                    .files
                    .into_iter()
                    .map(|f| HubFile {
                        path: f.path,
                        size: f.size.map(|s| s as f64),
                        etag: f.etag,
                    })
                    .collect(),
            })
        };
        run().or_throw(&env)
    })
}

/// An ETag header as the blob name it gives (quotes and `W/` removed), or ERR_IO naming
/// `what` when it names no blob.
#[napi(catch_unwind, strict)]
pub fn hub_etag(env: Env, raw: String, what: String) -> napi::Result<String> {
    guard(&env, "hubEtag", || {
        blob_etag(&raw, &what).map(|(etag, _)| etag).or_throw(&env)
    })
}

/// The cache directory `cacheDir` or the environment (`vars`: HF_HUB_CACHE, HF_HOME,
/// XDG_CACHE_HOME, HOME) names.
fn resolve_cache_dir(
    cache_dir: Option<String>,
    vars: &HashMap<String, String>,
) -> CoreResult<PathBuf> {
    ids::choose_cache_dir(cache_dir.as_deref(), |k| vars.get(k).cloned())?.ok_or_else(|| {
        invalid_argument(
            "no Hugging Face cache directory: pass options.cacheDir, or set HF_HUB_CACHE, \
             HF_HOME or HOME",
        )
    })
}

/// One model's folder of the Hugging Face cache, written as huggingface_hub writes it.
#[napi]
pub struct HubRepo {
    inner: Arc<RepoCache>,
}

/// A blob being downloaded (see `HubRepo.openBlobAsync`).
#[napi]
pub struct HubBlob {
    inner: Arc<Mutex<Option<BlobWriter>>>,
    resumed: f64,
}

fn text(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}

#[napi]
impl HubRepo {
    /// Instances come from `HubRepo.open`.
    #[napi(catch_unwind, constructor)]
    pub fn not_constructible(env: Env) -> napi::Result<Self> {
        guard(&env, "HubRepo.constructor", || {
            Err(crate::error::not_constructible(
                &env,
                "HubRepo",
                "HubRepo.open(id, cacheDir, vars)",
            ))
        })
    }

    /// Model `id` (checked) in the cache `cacheDir` names, else the one `vars` name.
    #[napi(catch_unwind, strict, factory, writable)]
    pub fn open(
        env: Env,
        id: String,
        cache_dir: Option<String>,
        vars: HashMap<String, String>,
    ) -> napi::Result<HubRepo> {
        guard(&env, "HubRepo.open", || {
            let run = || {
                let dir = resolve_cache_dir(cache_dir, &vars)?;
                Ok(HubRepo {
                    inner: Arc::new(RepoCache::new(&dir, &id)?),
                })
            };
            run().or_throw(&env)
        })
    }

    /// `<cache>/models--org--name`.
    #[napi(catch_unwind, getter)]
    pub fn dir(&self, env: Env) -> napi::Result<String> {
        guard(&env, "HubRepo.dir", || Ok(text(self.inner.dir())))
    }

    /// Whether blob `etag` is there (of `size` bytes, when known).
    #[napi(catch_unwind, strict)]
    pub fn has_blob(&self, env: Env, etag: String, size: Option<f64>) -> napi::Result<bool> {
        guard(&env, "HubRepo.hasBlob", || {
            let size = size.map(byte_count).transpose().or_throw(&env)?;
            self.inner.has_blob(&etag, size).or_throw(&env)
        })
    }

    /// Point `snapshots/<commit>/<path>` at blob `etag`; the link's path.
    #[napi(catch_unwind, strict)]
    pub fn link(
        &self,
        env: Env,
        commit: String,
        path: String,
        etag: String,
    ) -> napi::Result<String> {
        guard(&env, "HubRepo.link", || {
            self.inner
                .link(&commit, &path, &etag)
                .map(|p| text(&p))
                .or_throw(&env)
        })
    }

    /// `refs/<revision>` ← `commit`.
    #[napi(catch_unwind, strict)]
    pub fn write_ref(&self, env: Env, revision: String, commit: String) -> napi::Result<()> {
        guard(&env, "HubRepo.writeRef", || {
            self.inner.write_ref(&revision, &commit).or_throw(&env)
        })
    }

    /// `snapshots/<commit>`.
    #[napi(catch_unwind, strict)]
    pub fn snapshot_dir(&self, env: Env, commit: String) -> napi::Result<String> {
        guard(&env, "HubRepo.snapshotDir", || {
            self.inner
                .snapshot_dir(&commit)
                .map(|p| text(&p))
                .or_throw(&env)
        })
    }

    /// The commit `revision` names in the cache, when its snapshot directory exists.
    #[napi(catch_unwind, strict)]
    pub fn cached_commit(&self, env: Env, revision: String) -> napi::Result<Option<String>> {
        guard(&env, "HubRepo.cachedCommit", || {
            self.inner.cached_commit(&revision).or_throw(&env)
        })
    }

    /// Start or resume blob `etag` of `size` bytes (what its `.incomplete` file holds is
    /// hashed again first, off the event loop); null while another download holds its lock.
    #[napi(catch_unwind, strict, ts_return_type = "Promise<HubBlob | null>")]
    pub fn open_blob_async(
        &self,
        env: Env,
        etag: String,
        size: f64,
    ) -> napi::Result<AsyncTask<CoreTask<Option<HubBlob>>>> {
        guard(&env, "HubRepo.openBlobAsync", || {
            let repo = Arc::clone(&self.inner);
            Ok(CoreTask::new(move || {
                let writer = repo.open_blob(&etag, byte_count(size)?)?;
                Ok(writer.map(|w| HubBlob {
                    resumed: w.resumed() as f64,
                    inner: Arc::new(Mutex::new(Some(w))),
                }))
            }))
        })
    }
}

/// A byte count from JS: a non-negative integer.
fn byte_count(n: f64) -> CoreResult<u64> {
    if n.fract() == 0.0 && (0.0..=9.007_199_254_740_991e15).contains(&n) {
        Ok(n as u64)
    } else {
        Err(invalid_argument(format!("{n} is not a byte count")))
    }
}

impl HubBlob {
    /// Run `f` on the writer off the event loop; ERR_CLOSED once it finished or was released.
    fn task<T: Send + ToNapiValue + TypeName + 'static>(
        &self,
        f: impl FnOnce(&mut Option<BlobWriter>) -> CoreResult<T> + Send + 'static,
    ) -> AsyncTask<CoreTask<T>> {
        let inner = Arc::clone(&self.inner);
        CoreTask::new(move || {
            let mut slot = inner.lock().unwrap_or_else(|p| p.into_inner());
            if slot.is_none() {
                return Err(stcore::CoreError::closed(
                    "this blob download was finished or released",
                ));
            }
            f(&mut slot)
        })
    }
}

#[napi]
impl HubBlob {
    /// Instances come from `HubRepo.openBlobAsync`.
    #[napi(catch_unwind, constructor)]
    pub fn not_constructible(env: Env) -> napi::Result<Self> {
        guard(&env, "HubBlob.constructor", || {
            Err(crate::error::not_constructible(
                &env,
                "HubBlob",
                "HubRepo.openBlobAsync(etag, size)",
            ))
        })
    }

    /// Bytes its `.incomplete` file already held: the download goes on from there.
    #[napi(catch_unwind, getter)]
    pub fn resumed_bytes(&self, env: Env) -> napi::Result<f64> {
        guard(&env, "HubBlob.resumedBytes", || Ok(self.resumed))
    }

    /// Append `bytes` (copied at once) to the file and the hash, off the event loop.
    #[napi(
        catch_unwind,
        strict,
        ts_args_type = "bytes: Uint8Array",
        ts_return_type = "Promise<void>"
    )]
    pub fn write_async(&self, env: Env, bytes: Unknown) -> napi::Result<AsyncTask<CoreTask<()>>> {
        guard(&env, "HubBlob.writeAsync", || {
            let owned = bytes_arg(&bytes, "bytes")
                .and_then(|v| with_view(&v, |b| Ok(b.to_vec())))
                .or_throw(&env)?;
            Ok(self.task(move |w| match w.as_mut() {
                Some(w) => w.write(&owned),
                None => Ok(()),
            }))
        })
    }

    /// Check the blob against its name and rename it into place: its path. A wrong hash is
    /// ERR_HASH_MISMATCH and nothing lands.
    #[napi(catch_unwind, ts_return_type = "Promise<string>")]
    pub fn finish_async(&self, env: Env) -> napi::Result<AsyncTask<CoreTask<String>>> {
        guard(&env, "HubBlob.finishAsync", || {
            Ok(self.task(|w| match w.take() {
                Some(w) => w.finish().map(|p| text(&p)),
                None => Ok(String::new()),
            }))
        })
    }

    /// Stop without finishing: the lock goes, the `.incomplete` file stays (to resume).
    #[napi(catch_unwind)]
    pub fn release(&self, env: Env) -> napi::Result<()> {
        guard(&env, "HubBlob.release", || {
            self.inner.lock().unwrap_or_else(|p| p.into_inner()).take();
            Ok(())
        })
    }
}

/// Check every file of a cache snapshot against the blob it links to.
#[napi(catch_unwind, strict, ts_return_type = "Promise<VerifyReport>")]
pub fn verify_snapshot(env: Env, dir: String) -> napi::Result<AsyncTask<CoreTask<Json>>> {
    guard(&env, "verifySnapshot", || {
        Ok(CoreTask::new(move || {
            json(verify::verify_snapshot(Path::new(&dir))?)
        }))
    })
}

#[napi(object)]
pub struct ExpectedFile {
    pub file: String,
    pub etag: Option<String>,
}

/// Check each listed file of `dir` against its hash.
#[napi(catch_unwind, strict, ts_return_type = "Promise<VerifyReport>")]
pub fn verify_files(
    env: Env,
    dir: String,
    files: Vec<ExpectedFile>,
) -> napi::Result<AsyncTask<CoreTask<Json>>> {
    guard(&env, "verifyFiles", || {
        let expected: Vec<Expected> = files
            .into_iter()
            .map(|f| Expected {
                file: f.file,
                etag: f.etag,
            })
            .collect();
        Ok(CoreTask::new(move || {
            json(verify::verify_files(Path::new(&dir), &expected)?)
        }))
    })
}

/// Compare two weight sources tensor by tensor (`names`: 'auto', 'direct' or 'llama.cpp').
#[napi(catch_unwind, strict, ts_return_type = "Promise<DiffReport>")]
pub fn diff_weights(
    env: Env,
    a: String,
    b: String,
    names: Option<String>,
) -> napi::Result<AsyncTask<CoreTask<Json>>> {
    guard(&env, "diffWeights", || {
        Ok(CoreTask::new(move || {
            let names = names
                .as_deref()
                .map(NameMap::parse)
                .transpose()?
                .unwrap_or_default();
            json(diff::diff(Path::new(&a), Path::new(&b), names)?)
        }))
    })
}

/// The URL of the shard `name` of the model whose files lie under `base` (an http(s) URL
/// ending in `/`): the name checked (ERR_UNSAFE_PATH) and percent-encoded, so the URL stays
/// under `base` whatever its parser deletes or decodes.
#[napi(catch_unwind, strict)]
pub fn shard_url(env: Env, base: String, name: String) -> napi::Result<String> {
    guard(&env, "shardUrl", || {
        stcore::pretrained::layout::shard_url(&base, &name).or_throw(&env)
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
        let run = || -> CoreResult<Option<ModelIdTarget>> {
            let found = ids::resolve_model_id(&target, revision, cache_dir.as_deref(), |k| {
                vars.get(k).cloned()
            })?;
            Ok(found.map(|t| ModelIdTarget {
                id: t.id,
                revision: t.revision,
                cache_dir: t.cache_dir.as_deref().map(text),
                commit: t.commit,
                snapshot: t.snapshot.as_deref().map(text),
            }))
        };
        run().or_throw(&env)
    })
}

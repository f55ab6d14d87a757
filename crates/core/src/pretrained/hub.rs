//! Hugging Face model ids (`org/name`) and the local Hugging Face cache, as `huggingface_hub`
//! lays it out:
//!
//! ```text
//! <cache>/models--org--name/refs/<revision>       the commit a branch or tag points at
//!                          /snapshots/<commit>/… the files of that commit (symlinks into blobs/)
//!                          /blobs/<etag>         the bytes
//! ```
//!
//! `<cache>` is `HF_HUB_CACHE`, else `HF_HOME/hub`, else `$XDG_CACHE_HOME/huggingface/hub`,
//! else `~/.cache/huggingface/hub` (huggingface_hub's order, with its legacy
//! `HUGGINGFACE_HUB_CACHE`). Nothing here touches the network or writes to the cache.

#[cfg(feature = "fs")]
use super::layout::{CONFIG_FILE, DISCOVERY};
use crate::error::{CoreError, ErrorKind, Result};
#[cfg(feature = "fs")]
use std::path::Path;
use std::path::PathBuf;

/// The longest namespace or name of a model id (huggingface_hub's `REPO_ID_REGEX`).
const MAX_ID_PART: usize = 96;
/// The longest revision accepted (a branch, a tag, `refs/pr/N`, or a commit hash).
const MAX_REVISION: usize = 256;
/// The most of a ref file read: huggingface_hub writes the 40-digit hash alone.
#[cfg(feature = "fs")]
const MAX_REF_BYTES: u64 = 1024;

/// The default revision, as huggingface_hub's.
pub const DEFAULT_REVISION: &str = "main";

/// Whether `target` is meant as a model id rather than a path: exactly one `/`, no `\`, and
/// not starting as a path does (`/`, `.`, `~`). Callers look for a local path first (a
/// directory of that name wins); a string that passes this is then checked by
/// [`check_model_id`].
pub fn looks_like_model_id(target: &str) -> bool {
    let drive = target.len() >= 2 && target.as_bytes()[1] == b':'; // C:/models on Windows
    target.matches('/').count() == 1
        && !target.contains('\\')
        && !target.starts_with(['/', '.', '~'])
        && !target.ends_with('/')
        && !drive
}

/// huggingface_hub's `validate_repo_id` for `org/name`: each part 1–96 characters of
/// `A-Z a-z 0-9 - _ .`, starting and ending with a letter, digit or `_`; no `--` or `..`
/// (the cache uses `--` as its separator); not ending in `.git`.
pub fn check_model_id(id: &str) -> Result<()> {
    let bad = |why: &str| {
        Err(CoreError::new(
            ErrorKind::InvalidArgument,
            format!("'{id}' is not a Hugging Face model id ('org/name'): {why}"),
        ))
    };
    let Some((org, name)) = id.split_once('/') else {
        return bad("it needs exactly one '/'");
    };
    if name.contains('/') {
        return bad("it needs exactly one '/'");
    }
    for part in [org, name] {
        if part.is_empty() || part.len() > MAX_ID_PART {
            return bad("each part has 1 to 96 characters");
        }
        if !part
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        {
            return bad("only letters, digits, '-', '_' and '.' are allowed");
        }
        let edge = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
        if !edge(part.as_bytes()[0]) || !edge(part.as_bytes()[part.len() - 1]) {
            return bad("a part cannot start or end with '-' or '.'");
        }
    }
    if id.contains("--") || id.contains("..") {
        return bad("'--' and '..' are not allowed");
    }
    if id.ends_with(".git") {
        return bad("it cannot end with '.git'");
    }
    Ok(())
}

/// A revision: a branch, a tag, `refs/pr/N` or a commit hash. It names a file under
/// `refs/` and goes into a URL (percent-encoded), so: 1–256 characters, no control
/// characters or `\`, and `/`-separated parts that are neither empty, `.` nor `..`.
pub fn check_revision(revision: &str) -> Result<()> {
    let ok = !revision.is_empty()
        && revision.len() <= MAX_REVISION
        && !revision.chars().any(|c| c.is_control() || c == '\\')
        && revision
            .split('/')
            .all(|part| !part.is_empty() && part != "." && part != "..");
    if ok {
        Ok(())
    } else {
        Err(CoreError::new(
            ErrorKind::InvalidArgument,
            format!(
                "options.revision {revision:?} is not a revision (a branch, tag or commit: \
                 1 to {MAX_REVISION} characters, '/'-separated parts that are not empty, '.' or '..')"
            ),
        ))
    }
}

/// A full commit hash (40 lowercase hex digits), as `snapshots/` names them.
pub fn is_commit_hash(s: &str) -> bool {
    s.len() == 40 && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// `models--org--name`: the cache folder of a model id.
pub fn repo_folder(id: &str) -> String {
    format!("models--{}", id.replace('/', "--"))
}

/// The cache directory the environment names (see the module documentation), given
/// `getenv`: the caller passes the process environment (or a test's).
pub fn default_cache_dir(getenv: impl Fn(&str) -> Option<String>) -> Option<PathBuf> {
    let var = |k: &str| getenv(k).filter(|v| !v.is_empty());
    let home = || {
        var("HOME")
            .or_else(|| var("USERPROFILE"))
            .map(PathBuf::from)
    };
    let expand = |v: String| match v.strip_prefix("~/") {
        Some(rest) => home().map(|h| h.join(rest)),
        None if v == "~" => home(),
        None => Some(PathBuf::from(v)),
    };
    if let Some(dir) = var("HF_HUB_CACHE").or_else(|| var("HUGGINGFACE_HUB_CACHE")) {
        return expand(dir);
    }
    if let Some(hf_home) = var("HF_HOME") {
        return expand(hf_home).map(|h| h.join("hub"));
    }
    let base = match var("XDG_CACHE_HOME") {
        Some(xdg) => expand(xdg)?,
        None => home()?.join(".cache"),
    };
    Some(base.join("huggingface").join("hub"))
}

/// The cache directory: `given` (`options.cacheDir`; an empty one is ERR_INVALID_ARGUMENT),
/// else the one the environment names ([`default_cache_dir`]; `None` without one).
pub fn choose_cache_dir(
    given: Option<&str>,
    getenv: impl Fn(&str) -> Option<String>,
) -> Result<Option<PathBuf>> {
    match given {
        Some("") => Err(CoreError::invalid_argument(
            "options.cacheDir must not be empty",
        )),
        Some(dir) => Ok(Some(PathBuf::from(dir))),
        None => Ok(default_cache_dir(getenv)),
    }
}

#[cfg(feature = "fs")]
/// A target taken as a Hugging Face model id ([`resolve_model_id`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelIdTarget {
    pub id: String,
    pub revision: String,
    /// The cache looked in (`None`: no cacheDir and no HF_HUB_CACHE / HF_HOME / home).
    pub cache_dir: Option<PathBuf>,
    /// The commit the revision names in the cache, if the cache knows it.
    pub commit: Option<String>,
    /// The cached snapshot holding config.json and weights, if any.
    pub snapshot: Option<PathBuf>,
}

#[cfg(feature = "fs")]
/// `target` as a model id: `None` when it names an existing path or does not look like
/// `org/name` (it is then a path); ERR_INVALID_ARGUMENT for an id or revision that breaks
/// huggingface_hub's rules; else its place in the cache ([`choose_cache_dir`]). Reads the
/// filesystem, never the network.
pub fn resolve_model_id(
    target: &str,
    revision: Option<String>,
    cache_dir: Option<&str>,
    getenv: impl Fn(&str) -> Option<String>,
) -> Result<Option<ModelIdTarget>> {
    if !looks_like_model_id(target) || std::fs::symlink_metadata(target).is_ok() {
        return Ok(None);
    }
    check_model_id(target).map_err(|e| {
        CoreError::invalid_argument(format!(
            "there is no file or directory '{target}', and {}",
            e.detail()
        ))
    })?;
    let revision = revision.unwrap_or_else(|| DEFAULT_REVISION.to_string());
    check_revision(&revision)?;
    let cache = choose_cache_dir(cache_dir, getenv)?;
    let found = match &cache {
        Some(c) => Some(find_cached(c, target, &revision)?),
        None => None,
    };
    Ok(Some(ModelIdTarget {
        id: target.to_string(),
        revision,
        cache_dir: cache,
        commit: found.as_ref().and_then(|f| f.commit.clone()),
        snapshot: found.and_then(|f| f.snapshot),
    }))
}

#[cfg(feature = "fs")]
/// Where a model id stands in the cache.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CachedModel {
    /// `<cache>/models--org--name`.
    pub repo_dir: PathBuf,
    /// The commit the revision names: the revision itself when it is a commit hash, else
    /// what `refs/<revision>` holds; `None` when the cache has no such ref.
    pub commit: Option<String>,
    /// `snapshots/<commit>` when it holds `config.json` and a weight file of the discovery
    /// order (the shards of an index are checked when it is loaded); `None` otherwise.
    pub snapshot: Option<PathBuf>,
}

#[cfg(feature = "fs")]
/// Look `id` at `revision` up in the cache at `cache` (both checked first). A ref file that
/// does not hold a commit hash, or holds more than [`MAX_REF_BYTES`], is a damaged cache:
/// ERR_INVALID_MODEL naming it; one that is no regular file (a FIFO, a device) is
/// ERR_INVALID_ARGUMENT, as for every reader.
pub fn find_cached(cache: &Path, id: &str, revision: &str) -> Result<CachedModel> {
    check_model_id(id)?;
    check_revision(revision)?;
    let repo_dir = cache.join(repo_folder(id));
    let commit = if is_commit_hash(revision) {
        Some(revision.to_string())
    } else {
        let ref_file = revision
            .split('/')
            .fold(repo_dir.join("refs"), |p, part| p.join(part));
        match std::fs::metadata(&ref_file) {
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory
                ) =>
            {
                None
            }
            _ => Some(read_ref(&ref_file)?),
        }
    };
    let snapshot = commit
        .as_deref()
        .map(|c| repo_dir.join("snapshots").join(c))
        .filter(|dir| {
            dir.join(CONFIG_FILE).is_file() && DISCOVERY.iter().any(|c| dir.join(c.file).is_file())
        });
    Ok(CachedModel {
        repo_dir,
        commit,
        snapshot,
    })
}

#[cfg(feature = "fs")]
/// The commit a ref file holds, read as every input is ([`crate::fsutil::read_regular_capped`]:
/// a regular file, so a FIFO cannot block the thread, and at most [`MAX_REF_BYTES`], so an
/// endless file cannot fill memory). Anything but a commit hash is a damaged cache.
fn read_ref(ref_file: &Path) -> Result<String> {
    let damaged = |why: String| CoreError::invalid_model(why).with_path(ref_file);
    let bytes = crate::fsutil::read_regular_capped(
        ref_file,
        "a Hugging Face cache ref",
        MAX_REF_BYTES,
        |n| {
            damaged(format!(
                "the Hugging Face cache's ref file is larger than {MAX_REF_BYTES} bytes ({n} bytes \
                 or more), the most read: a ref holds a 40-digit commit hash"
            ))
        },
    )?;
    let text = String::from_utf8_lossy(&bytes);
    let commit = text.trim();
    if !is_commit_hash(commit) {
        return Err(damaged(
            "the Hugging Face cache's ref file does not hold a commit hash".to_string(),
        ));
    }
    Ok(commit.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_follow_huggingface_hub() {
        for ok in [
            "org/name",
            "Org_1/name.v2-x",
            "a/b",
            "_x/y_",
            "google-bert/bert-base-uncased",
        ] {
            check_model_id(ok).unwrap();
        }
        let long = format!("org/{}", "a".repeat(97));
        for bad in [
            "name",
            "a/b/c",
            "org/",
            "/name",
            "org/-name",
            "org/name.",
            "org/na me",
            "org/na--me",
            "org/na..me",
            "org/name.git",
            "örg/name",
            long.as_str(),
        ] {
            assert_eq!(
                check_model_id(bad).unwrap_err().code(),
                "ERR_INVALID_ARGUMENT",
                "{bad}"
            );
        }
        assert!(looks_like_model_id("org/name"));
        assert!(looks_like_model_id("org/na me"));
        for path in [
            "./org/name",
            "../x",
            "/abs/x",
            "~/x",
            "a/b/c",
            "name",
            "org/",
            "a\\b/c",
            "C:/models",
        ] {
            assert!(!looks_like_model_id(path), "{path}");
        }
    }

    #[test]
    fn revisions_cannot_leave_refs() {
        for ok in [
            "main",
            "v1.0",
            "refs/pr/1",
            "0123456789abcdef0123456789abcdef01234567",
        ] {
            check_revision(ok).unwrap();
        }
        for bad in [
            "", "..", "../x", "a/../b", "/main", "main/", "a//b", "a\\b", "a\nb",
        ] {
            assert_eq!(
                check_revision(bad).unwrap_err().code(),
                "ERR_INVALID_ARGUMENT",
                "{bad:?}"
            );
        }
    }

    #[test]
    fn cache_dir_follows_the_environment() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |k: &str| {
                pairs
                    .iter()
                    .find(|(n, _)| *n == k)
                    .map(|(_, v)| v.to_string())
            }
        };
        let dir = |pairs| default_cache_dir(env(pairs)).unwrap();
        let all = &[
            ("HF_HUB_CACHE", "/c"),
            ("HF_HOME", "/h"),
            ("XDG_CACHE_HOME", "/x"),
            ("HOME", "/home/u"),
        ];
        assert_eq!(dir(all), PathBuf::from("/c"));
        assert_eq!(dir(&all[1..]), PathBuf::from("/h/hub"));
        assert_eq!(dir(&all[2..]), PathBuf::from("/x/huggingface/hub"));
        assert_eq!(
            dir(&all[3..]),
            PathBuf::from("/home/u/.cache/huggingface/hub")
        );
        assert_eq!(
            dir(&[("HF_HOME", "~/hf"), ("HOME", "/home/u")]),
            PathBuf::from("/home/u/hf/hub")
        );
        assert_eq!(default_cache_dir(env(&[])), None);
    }

    #[cfg(feature = "fs")]
    #[test]
    fn refs_name_snapshots() {
        let tmp = std::env::temp_dir().join(format!("stn-hub-{}", std::process::id()));
        let repo = tmp.join("models--org--name");
        let commit = "0123456789abcdef0123456789abcdef01234567";
        std::fs::create_dir_all(repo.join("refs/refs/pr")).unwrap();
        std::fs::create_dir_all(repo.join("snapshots").join(commit)).unwrap();
        std::fs::write(repo.join("refs/main"), commit).unwrap();
        std::fs::write(repo.join("refs/refs/pr/1"), "not a hash").unwrap();
        let snap = repo.join("snapshots").join(commit);
        // config.json alone is not a usable snapshot.
        std::fs::write(snap.join("config.json"), "{}").unwrap();
        let found = find_cached(&tmp, "org/name", "main").unwrap();
        assert_eq!(
            (found.commit.as_deref(), found.snapshot),
            (Some(commit), None)
        );
        std::fs::write(snap.join("model.safetensors"), "").unwrap();
        assert_eq!(
            find_cached(&tmp, "org/name", "main").unwrap().snapshot,
            Some(snap.clone())
        );
        assert_eq!(
            find_cached(&tmp, "org/name", commit).unwrap().snapshot,
            Some(snap)
        );
        let none = find_cached(&tmp, "org/name", "v2").unwrap();
        assert_eq!((none.commit, none.snapshot), (None, None));
        assert_eq!(
            find_cached(&tmp, "org/other", "main").unwrap().snapshot,
            None
        );
        let damaged = find_cached(&tmp, "org/name", "refs/pr/1").unwrap_err();
        assert_eq!(damaged.code(), "ERR_INVALID_MODEL");
        assert_eq!(
            find_cached(&tmp, "org/name", "../x").unwrap_err().code(),
            "ERR_INVALID_ARGUMENT"
        );
        // A ref is read as every input is: a regular file (a FIFO would block for good), at
        // most MAX_REF_BYTES (/proc/self/pagemap reads without end).
        std::fs::write(repo.join("refs/long"), format!("{commit}\n").repeat(30)).unwrap();
        let e = find_cached(&tmp, "org/name", "long").unwrap_err();
        assert_eq!(e.code(), "ERR_INVALID_MODEL");
        assert!(
            e.detail()
                .starts_with("the Hugging Face cache's ref file is larger than 1024 bytes"),
            "{e}"
        );
        #[cfg(unix)]
        {
            let fifo = repo.join("refs/fifo");
            let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
            // SAFETY: a NUL-terminated path.
            assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
            let e = find_cached(&tmp, "org/name", "fifo").unwrap_err();
            assert_eq!(
                (e.code(), e.path()),
                ("ERR_INVALID_ARGUMENT", Some(fifo.to_str().unwrap()))
            );
            assert!(e.detail().contains("not a regular file"), "{e}");
            if Path::new("/proc/self/pagemap").exists() {
                std::os::unix::fs::symlink("/proc/self/pagemap", repo.join("refs/endless"))
                    .unwrap();
                let e = find_cached(&tmp, "org/name", "endless").unwrap_err();
                assert_eq!(e.code(), "ERR_INVALID_MODEL", "{e}");
            }
        }
        std::fs::remove_dir_all(&tmp).unwrap();
    }
}

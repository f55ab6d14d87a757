//! What a download fetches: the Hub API's answer for a revision
//! (`GET {endpoint}/api/models/{id}/revision/{revision}?blobs=true`: the commit `sha` and the
//! `siblings`, each `{rfilename, size?, blobId?, lfs?: {sha256, size}}`) read, checked and
//! filtered. Every name is a plain relative path (it becomes a file under `snapshots/`), every
//! hash names a blob, the commit is a commit hash: an answer that breaks any of these is not
//! one the Hub gives, and nothing of it is used.

use super::glob::FileFilter;
use super::hash::{blob_etag, HashKind};
use crate::error::{CoreError, ErrorKind, Result};
use crate::pretrained::hub::is_commit_hash;
use crate::pretrained::layout::check_shard_name;
use serde::Deserialize;

/// The most files a repository's answer may list (the Hub's largest model repositories hold
/// tens of thousands).
pub const MAX_FILES: usize = 1_000_000;

/// One file of the revision, as the answer describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemoteFile {
    /// Its path in the repository, `/`-separated.
    pub path: String,
    /// Bytes, when the answer says (with `blobs=true`).
    pub size: Option<u64>,
    /// The blob it is (SHA-256 for LFS files, the git blob id otherwise), when the answer says.
    pub etag: Option<String>,
}

/// A revision's files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RepoRevision {
    /// The commit the revision names (40 hex digits).
    pub commit: String,
    /// The files the filter takes, in the answer's order.
    pub files: Vec<RemoteFile>,
    /// How many files the revision has in all.
    pub listed: usize,
}

#[derive(Deserialize)]
struct Answer {
    sha: Option<String>,
    #[serde(default)]
    siblings: Vec<Sibling>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Sibling {
    rfilename: String,
    size: Option<u64>,
    blob_id: Option<String>,
    lfs: Option<Lfs>,
}

#[derive(Deserialize)]
struct Lfs {
    sha256: String,
    size: Option<u64>,
}

/// An answer that is not the Hub's: ERR_IO (the endpoint is not a Hub, or misbehaves).
fn not_the_hub(why: impl std::fmt::Display) -> CoreError {
    CoreError::new(
        ErrorKind::Io,
        format!("the endpoint's answer for the revision is not the Hub API's: {why}"),
    )
}

/// Read the API's answer `json` and keep the files `filter` takes.
pub fn parse_revision(json: &[u8], filter: &FileFilter) -> Result<RepoRevision> {
    let answer: Answer = serde_json::from_slice(json).map_err(not_the_hub)?;
    let commit = answer
        .sha
        .ok_or_else(|| not_the_hub("it has no 'sha' (the commit)"))?;
    if !is_commit_hash(&commit) {
        return Err(not_the_hub(format!(
            "'sha' {:?} is not a commit hash",
            crate::names::printable(&commit)
        )));
    }
    if answer.siblings.len() > MAX_FILES {
        return Err(not_the_hub(format!("it lists more than {MAX_FILES} files")));
    }
    let listed = answer.siblings.len();
    let mut seen = std::collections::HashSet::new();
    let mut files = Vec::new();
    for s in answer.siblings {
        check_shard_name(&s.rfilename)?;
        if !seen.insert(s.rfilename.clone()) {
            return Err(not_the_hub(format!(
                "it lists {:?} twice",
                crate::names::printable(&s.rfilename)
            )));
        }
        if !filter.takes(&s.rfilename) {
            continue;
        }
        let (etag, size) = match (s.lfs, s.blob_id) {
            (Some(lfs), _) => {
                let (etag, kind) = blob_etag(&lfs.sha256, "lfs.sha256")?;
                if kind != HashKind::Sha256 {
                    return Err(not_the_hub("an lfs.sha256 is not a SHA-256"));
                }
                (Some(etag), lfs.size.or(s.size))
            }
            (None, Some(blob)) => {
                let (etag, kind) = blob_etag(&blob, "blobId")?;
                if kind != HashKind::GitBlob {
                    return Err(not_the_hub("a blobId is not a git blob id"));
                }
                (Some(etag), s.size)
            }
            (None, None) => (None, s.size),
        };
        files.push(RemoteFile {
            path: s.rfilename,
            size,
            etag,
        });
    }
    Ok(RepoRevision {
        commit,
        files,
        listed,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const COMMIT: &str = "0123456789abcdef0123456789abcdef01234567";

    fn answer(siblings: serde_json::Value) -> Vec<u8> {
        serde_json::to_vec(
            &serde_json::json!({ "id": "org/name", "sha": COMMIT, "siblings": siblings }),
        )
        .unwrap()
    }

    #[test]
    fn siblings_become_files_with_their_blobs() {
        let sha = "b".repeat(64);
        let blob = "c".repeat(40);
        let json = answer(serde_json::json!([
            { "rfilename": "config.json", "size": 12, "blobId": blob },
            { "rfilename": "model.safetensors", "size": 99, "blobId": "d".repeat(40), "lfs": { "sha256": sha, "size": 1000, "pointerSize": 134 } },
            { "rfilename": "sub/README.md" },
        ]));
        let all = parse_revision(&json, &FileFilter::default()).unwrap();
        assert_eq!(all.commit, COMMIT);
        assert_eq!(all.listed, 3);
        assert_eq!(
            all.files,
            vec![
                RemoteFile {
                    path: "config.json".into(),
                    size: Some(12),
                    etag: Some(blob.clone())
                },
                RemoteFile {
                    path: "model.safetensors".into(),
                    size: Some(1000),
                    etag: Some(sha)
                },
                RemoteFile {
                    path: "sub/README.md".into(),
                    size: None,
                    etag: None
                },
            ]
        );
        let only = FileFilter::new(Some(&["*.json".to_string()]), &[]).unwrap();
        let some = parse_revision(&json, &only).unwrap();
        assert_eq!((some.files.len(), some.listed), (1, 3));
    }

    #[test]
    fn answers_the_hub_never_gives_are_refused() {
        let f = FileFilter::default();
        let code = |json: &[u8]| parse_revision(json, &f).unwrap_err().code();
        assert_eq!(code(b"not json"), "ERR_IO");
        assert_eq!(code(br#"{"siblings": []}"#), "ERR_IO");
        assert_eq!(code(br#"{"sha": "main", "siblings": []}"#), "ERR_IO");
        for name in ["../../etc/passwd", "/abs", "a//b", "a\\b", "a/./b", "x\n"] {
            let json = answer(serde_json::json!([{ "rfilename": name }]));
            assert_eq!(code(&json), "ERR_UNSAFE_PATH", "{name:?}");
        }
        let twice = answer(serde_json::json!([{ "rfilename": "a" }, { "rfilename": "a" }]));
        assert_eq!(code(&twice), "ERR_IO");
        let bad_blob = answer(serde_json::json!([{ "rfilename": "a", "blobId": "../x" }]));
        assert_eq!(code(&bad_blob), "ERR_IO");
    }
}

//! Whether the files on disk are the ones the Hugging Face Hub published: each file hashed
//! (SHA-256 for LFS files, the git blob id for small files) and compared with the hash the
//! Hub names it by — a cache snapshot's files with the blob each links to (a blob's name is
//! its hash), a plain directory's with the hashes the Hub's API lists for the revision.
//! Corruption of the same size passes every size check; it does not pass this.
//!
//! Files are hashed on several threads (one file per thread at a time, read front to back in
//! 1 MiB reads), each read as every file of a model directory is
//! ([`crate::pretrained::companion::ModelFiles`]: inside the directory or its cache
//! repository, never from /proc, /sys or /dev, a regular file, and never more bytes than its
//! size when opened).

use crate::error::{CoreError, Result};
use crate::hub::hash::{hash_file, HashKind};
use crate::parallel::{for_chunks, Split};
use crate::pretrained::companion::ModelFiles;
use crate::pretrained::layout::check_shard_name;
use serde::Serialize;
use std::path::Path;

/// The most files a snapshot walk visits, and how deep.
const MAX_FILES: usize = 1_000_000;
const MAX_DEPTH: usize = 64;

/// One file checked.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct VerifiedFile {
    /// Its path in the directory, `/`-separated.
    pub file: String,
    pub ok: bool,
    /// The hash it should have (null when nothing names one).
    pub expected: Option<String>,
    /// The hash it has (null when it could not be read).
    pub actual: Option<String>,
    /// `'sha256'` or `'git-sha1'` (null when nothing names a hash).
    pub algorithm: Option<&'static str>,
    /// Its size in bytes (0 when it could not be read).
    pub bytes: u64,
    /// Why it could not be checked (missing, unreadable, not a link into the cache's blobs).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// Every file checked.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct VerifyReport {
    pub dir: String,
    /// Every file matched its hash.
    pub ok: bool,
    /// In path order.
    pub files: Vec<VerifiedFile>,
}

/// A file to check: its path in the directory and the hash that names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Expected {
    pub file: String,
    pub etag: Option<String>,
}

/// Check every file of a snapshot of the Hugging Face cache (`…/snapshots/<commit>`) against
/// the blob it links to (`../../blobs/<hash>`). A file that is no link into `blobs/` has
/// nothing naming its hash, and fails.
pub fn verify_snapshot(dir: &Path) -> Result<VerifyReport> {
    let real = std::fs::canonicalize(dir).map_err(|e| CoreError::io(e, dir))?;
    let snapshots = real
        .parent()
        .filter(|p| p.file_name().is_some_and(|n| n == "snapshots"));
    let repo = snapshots.and_then(Path::parent).and_then(Path::file_name);
    if !repo.is_some_and(|r| r.to_string_lossy().starts_with("models--")) {
        return Err(CoreError::invalid_argument(
            "is not a snapshot of the Hugging Face cache (…/models--org--name/snapshots/<commit>), \
             whose files name their hashes: a plain directory is checked against the hashes the \
             Hub publishes (options.id)",
        )
        .with_path(dir));
    }
    let mut names = Vec::new();
    walk(dir, "", 0, &mut names)?;
    names.sort();
    let expected = names
        .into_iter()
        .map(|file| {
            let etag = linked_blob(&dir.join(&file));
            Expected { file, etag }
        })
        .collect::<Vec<_>>();
    verify_files(dir, &expected)
}

/// The blob a snapshot file links to: the link's own target, when it is a file of a
/// `blobs/` folder named by a hash (what huggingface_hub makes: `../../blobs/<etag>`).
fn linked_blob(path: &Path) -> Option<String> {
    let target = std::fs::read_link(path).ok()?;
    let name = target.file_name()?.to_str()?;
    let in_blobs = target
        .parent()
        .and_then(Path::file_name)
        .is_some_and(|d| d == "blobs");
    (in_blobs && HashKind::of_etag(name).is_some()).then(|| name.to_string())
}

/// The files under `dir` (symlinks included, directories walked without following links),
/// as `/`-separated paths below `prefix`.
fn walk(dir: &Path, prefix: &str, depth: usize, out: &mut Vec<String>) -> Result<()> {
    if depth > MAX_DEPTH {
        return Err(CoreError::invalid_argument(format!(
            "directories nested more than {MAX_DEPTH} deep"
        ))
        .with_path(dir));
    }
    let entries = std::fs::read_dir(dir).map_err(|e| CoreError::io(e, dir))?;
    for entry in entries {
        let entry = entry.map_err(|e| CoreError::io(e, dir))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let rel = if prefix.is_empty() {
            name.clone()
        } else {
            format!("{prefix}/{name}")
        };
        let kind = entry
            .file_type()
            .map_err(|e| CoreError::io(e, entry.path()))?;
        if kind.is_dir() {
            walk(&entry.path(), &rel, depth + 1, out)?;
        } else {
            if out.len() >= MAX_FILES {
                return Err(
                    CoreError::invalid_argument(format!("more than {MAX_FILES} files"))
                        .with_path(dir),
                );
            }
            out.push(rel);
        }
    }
    Ok(())
}

/// Check each file of `expected` in `dir` against its hash (a file without one fails).
pub fn verify_files(dir: &Path, expected: &[Expected]) -> Result<VerifyReport> {
    ModelFiles::new(dir)?;
    let mut results: Vec<Option<VerifiedFile>> = vec![None; expected.len()];
    let split = Split::new(1, 1).min_units_per_thread(1);
    for_chunks(split, expected, &mut results, |_, jobs, out| {
        // One per chunk: it keeps the warnings of the files it skips, which no thread shares.
        let files = ModelFiles::new(dir)?;
        for (job, slot) in jobs.iter().zip(out.iter_mut()) {
            *slot = Some(check(&files, job));
        }
        Ok(())
    })?;
    let mut files: Vec<VerifiedFile> = results.into_iter().flatten().collect();
    files.sort_by(|a, b| a.file.cmp(&b.file));
    Ok(VerifyReport {
        dir: dir.display().to_string(),
        ok: files.iter().all(|f| f.ok),
        files,
    })
}

/// One file's verdict; every failure is the file's, reported in its entry.
fn check(files: &ModelFiles, job: &Expected) -> VerifiedFile {
    let kind = job.etag.as_deref().and_then(HashKind::of_etag);
    let mut entry = VerifiedFile {
        file: job.file.clone(),
        ok: false,
        expected: job.etag.clone(),
        actual: None,
        algorithm: kind.map(HashKind::name),
        bytes: 0,
        error: None,
    };
    let outcome = (|| -> Result<()> {
        check_shard_name(&job.file)?;
        let Some(kind) = kind else {
            return Err(CoreError::invalid_argument(
                "is not a link into the cache's blobs/ and nothing else names its hash",
            ));
        };
        let mut opened = files
            .open(&job.file, "a file of the model")?
            .ok_or_else(|| CoreError::not_found("the file is missing"))?;
        entry.bytes = opened.len;
        let actual = hash_file(&mut opened.file, opened.len, kind, &opened.path)?;
        entry.ok = Some(&actual) == job.etag.as_ref();
        entry.actual = Some(actual);
        Ok(())
    })();
    if let Err(e) = outcome {
        entry.error = Some(format!("{}: {}", e.code(), e.detail()));
    }
    entry
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use crate::hub::cache::RepoCache;
    use crate::hub::hash::{hex, Hasher};
    use std::fs;

    const COMMIT: &str = "0123456789abcdef0123456789abcdef01234567";

    fn put(repo: &RepoCache, kind: HashKind, path: &str, bytes: &[u8]) -> String {
        let mut h = Hasher::new(kind, bytes.len() as u64);
        h.update(bytes);
        let etag = h.finish_hex();
        let mut w = repo.open_blob(&etag, bytes.len() as u64).unwrap().unwrap();
        w.write(bytes).unwrap();
        w.finish().unwrap();
        repo.link(COMMIT, path, &etag).unwrap();
        etag
    }

    #[test]
    fn snapshots_check_every_blob_against_its_name() {
        let tmp = tempfile::tempdir().unwrap();
        let repo = RepoCache::new(tmp.path(), "org/name").unwrap();
        let weights: Vec<u8> = (0..3_000_000u32).map(|i| (i % 251) as u8).collect();
        let lfs = put(&repo, HashKind::Sha256, "model.safetensors", &weights);
        let git = put(&repo, HashKind::GitBlob, "config.json", b"{}");
        put(&repo, HashKind::GitBlob, "sub/a.txt", b"a");
        let snapshot = repo.snapshot_dir(COMMIT).unwrap();
        let report = verify_snapshot(&snapshot).unwrap();
        assert!(report.ok, "{report:?}");
        let names: Vec<&str> = report.files.iter().map(|f| f.file.as_str()).collect();
        assert_eq!(names, ["config.json", "model.safetensors", "sub/a.txt"]);
        assert_eq!(report.files[1].actual.as_deref(), Some(lfs.as_str()));
        assert_eq!(report.files[1].algorithm, Some("sha256"));
        assert_eq!(report.files[0].actual.as_deref(), Some(git.as_str()));
        assert_eq!(report.files[1].bytes, 3_000_000);

        // One byte changed, same size: the size checks pass, this does not.
        let blob = repo.blob_path(&lfs).unwrap();
        let mut bytes = fs::read(&blob).unwrap();
        bytes[1_234_567] ^= 1;
        fs::write(&blob, &bytes).unwrap();
        // A plain file where a link was: nothing names its hash.
        fs::remove_file(snapshot.join("sub/a.txt")).unwrap();
        fs::write(snapshot.join("sub/a.txt"), "a").unwrap();
        let report = verify_snapshot(&snapshot).unwrap();
        assert!(!report.ok);
        let bad = &report.files[1];
        assert_eq!(
            (bad.ok, bad.expected.as_deref()),
            (false, Some(lfs.as_str()))
        );
        assert_eq!(
            bad.actual,
            Some(hex(&<sha2::Sha256 as sha2::Digest>::digest(&bytes)))
        );
        assert!(report.files[0].ok);
        let plain = &report.files[2];
        assert_eq!((plain.ok, plain.expected.as_ref()), (false, None));
        assert!(
            plain.error.as_deref().unwrap().contains("blobs/"),
            "{plain:?}"
        );
    }

    #[test]
    fn plain_directories_check_the_published_hashes_and_never_read_system_files() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        fs::write(dir.join("config.json"), "{}").unwrap();
        std::os::unix::fs::symlink("/proc/self/pagemap", dir.join("model.safetensors")).unwrap();
        let git = {
            let mut h = Hasher::new(HashKind::GitBlob, 2);
            h.update(b"{}");
            h.finish_hex()
        };
        let expected = [
            Expected {
                file: "config.json".into(),
                etag: Some(git),
            },
            Expected {
                file: "model.safetensors".into(),
                etag: Some("a".repeat(64)),
            },
            Expected {
                file: "missing.bin".into(),
                etag: Some("b".repeat(64)),
            },
            Expected {
                file: "../escape".into(),
                etag: Some("c".repeat(64)),
            },
        ];
        let e = verify_snapshot(dir).unwrap_err();
        assert_eq!(e.code(), "ERR_INVALID_ARGUMENT");
        let report = verify_files(dir, &expected).unwrap();
        let verdicts: Vec<(bool, Option<&str>)> = report
            .files
            .iter()
            .map(|f| {
                (
                    f.ok,
                    f.error.as_deref().map(|e| e.split(':').next().unwrap()),
                )
            })
            .collect();
        assert_eq!(
            verdicts,
            // In path order: ../escape, config.json, missing.bin, model.safetensors.
            [
                (false, Some("ERR_UNSAFE_PATH")),
                (true, None),
                (false, Some("ERR_NOT_FOUND")),
                (false, Some("ERR_UNSAFE_PATH")),
            ]
        );
        assert!(!report.ok);
    }
}

'use strict'
// `download` and `verify` against the Hugging Face Hub: the HTTP only, through lib/remote.js's
// `httpGet` (its retries, validators, redirects and credential rules). What a revision holds,
// which files a download takes, how each is hashed and where it lands in the cache are the
// core's (binding.hubPlan, HubRepo, HubBlob, verifySnapshot, verifyFiles).

const binding = require('../binding.js')
const { codedError, httpGet, settings, checkAborted, hubOptions, hubNetwork, cacheVars, sleep, rethrowWithPath, isUrl, HUB } = require('./remote.js')

/**
 * The URL of the file `name` (from the listing at `listUrl`) under `base`: the core's rule
 * (the name checked, every byte a URL parser could read as something else percent-encoded),
 * then checked again as fetch will read it: the base's origin, a path below the base's.
 */
function shardUrl(base, name, listUrl) {
  const url = rethrowWithPath(listUrl, () => binding.shardUrl(base, name))
  const [at, under] = [new URL(url), new URL(base)]
  if (at.origin !== under.origin || !at.pathname.startsWith(under.pathname)) {
    throw codedError('ERR_UNSAFE_PATH', `${JSON.stringify(name)} resolves outside the model directory`, { path: listUrl })
  }
  return url
}

const MiB = 1024 * 1024
/**
 * Bytes asked for per range request of a file. A file holds one such part in memory while it
 * is fetched and the previous one while it is written (hashed and appended off the event loop).
 */
const PART = 8 * MiB
/** The most of the API's answer read: a revision listing 100,000 files is about 20 MB. */
const API_MAX_BYTES = 64 * MiB
/** huggingface_hub's default endpoint: `download` reaches the Hub unless told otherwise. */
const DEFAULT_ENDPOINT = 'https://huggingface.co'
/** Files fetched at once. */
const DEFAULT_CONCURRENCY = 4
/** How often a blob another download holds is looked at again. */
const LOCK_POLL_MS = 200

/** Glob patterns: a string or an array of strings (none: null). */
function patterns(value, key) {
  if (value === undefined || value === null) return null
  const list = typeof value === 'string' ? [value] : value
  if (!Array.isArray(list) || !list.every((p) => typeof p === 'string')) throw codedError('ERR_INVALID_ARGUMENT', `options.${key} must be a glob string or an array of them`)
  return list
}

/** The Hub's endpoint and token for a call that needs the network (`endpoint` default: the Hub). */
function network(o) {
  return hubNetwork({ ...o, endpoint: o.endpoint ?? process.env.HF_ENDPOINT ?? DEFAULT_ENDPOINT })
}

/** httpGet's settings for the endpoint, with the Hub context (token to its origin only). */
function hubSettings(options, net, id) {
  const http = {}
  for (const key of ['headers', 'timeoutMs', 'retries', 'retryDelayMs', 'signal', 'onProgress']) if (options[key] !== undefined) http[key] = options[key]
  http.concurrency = options.concurrency ?? DEFAULT_CONCURRENCY
  http[HUB] = { origin: new URL(net.endpoint).origin, token: net.token, resolve: `${net.endpoint}/${id}/resolve/` }
  return settings(http, net.endpoint)
}

/** The revision's files as the endpoint's API lists them (`?blobs=true`: their sizes and hashes), filtered. */
async function revisionPlan(net, id, revision, opts, stats, include, exclude) {
  const api = `${net.endpoint}/api/models/${id}/revision/${encodeURIComponent(revision)}?blobs=true`
  const answer = await httpGet(api, opts, stats, { limit: API_MAX_BYTES, what: 'the Hub API answer', code: 'ERR_IO' })
  const plan = rethrowWithPath(api, () => binding.hubPlan(answer.bytes, include, exclude ?? []))
  if (plan.files.length === 0 && plan.listed > 0 && include !== null) {
    throw codedError('ERR_NOT_FOUND', `none of the ${plan.listed} files of ${id} at '${revision}' matches options.include`, { path: id })
  }
  return { ...plan, api }
}

/**
 * Download model `id` at a revision into the Hugging Face cache, as huggingface_hub's
 * `snapshot_download` lays it out; resolves to the snapshot directory.
 */
async function download(id, options) {
  const o = hubOptions(options)
  if (typeof id !== 'string') throw codedError('ERR_INVALID_ARGUMENT', `download needs a model id 'org/name', got ${typeof id}`)
  const include = patterns(o.include, 'include')
  const exclude = patterns(o.exclude, 'exclude')
  const revision = o.revision ?? 'main'
  const repo = binding.HubRepo.open(id, o.cacheDir, cacheVars())
  const net = network(o)
  // Checks the revision; a damaged ref matters only offline (a download writes it anew).
  let cached = null
  try {
    cached = repo.cachedCommit(revision)
  } catch (e) {
    if (net.why || e?.code !== 'ERR_INVALID_MODEL') throw e
  }
  if (net.why) {
    if (cached !== null) return repo.snapshotDir(cached)
    throw codedError('ERR_NOT_FOUND', `${id} at revision '${revision}' is not in the Hugging Face cache at ${repo.dir}, and ${net.why}`, { path: id })
  }
  const caller = o.signal
  if (caller !== undefined && !(caller instanceof AbortSignal)) throw codedError('ERR_INVALID_ARGUMENT', 'options.signal must be an AbortSignal')
  // The first failure stops the other files (their `.incomplete` files stay, to resume).
  const stop = new AbortController()
  const opts = hubSettings({ ...o, signal: caller ? AbortSignal.any([caller, stop.signal]) : stop.signal }, net, id)
  const stats = { bytesFetched: 0 }
  checkAborted({ signal: caller })
  const plan = await revisionPlan(net, id, revision, opts, stats, include, exclude)
  const base = `${opts.hub.resolve}${plan.commit}/`
  const sizes = plan.files.map((f) => f.size)
  const progress = {
    loaded: 0,
    total: sizes.every((s) => s != null) ? sizes.reduce((a, b) => a + b, 0) : null,
    add(file, n) {
      this.loaded += n
      opts.onProgress?.({ file, loadedBytes: this.loaded, totalBytes: this.total, fetchedBytes: stats.bytesFetched })
    },
  }
  let failure = null
  let next = 0
  const worker = async () => {
    while (failure === null && next < plan.files.length) {
      const file = plan.files[next++]
      try {
        await fetchFile(repo, plan.commit, base, file, plan.api, opts, stats, progress)
      } catch (e) {
        if (failure === null) {
          failure = e
          stop.abort()
        }
      }
    }
  }
  await Promise.all(Array.from({ length: Math.min(opts.concurrency, plan.files.length) }, worker))
  if (failure !== null) {
    // A file stopped because another failed reports that one; a cancellation is the caller's.
    if (caller?.aborted) checkAborted({ signal: caller })
    throw failure
  }
  // The ref last: it names a snapshot only once the snapshot is complete.
  repo.writeRef(revision, plan.commit)
  return repo.snapshotDir(plan.commit)
}

/** One file of the plan: its blob fetched (unless there), checked, and linked from the snapshot. */
async function fetchFile(repo, commit, base, file, api, opts, stats, progress) {
  const url = shardUrl(base, file.path, api)
  let { etag, size } = file
  if (etag == null || size == null) {
    // The API did not say: the file's first byte tells (X-Linked-Etag or ETag, its size).
    const head = await httpGet(url, opts, stats, { range: [0, 0] })
    etag = announcedEtag(head, url)
    size = head.total ?? head.bytes.length
  }
  if (!repo.hasBlob(etag, size)) {
    const blob = await acquire(repo, etag, size, opts)
    if (blob !== null) {
      try {
        await fill(blob, url, etag, size, opts, stats, (n) => progress.add(file.path, n))
        await blob.finishAsync()
      } finally {
        blob.release()
      }
    } else {
      progress.add(file.path, size)
    }
  } else {
    progress.add(file.path, size)
  }
  repo.link(commit, file.path, etag)
}

/** The blob name a response announces: X-Linked-Etag (an LFS file), else its ETag. */
function announcedEtag(res, url) {
  const raw = res.linkedEtag ?? res.validators.etag
  if (raw === null || raw === undefined) throw codedError('ERR_IO', 'the endpoint sent neither X-Linked-Etag nor ETag: it names no blob (not a Hub endpoint?)', { path: url })
  return rethrowWithPath(url, () => binding.hubEtag(raw, res.linkedEtag ? 'X-Linked-Etag' : 'ETag'))
}

/**
 * The blob's writer, once no other download (this process's or another's, huggingface_hub's
 * included) holds it; null when the blob appeared in the meantime.
 */
async function acquire(repo, etag, size, opts) {
  for (;;) {
    const blob = await repo.openBlobAsync(etag, size)
    if (blob !== null) {
      if (!repo.hasBlob(etag, size)) return blob
      blob.release()
      return null
    }
    await sleep(LOCK_POLL_MS)
    checkAborted(opts)
    if (repo.hasBlob(etag, size)) return null
  }
}

/**
 * Fetch the blob from where its `.incomplete` file ends, PART bytes a request: the first from
 * the resolve URL (its redirect, if any, gives the data's location, where the rest is asked
 * for with that answer's validators). Each part is written while the next is fetched, and no
 * write is left running when this settles.
 */
async function fill(blob, url, etag, size, opts, stats, onBytes) {
  let at = blob.resumedBytes
  if (at > 0) onBytes(at)
  let source = url
  let seen = null
  let pending = null
  try {
    while (at < size) {
      checkAborted(opts)
      const part = await httpGet(source, opts, stats, { range: [at, Math.min(size, at + PART) - 1], seen })
      if (seen === null) {
        if (announcedEtag(part, url) !== etag) throw codedError('ERR_IO', `the endpoint now serves another file than the one its API listed (blob ${etag})`, { path: url })
        if (part.total !== null && part.total !== size) throw codedError('ERR_IO', `the endpoint serves ${part.total} bytes, its API listed ${size}`, { path: url })
        source = part.location
        seen = part.validators
      }
      if (pending !== null) await pending
      pending = blob.writeAsync(part.bytes)
      // Awaited with the next part: never an unhandled rejection meanwhile.
      pending.catch(() => {})
      at += part.bytes.length
      onBytes(part.bytes.length)
    }
    if (pending !== null) await pending
  } catch (e) {
    await pending?.catch(() => {})
    throw e
  }
}

/**
 * Check files against the hashes the Hub names them by: a cache snapshot directory or a
 * model id in the cache (each file against the blob it links to), or, with `options.id`, a
 * plain directory against the hashes the endpoint's API publishes for the revision.
 */
async function verify(target, options) {
  const o = hubOptions(options)
  if (typeof target !== 'string') throw codedError('ERR_INVALID_ARGUMENT', `verify needs a directory or a model id, got ${typeof target}`)
  if (isUrl(target)) throw codedError('ERR_INVALID_ARGUMENT', 'verify checks files on disk: download the model first', { path: target })
  if (o.id !== undefined && typeof o.id !== 'string') throw codedError('ERR_INVALID_ARGUMENT', `options.id must be a model id string, got ${typeof o.id}`)
  const revision = o.revision ?? 'main'
  if (o.id !== undefined) {
    const net = network(o)
    if (net.why) throw codedError('ERR_INVALID_ARGUMENT', `a plain directory is checked against the Hub's published hashes, and ${net.why}`, { path: target })
    binding.HubRepo.open(o.id, '.', {}) // checks the id
    const opts = hubSettings(o, net, o.id)
    const plan = await revisionPlan(net, o.id, revision, opts, { bytesFetched: 0 }, patterns(o.include, 'include'), patterns(o.exclude, 'exclude'))
    const unnamed = plan.files.find((f) => f.etag == null)
    if (unnamed) throw codedError('ERR_IO', `the endpoint's API does not publish the hash of ${unnamed.path} (blobs=true): nothing to check it against`, { path: plan.api })
    return binding.verifyFiles(target, plan.files.map((f) => ({ file: f.path, etag: f.etag })))
  }
  // A path (a directory of that name wins over an id), else a model id in the cache.
  const found = binding.resolveModelId(target, revision, o.cacheDir, cacheVars())
  if (found == null) return binding.verifySnapshot(target)
  if (found.commit == null) throw codedError('ERR_NOT_FOUND', `there is no directory '${target}', and model ${target} at revision '${revision}' is not in the Hugging Face cache${found.cacheDir ? ` at ${found.cacheDir}` : ''}`, { path: target })
  return binding.verifySnapshot(binding.HubRepo.open(target, found.cacheDir, {}).snapshotDir(found.commit))
}

module.exports = { download, verify }

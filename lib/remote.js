'use strict'
// HTTP(S) for remote weights, using Node's built-in fetch: the one driver of the core's
// sans-IO opener (binding.RemoteOpener decides which bytes to read and what they mean; this
// file fetches them with range requests, under its validators, retries, redirect and
// credential rules and bounds), and the reader over what it opened. A server that ignores
// `Range` (answers 200) is read once, whole, and served from memory.

const binding = require('../binding.js')

const MiB = 1024 * 1024
/**
 * Size cap of a file whose server ignores Range (200 to a range request), read into memory
 * whole: 16 MiB (the body is streamed and dropped at the cap + 1 byte; a larger declared
 * Content-Length is refused before the body is read). The caps of files read whole on
 * purpose (config.json, an index, companions) are the core's, in each request.
 */
const CAPS = { unranged: 16 * MiB }
const MAX_REDIRECTS = 10
const DEFAULTS = { timeoutMs: 30_000, retries: 2, retryDelayMs: 200, concurrency: 8 }

function codedError(code, message, extra = {}) {
  if (typeof extra.path === 'string') extra = { ...extra, path: redactUrl(extra.path) }
  const err = new Error(redactUrl(extra.path ? `${extra.path}: ${extra.tensor ? `tensor '${extra.tensor}': ` : ''}${message}` : message))
  err.code = code
  for (const [k, v] of Object.entries(extra)) if (v !== undefined) err[k] = v
  return err
}

/**
 * `text` with the userinfo (`user:password@`) of every URL in it shown as `***@`: what a
 * message, an error's path or a report says of a URL, which lands in logs. (The URL itself
 * is used as given.)
 */
function redactUrl(text) {
  return String(text).replace(/\b([a-z][a-z0-9+.-]*:\/\/)[^\s/\\?#]*@/gi, '$1***@')
}

/** Our own errors (DOMExceptions carry a numeric `code` too). */
function isCoded(e) {
  return typeof e?.code === 'string' && e.code.startsWith('ERR_')
}

function isUrl(s) {
  return typeof s === 'string' && /^https?:\/\//i.test(s)
}

/** Internal option key: the Hugging Face context of a model id read over HTTP (see hubOptions). */
const HUB = Symbol('hub')
/**
 * Internal option key: the origin of the model the caller named (its URL's, or the Hub
 * endpoint's), the only one its `headers` (and a Hub token) are sent to. Every file of a
 * model is below its URL, so only a redirect leads elsewhere (the Hub sends LFS files to a
 * CDN); such requests carry none of them.
 */
const HOME = Symbol('home')
/** Internal error key: the server said the file does not exist (HTTP 404 or 410), which a model directory's discovery moves past. */
const MISSING = Symbol('missing')
/** Internal error key: an error of the HTTP layer (not of the bytes it brought). */
const FROM_HTTP = Symbol('fromHttp')

const isPlainObject = (v) => v !== null && typeof v === 'object' && !Array.isArray(v) && [Object.prototype, null].includes(Object.getPrototypeOf(v))

/** Options of openUrl / loadPretrained(url) of `url`, checked and completed with the defaults. */
function settings(options, url) {
  const bad = (message) => codedError('ERR_INVALID_ARGUMENT', message)
  if (options === undefined || options === null) options = {}
  if (typeof options !== 'object' || Array.isArray(options)) throw bad(`options must be an object, got ${typeof options}`)
  const o = { ...DEFAULTS }
  for (const key of ['timeoutMs', 'retries', 'retryDelayMs', 'concurrency']) if (options[key] !== undefined) o[key] = options[key]
  if (!(typeof o.timeoutMs === 'number' && Number.isFinite(o.timeoutMs) && o.timeoutMs > 0)) throw bad(`options.timeoutMs must be a finite number > 0, got ${String(o.timeoutMs)}`)
  if (!(Number.isSafeInteger(o.retries) && o.retries >= 0)) throw bad(`options.retries must be a non-negative integer, got ${String(o.retries)}`)
  if (!(typeof o.retryDelayMs === 'number' && Number.isFinite(o.retryDelayMs) && o.retryDelayMs >= 0)) throw bad(`options.retryDelayMs must be a finite number >= 0, got ${String(o.retryDelayMs)}`)
  if (!(Number.isSafeInteger(o.concurrency) && o.concurrency >= 1)) throw bad(`options.concurrency must be an integer >= 1, got ${String(o.concurrency)}`)
  const headers = options.headers ?? {}
  if (!isPlainObject(headers)) throw bad('options.headers must be a plain object of strings')
  o.headers = {}
  for (const [k, v] of Object.entries(headers)) {
    if (typeof v !== 'string') throw bad(`options.headers['${k}'] must be a string, got ${typeof v}`)
    o.headers[k] = v
  }
  if (options.onProgress !== undefined && typeof options.onProgress !== 'function') throw bad('options.onProgress must be a function')
  o.onProgress = options.onProgress
  if (options.signal !== undefined && !(options.signal instanceof AbortSignal)) throw bad('options.signal must be an AbortSignal')
  o.signal = options.signal
  o.hub = options[HUB] ?? null
  try {
    o.home = options[HOME] ?? new URL(url).origin
  } catch {
    throw bad(`not a valid URL: ${redactUrl(url)}`)
  }
  return o
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms))

/** ERR_ABORTED: the caller's `options.signal` fired (its reason is the `cause`). */
function abortedError(signal) {
  return codedError('ERR_ABORTED', 'cancelled by options.signal', { name: 'AbortError', cause: signal.reason })
}

/** Throw ERR_ABORTED if the caller's signal fired. */
function checkAborted(opts) {
  if (opts.signal?.aborted) throw abortedError(opts.signal)
}

/** A strong ETag can go in If-Range; a weak one cannot (RFC 9110 13.1.5). */
const strongEtag = (etag) => (etag && !etag.startsWith('W/') ? etag : null)

/** What a response says about the file's identity, to compare with what open saw. */
function validatorsOf(res, total) {
  return { total, etag: res.headers.get('etag'), lastModified: res.headers.get('last-modified') }
}

function changedError(url, what) {
  return codedError('ERR_IO', `the file changed on the server since it was opened (${what}); open it again`, { path: url, retry: false })
}

/** The file a ranged response describes must be the one open saw. */
function checkSameFile(url, seen, now) {
  if (!seen) return
  if (seen.total !== null && now.total !== null && seen.total !== now.total) throw changedError(url, `size ${seen.total} → ${now.total}`)
  if (seen.etag && now.etag && seen.etag !== now.etag) throw changedError(url, `ETag ${seen.etag} → ${now.etag}`)
  if (seen.lastModified && now.lastModified && seen.lastModified !== now.lastModified) throw changedError(url, `Last-Modified ${seen.lastModified} → ${now.lastModified}`)
}

/**
 * Read a body as a stream into one buffer of at most `max` bytes: an answer that runs past it
 * is cancelled at once (never buffered) and fails with `tooLarge(bytesSeen)`.
 */
async function readBody(res, max, tooLarge) {
  if (!res.body) return new Uint8Array(0)
  const declared = Number(res.headers.get('content-length') ?? NaN)
  const reader = res.body.getReader()
  // A declared length within the cap sizes the buffer once. Otherwise reserve up to 64 MiB at
  // once (pages the body never reaches stay untouched, so they cost no memory) and grow past
  // that only for larger caps: doubling a buffer would hold old and new at the same time.
  let out = new Uint8Array(Number.isSafeInteger(declared) && declared >= 0 && declared <= max ? declared : Math.min(max, 64 * MiB))
  let n = 0
  try {
    for (;;) {
      const { done, value } = await reader.read()
      if (done) break
      if (n + value.length > max) throw tooLarge(n + value.length)
      if (n + value.length > out.length) {
        const grown = new Uint8Array(Math.min(max, Math.max(out.length * 2, n + value.length)))
        grown.set(out.subarray(0, n))
        out = grown
      }
      out.set(value, n)
      n += value.length
    }
  } catch (e) {
    await reader.cancel().catch(() => {})
    throw e
  }
  return n === out.length ? out : out.subarray(0, n)
}

/**
 * GET `url`: the byte range `range` = [start, end] (inclusive) of a file, or (no range) the
 * whole of a small file of at most `limit` bytes (`code` and `what` name the error past it). Resolves to `{ bytes, total, ranged,
 * validators, repoCommit, linkedEtag, location }`: `ranged` is false when the server ignored
 * the range and sent the whole file (accepted up to CAPS.unranged); with `opts.hub`, the Hub's
 * X-Repo-Commit and X-Linked-Etag of any hop; `location`, the URL that answered (after
 * redirects). `opts.signal` (the caller's AbortSignal) cancels it: ERR_ABORTED, not retried. `seen`: the validators open saw (total size, ETag,
 * Last-Modified); the request then carries If-Range, and any sign of another file fails.
 * Never holds more than the bytes asked for (or the cap) plus one network chunk. Retries
 * network errors, timeouts, short bodies and 5xx with exponential backoff.
 */
async function httpGet(url, opts, stats, { range = null, limit = Infinity, what = 'the file', code = 'ERR_IO', seen = null } = {}) {
  let lastError
  for (let attempt = 0; attempt <= opts.retries; attempt++) {
    if (attempt > 0) await sleep(opts.retryDelayMs * 2 ** (attempt - 1))
    checkAborted(opts)
    let res
    try {
      // Ours: fetch itself asks for identity when a Range header is present (Fetch standard).
      const own = {}
      if (!range) own['Accept-Encoding'] = 'identity'
      if (range) {
        own.Range = `bytes=${range[0]}-${range[1]}`
        const validator = strongEtag(seen?.etag) ?? seen?.lastModified
        if (validator) own['If-Range'] = validator
      }
      const fail = (code, message, retry) => codedError(code, message, { path: url, retry })
      const hub = opts.hub
      const timeout = AbortSignal.timeout(opts.timeoutMs)
      const signal = opts.signal ? AbortSignal.any([opts.signal, timeout]) : timeout
      // Redirects are followed here, so that the caller's headers and the token go to the
      // model's origin only (see HOME), and a model id's Hub headers on the way
      // (X-Repo-Commit, X-Linked-Size, X-Linked-Etag) are seen.
      let target = url
      let repoCommit = null
      let linkedSize = null
      let linkedEtag = null
      for (let hop = 0; ; hop++) {
        const home = new URL(target).origin === opts.home
        const sent = home ? { ...opts.headers, ...own } : { ...own }
        if (home && hub?.token) sent.Authorization = `Bearer ${hub.token}`
        res = await fetch(target, { headers: sent, signal, redirect: 'manual' })
        if (hub) {
          repoCommit ??= res.headers.get('x-repo-commit')
          linkedSize ??= res.headers.get('x-linked-size')
          linkedEtag ??= res.headers.get('x-linked-etag')
        }
        if (![301, 302, 303, 307, 308].includes(res.status)) break
        const location = res.headers.get('location')
        await res.body?.cancel().catch(() => {})
        if (location === null) throw fail('ERR_IO', `HTTP ${res.status} without a Location header`, false)
        if (hop >= MAX_REDIRECTS) throw fail('ERR_IO', `more than ${MAX_REDIRECTS} redirects`, false)
        target = new URL(location, target).href
        if (!isUrl(target)) throw fail('ERR_IO', `redirected to a URL that is not http(s)`, false)
      }
      if (hub && (res.status === 401 || res.status === 403)) {
        // The Hub answers 401 for a model that does not exist as for a private one.
        throw res.status === 401
          ? fail('ERR_NOT_FOUND', 'HTTP 401: no such model, or a private or gated one that needs a token (options.token or HF_TOKEN)', false)
          : fail('ERR_IO', 'HTTP 403: access denied (a gated model needs its conditions accepted, and a token allowed to read it)', false)
      }
      const linked = linkedSize === null || !/^\d+$/.test(linkedSize) ? null : Number(linkedSize)
      const checkLinked = (total) => {
        if (linked !== null && total !== null && total !== linked) throw fail('ERR_IO', `the Hub announced ${linked} bytes (X-Linked-Size) but the data is ${total} bytes`, false)
      }
      if (res.status === 404 || res.status === 410) throw Object.assign(fail('ERR_NOT_FOUND', `HTTP ${res.status}`, false), { [MISSING]: true })
      if (res.status === 416 && seen) throw changedError(url, `HTTP 416: now shorter than byte ${range?.[0]}`)
      if (res.status === 416) throw fail('ERR_INCOMPLETE_FILE', `HTTP 416: the file is shorter than byte ${range?.[0]}`, false)
      if (res.status >= 500 || res.status === 429) throw fail('ERR_IO', `HTTP ${res.status} ${res.statusText}`, true)
      if (res.status !== 200 && res.status !== 206) throw fail('ERR_IO', `HTTP ${res.status} ${res.statusText}`, false)
      const ranged = res.status === 206
      const declared = res.headers.get('content-length')
      const declaredLength = declared === null ? null : Number(declared)
      // Node's fetch would decompress: a range is of the stored bytes, and a compressed body
      // could inflate without bound. Never read one.
      const encoding = (res.headers.get('content-encoding') ?? 'identity').trim().toLowerCase()
      if (range && encoding !== 'identity') {
        throw fail('ERR_IO', `the server sent a range with Content-Encoding '${encoding}' although the request said identity; it is not read`, false)
      }
      if (ranged && !range) throw fail('ERR_IO', 'HTTP 206 to a request without Range', false)
      if (ranged) {
        const m = /^bytes (\d+)-(\d+)\/(\d+|\*)$/.exec(res.headers.get('content-range') ?? '')
        const total = m && m[3] !== '*' ? Number(m[3]) : null
        const want = m ? Math.min(range[1], (total ?? Infinity) - 1) - range[0] + 1 : 0
        if (!m || Number(m[1]) !== range[0] || Number(m[2]) !== range[0] + want - 1) {
          throw fail('ERR_IO', `bad Content-Range '${res.headers.get('content-range')}' for bytes=${range[0]}-${range[1]}`, false)
        }
        const validators = validatorsOf(res, total)
        checkSameFile(url, seen, validators)
        checkLinked(total)
        if (declaredLength !== null && declaredLength > want) {
          throw fail('ERR_IO', `the server declares ${declared} bytes for a range of ${want}; it is not read`, false)
        }
        const bytes = await readBody(res, want, (n) => fail('ERR_IO', `the server sent more than the ${want} bytes asked for (${n} so far); stopped reading`, false))
        stats.bytesFetched += bytes.length
        if (bytes.length !== want) throw fail('ERR_INCOMPLETE_FILE', `short response: asked for ${want} bytes from ${range[0]}, got ${bytes.length}`, true)
        return { bytes, total, ranged, validators, repoCommit, linkedEtag, location: target }
      }
      // A whole body: the file asked for, or a server that ignored Range.
      if (range && seen) {
        const why = strongEtag(seen.etag) ?? seen.lastModified ? 'If-Range did not match' : 'the server no longer honours Range'
        throw changedError(url, `HTTP 200 to a range request: ${why}`)
      }
      // A file wanted whole under a cap (asked for by range) may come whole up to that cap.
      const cap = range && limit === Infinity ? CAPS.unranged : limit
      const tooLarge = (n) =>
        range && limit === Infinity
          ? fail('ERR_IO', `the server ignores Range requests and the file is larger than ${cap / MiB} MiB (${n} bytes or more), the most read into memory; use a server that honours Range, or download the file and open it locally`, false)
          : fail(code, `${what} is larger than ${cap / MiB} MiB (${n} bytes or more), the most read`, false)
      if (declaredLength !== null && declaredLength > cap) throw tooLarge(declaredLength)
      const bytes = await readBody(res, cap, tooLarge)
      stats.bytesFetched += bytes.length
      if (encoding === 'identity' && declaredLength !== null && declaredLength !== bytes.length) {
        throw fail('ERR_INCOMPLETE_FILE', `short response: ${bytes.length} of ${declared} bytes`, true)
      }
      checkLinked(bytes.length)
      return { bytes, total: bytes.length, ranged, validators: validatorsOf(res, bytes.length), repoCommit, linkedEtag, location: target }
    } catch (e) {
      // Whatever failed, the rest of the body is not wanted.
      await res?.body?.cancel().catch(() => {})
      checkAborted(opts)
      if (isCoded(e) && e.retry === false) {
        delete e.retry
        throw e
      }
      lastError = e
    }
  }
  if (isCoded(lastError)) {
    delete lastError.retry
    throw lastError
  }
  const why = lastError?.name === 'TimeoutError' ? `timed out after ${opts.timeoutMs} ms` : redactUrl(lastError?.cause?.message ?? lastError?.message ?? lastError)
  throw codedError('ERR_IO', `request failed after ${opts.retries + 1} attempt(s): ${why}`, { path: url })
}

/** Native errors from remote data name the URL (fromBytes knows no path), redacted. */
function rethrowWithPath(url, fn, tensor) {
  try {
    return fn()
  } catch (e) {
    if (isCoded(e) && !e.path) {
      e.path = url
      e.message = `${url}: ${e.message}`
    }
    if (e && tensor && !e.tensor) e.tensor = tensor
    throw redacted(e)
  }
}

/** `e` with its path and message redacted (see redactUrl). */
function redacted(e) {
  if (e !== null && typeof e === 'object') {
    if (typeof e.path === 'string') e.path = redactUrl(e.path)
    if (typeof e.message === 'string') e.message = redactUrl(e.message)
  }
  return e
}

async function mapLimit(items, limit, fn) {
  const results = new Array(items.length)
  let next = 0
  const worker = async () => {
    while (next < items.length) {
      const i = next++
      results[i] = await fn(items[i], i)
    }
  }
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker))
  return results
}

// ---------------------------------------------------------------------------------------
// The one driver of the core's opener (binding.RemoteOpener: it says which bytes it needs,
// decides everything from them) and the one remote reader over what it opened
// (binding.RemoteWeights, whose tensors are served from the bytes of their spans).

/** The URLs of a model directory's files and of a split GGUF's later files: the core's (under the base, or beside the file), checked again as fetch reads them. */
function checkUnder(url, request, root) {
  if (request.file === '') return
  const [at, under] = [new URL(request.url), new URL(root)]
  if (at.origin !== under.origin) {
    throw codedError('ERR_UNSAFE_PATH', `${JSON.stringify(request.file)} resolves outside the model directory`, { path: url })
  }
}

/**
 * Open `url` through the core's opener (`kind`: 'file', 'any' — a file, else the directory
 * of that name — 'directory', or 'model' — a directory, or a `.gguf` file as a model),
 * fetching the ranges it asks for (concurrently, at most `opts.concurrency` at once). Resolves to `{ native, seen }`: the open RemoteWeights and the
 * validators (size, ETag, Last-Modified) of each file's first reply, which later ranges must
 * match.
 */
async function openRemote(url, kind, format, opts, stats, record = null) {
  const opener = rethrowWithPath(url, () => binding.RemoteOpener.create(url, kind, format ?? null))
  const seen = new Map()
  for (;;) {
    const step = rethrowWithPath(url, () => opener.step())
    if (!Array.isArray(step)) return { native: step, seen }
    await mapLimit(step, opts.concurrency, async (r) => {
      checkUnder(url, r, url)
      // A file wanted whole (at most `cap` bytes) is asked for as its first cap + 1 bytes: the
      // reply's length says whether it is past the cap, which the core refuses from the size.
      const whole = r.cap != null ? { limit: r.cap, what: r.file, code: 'ERR_INVALID_MODEL' } : {}
      const range = r.cap != null ? [0, r.cap] : [r.start, r.end - 1]
      let res
      try {
        res = await httpGet(r.url, opts, stats, { range, seen: seen.get(r.url), ...whole })
      } catch (e) {
        if (e?.[MISSING]) return rethrowWithPath(r.url, () => opener.reply(r.id, null))
        if (e && typeof e === 'object') e[FROM_HTTP] = true
        throw e
      }
      if (!seen.has(r.url)) seen.set(r.url, res.validators)
      record?.(r, res)
      // A model id at a branch or tag: the rest is read at the commit config.json came from
      // (the Hub's X-Repo-Commit), so a push in between cannot mix two versions.
      if (r.file === 'config.json' && opts.hub && COMMIT.test(res.repoCommit ?? '')) opener.rebase(`${opts.hub.resolve}${res.repoCommit}/`)
      rethrowWithPath(r.url, () => opener.reply(r.id, res.bytes, res.total))
      if (kind === 'file') opts.onProgress?.({ loadedBytes: stats.bytesFetched, totalBytes: res.total })
    })
  }
}

const FROM_CORE = Symbol('fromCore')

/**
 * A weights file or model directory behind a URL, opened by the core's opener: its listing at
 * open, each tensor fetched (its spans, by range requests) and decoded natively when asked for.
 * Every read touches the network, so every read returns a Promise (`getTensor` and its
 * `…Async` alias alike); there is no synchronous read.
 */
class RemoteWeights {
  constructor(key, url, native, seen, opts, stats, defaultAs) {
    if (key !== FROM_CORE) throw codedError('ERR_INVALID_ARGUMENT', 'remote readers come from openWeights, SafeTensorsFile.openUrl, GgufFile.openUrl and Model.loadPretrained')
    this.url = url
    this._native = native
    this._seen = seen
    this._opts = opts
    this._stats = stats
    this._defaultAs = defaultAs
  }

  _call(fn, tensor) {
    return rethrowWithPath(this.url, () => fn(this._native), tensor)
  }
  get path() { return this.url }
  /** A model directory's URL (ending in '/'), or null for a file. */
  get dir() { return this._call((n) => n.base) }
  get format() { return this._call((n) => n.format) }
  get config() { return this._call((n) => n.config) }
  get files() { return this._call((n) => n.files) }
  get metadata() { return this._call((n) => n.metadata) }
  get tensorNames() { return this._call((n) => n.tensorNames) }
  get numParameters() { return this._call((n) => n.numParameters) }
  get byteLength() { return this._call((n) => n.byteLength) }
  /** Bytes transferred so far (headers and tensors). */
  get bytesFetched() { return this._stats.bytesFetched }
  has(name) { return this._call((n) => n.has(name)) }
  info(name) { return this._call((n) => n.info(name), name) }

  _options(options) {
    return this._defaultAs === undefined || options?.as !== undefined ? options : { ...(options ?? {}), as: this._defaultAs }
  }

  /** The bytes of `spans`, concatenated (null: none to fetch, the file is held). */
  async _fetch(spans) {
    if (spans === null) return null
    const parts = []
    for (const s of spans) {
      if (s.length === 0) continue
      const res = await httpGet(s.url, this._opts, this._stats, { range: [s.start, s.start + s.length - 1], seen: this._seen.get(s.url) })
      parts.push(res.bytes)
    }
    this._opts.onProgress?.({ loadedBytes: this._stats.bytesFetched, totalBytes: this.byteLength })
    return parts.length === 1 ? parts[0] : Buffer.concat(parts)
  }

  async getTensor(name, options) {
    const bytes = await this._fetch(this._call((n) => n.spans(name), name))
    return this._call((n) => n.serve(name, bytes, this._options(options)), name)
  }

  async getSlice(name, ranges, options) {
    const slice = this._call((n) => n.sliceSpans(name, ranges), name)
    const bytes = await this._fetch(slice === null ? null : slice.spans)
    return this._call((n) => n.serveSlice(name, ranges, bytes, this._options(options)), name)
  }

  async tensors(options) {
    const names = this.tensorNames
    const results = await mapLimit(names, this._opts.concurrency, (n) => this.getTensor(n, options))
    const out = {}
    // Defined, not assigned: a tensor named '__proto__' is data.
    names.forEach((n, i) => Object.defineProperty(out, n, { value: results[i], writable: true, enumerable: true, configurable: true }))
    return out
  }

  getTensorAsync(name, options) { return this.getTensor(name, options) }
  getSliceAsync(name, ranges, options) { return this.getSlice(name, ranges, options) }
  tensorsAsync(options) { return this.tensors(options) }

  /** Release the listing now (later calls throw ERR_CLOSED); tensors handed out stay valid. */
  close() { this._native.close() }
  [Symbol.dispose ?? Symbol.for('nodejs.dispose')]() { this.close() }
}

/** A GGUF file behind a URL: `RemoteWeights` with what only GGUF's header has (the header's `GgufFile` view). */
class RemoteGgufFile extends RemoteWeights {
  constructor(...args) {
    super(...args)
    this._header = this._native.gguf()
  }
  _gguf(fn, tensor) {
    return rethrowWithPath(this.url, () => fn(this._header), tensor)
  }
  get version() { return this._gguf((h) => h.version) }
  get alignment() { return this._gguf((h) => h.alignment) }
  get dataOffset() { return this._gguf((h) => h.dataOffset) }
  get metadata() { return this._gguf((h) => h.metadata) }
  get metadataTypes() { return this._gguf((h) => h.metadataTypes) }
  info(name) { return this._gguf((h) => h.info(name), name) }
  close() {
    this._header?.close()
    super.close()
  }
}

/**
 * Open a weights file or model directory behind a URL (`kind` as openRemote's), read as
 * `format` when given: `required` names the format a factory insists on (SafeTensorsFile.openUrl,
 * GgufFile.openUrl).
 */
async function openUrl(url, options, { kind = 'any', format, required, caller, defaultAs } = {}) {
  if (!isUrl(url)) throw codedError('ERR_INVALID_ARGUMENT', `${caller} needs an http:// or https:// URL, got ${typeof url === 'string' ? JSON.stringify(url) : typeof url}`)
  const opts = settings(options, url)
  const stats = { bytesFetched: 0 }
  const { native, seen } = await openRemote(url, kind, format ?? required, opts, stats)
  const gguf = native.gguf() !== null
  // The URL as the core named what it opened (a model directory's ends in '/').
  const file = new (gguf ? RemoteGgufFile : RemoteWeights)(FROM_CORE, native.path, native, seen, opts, stats, defaultAs)
  if (kind === 'model' && options?.onProgress) {
    for (const f of file.files) options.onProgress({ file: f, loadedBytes: stats.bytesFetched, totalBytes: null })
  }
  return file
}

/** `openWeights(url)`: a file of any format, or a model directory. */
/** `options` without `keys` (as given when it is not an object: settings() refuses it). */
function without(options, ...keys) {
  if (options === null || typeof options !== 'object' || Array.isArray(options)) return options
  const rest = { ...options }
  for (const k of keys) delete rest[k]
  return rest
}

function openRemoteWeights(url, options) {
  return openUrl(url, without(options, 'format', 'backend'), { format: options?.format, caller: 'openWeights' })
}

async function loadPretrainedUrl(url, options) {
  const as = options?.as
  if (as !== undefined && as !== 'native' && as !== 'F32') {
    throw codedError('ERR_INVALID_ARGUMENT', `options.as must be 'native' or 'F32', not '${as}'`)
  }
  return openUrl(url, without(options, 'as'), { kind: 'model', caller: 'loadPretrained', defaultAs: as })
}

// ---------------------------------------------------------------------------------------
// inspect / validate / convert of a URL: the native functions take paths, so a URL's
// file (or directory) is copied into a private temporary directory, the function runs on
// the copy, and every path of the copy in its result or error is replaced by the URL. A
// SafeTensors file is copied as its header only, in a sparse file of its full length, when
// `data` is false (inspect, validate: they read nothing else, so the verdict is the local one).

/** Bytes fetched per range request when copying a file. */
const COPY_CHUNK = 16 * MiB

/** Write `bytes` at `position` of the file `dest` (created, with its directory, if new). */
function writeAt(dest, bytes, position) {
  fs().mkdirSync(require('node:path').dirname(dest), { recursive: true })
  const fd = fs().openSync(dest, fs().existsSync(dest) ? 'r+' : 'wx', 0o600)
  try {
    let done = 0
    while (done < bytes.length) done += fs().writeSync(fd, bytes, done, bytes.length - done, position + done)
  } finally {
    fs().closeSync(fd)
  }
}

const fs = () => require('node:fs')

/**
 * A local copy of what `url` names in `root`, made of what the core's opener reads (the same
 * requests as openWeights: headers, whole small files, a directory's config.json and index),
 * each file a sparse file of its full length holding the bytes read at their offsets; when
 * `data` is wanted (a conversion), the rest of each weight file and the companion files the
 * server has. Files the server lacks are left out, so the native call reports them as it
 * would locally. Resolves to `{ local, dir, error }`: the local path standing for `url`,
 * whether it is a directory, and the opener's error if the bytes did not open (the native
 * call then gives the local verdict on the same bytes); an error of the HTTP layer is thrown.
 */
async function copyTarget(url, root, data, opts, stats) {
  const path = require('node:path')
  // The copy keeps the URL's last name where it is a plain one (reports name the URL anyway;
  // a GGUF's general.name is the directory's name, as locally).
  const plainName = (u, fallback) => {
    const last = new URL(u).pathname.split('/').filter(Boolean).pop() ?? ''
    return /^[A-Za-z0-9_-][A-Za-z0-9._-]{0,200}$/.test(last) ? last : fallback
  }
  const fileDest = path.join(root, plainName(url, 'file'))
  const dirRoot = path.join(root, 'dir', plainName(url.endsWith('/') ? url : `${url}/`, 'model'))
  // A split GGUF's later files lie beside its first, as the local reader looks for them.
  const destOf = (file, beside) => (file === '' ? fileDest : beside ? path.join(root, path.basename(file)) : path.join(dirRoot, ...file.split('/')))
  const files = new Map() // file → { url, total, have: bytes copied, beside }
  const record = (r, res) => {
    const dest = destOf(r.file, r.beside)
    writeAt(dest, res.bytes, r.cap != null || !res.ranged ? 0 : r.start)
    if (!files.has(r.file)) {
      files.set(r.file, { url: r.url, total: res.total, have: 0, beside: r.beside })
      fs().truncateSync(dest, res.total)
    }
    files.get(r.file).have += res.bytes.length
  }
  let native = null
  let error = null
  try {
    native = (await openRemote(url, 'any', undefined, opts, stats, record)).native
  } catch (e) {
    if (e?.[FROM_HTTP] || files.size === 0) throw e
    error = e
  }
  const dir = [...files].some(([f, { beside }]) => f !== '' && !beside)
  if (data && native !== null) {
    const seen = new Map()
    for (const [file, { url: at, total, have, beside }] of files) {
      const dest = destOf(file, beside)
      if (have >= total) continue
      for (let start = 0; start < total; start += COPY_CHUNK) {
        const res = await httpGet(at, opts, stats, { range: [start, Math.min(total, start + COPY_CHUNK) - 1], seen: seen.get(at) })
        if (!seen.has(at)) seen.set(at, res.validators)
        writeAt(dest, res.bytes, start)
      }
    }
    // A conversion reads the tokenizer and the files beside it as well (those the server has).
    for (const { file, url: at, cap } of native.companions()) {
      try {
        const res = await httpGet(at, opts, stats, { limit: cap, what: file, code: 'ERR_INVALID_MODEL' })
        writeAt(destOf(file), res.bytes, 0)
      } catch (e) {
        if (!e?.[MISSING]) throw e
      }
    }
  }
  native?.close()
  return { local: dir ? dirRoot : fileDest, dir, error }
}

/** `value` with every string's `from` replaced by `to` (reports, errors). */
function relabel(value, from, to) {
  if (typeof value === 'string') return value.split(from).join(to)
  if (Array.isArray(value)) return value.map((v) => relabel(v, from, to))
  if (value !== null && typeof value === 'object') {
    for (const key of Object.keys(value)) value[key] = relabel(value[key], from, to)
  }
  return value
}

/**
 * Run `fn(localPath)` on a temporary copy of `url` (see copyTarget) and give its result with
 * the copy's paths named by the URL; the copy is removed whatever happens.
 */
async function withLocalCopy(url, data, options, fn, onCopyError) {
  const opts = settings(httpOptionsOf(options), url)
  const root = fs().mkdtempSync(require('node:path').join(require('node:os').tmpdir(), 'safetensors-node-url-'))
  let local
  let shown
  try {
    try {
      const copy = await copyTarget(url, root, data, opts, { bytesFetched: 0 })
      // A conversion needs bytes that opened; inspect and validate report on what did not.
      if (copy.error && data) throw copy.error
      local = copy.local
      shown = redactUrl(copy.dir ? url.replace(/\/?$/, '') : url)
    } catch (e) {
      if (onCopyError && isCoded(e) && e.code !== 'ERR_INVALID_ARGUMENT') return onCopyError(e)
      throw e
    }
    try {
      return relabel(await fn(local), local, shown)
    } catch (e) {
      if (e && typeof e === 'object') {
        if (typeof e.path === 'string') e.path = relabel(e.path, local, shown)
        if (typeof e.message === 'string') e.message = relabel(e.message, local, shown)
      }
      throw e
    }
  } finally {
    fs().rmSync(root, { recursive: true, force: true })
  }
}

/** The HTTP options (openUrl's) among a call's options. */
function httpOptionsOf(options) {
  const out = {}
  if (options === null || typeof options !== 'object') return options
  for (const key of ['headers', 'timeoutMs', 'retries', 'retryDelayMs', 'concurrency']) if (options[key] !== undefined) out[key] = options[key]
  out[HUB] = options[HUB]
  return out
}

// ---------------------------------------------------------------------------------------
// Hugging Face model ids (`org/name`): the local cache first (the core's rules,
// binding.resolveModelId), else `{endpoint}/{id}/resolve/{revision}/{file}` over HTTP.

const COMMIT = /^[0-9a-f]{40}$/
const DEFAULT_ENDPOINT_HINT = 'https://huggingface.co'

/** A non-empty environment variable, or undefined. */
const env = (name) => (process.env[name] ? process.env[name] : undefined)

/**
 * The Hugging Face options of a call (types, and `endpoint` / `token` as given): checked at
 * every call. The variables (HF_ENDPOINT, HF_TOKEN) are read and checked only when a model id
 * is read over HTTP, so a stray one never breaks a local path.
 */
function hubOptions(options) {
  const bad = (message) => codedError('ERR_INVALID_ARGUMENT', message)
  const o = options ?? {}
  if (typeof o !== 'object' || Array.isArray(o)) throw bad(`options must be an object, got ${typeof o}`)
  for (const key of ['revision', 'cacheDir', 'endpoint', 'token']) {
    if (o[key] !== undefined && typeof o[key] !== 'string') throw bad(`options.${key} must be a string, got ${typeof o[key]}`)
  }
  if (o.endpoint !== undefined && !isUrl(o.endpoint)) throw bad(`options.endpoint must be an http:// or https:// URL, got ${JSON.stringify(o.endpoint)}`)
  // Never echo the token: it would land in logs.
  if (o.token !== undefined && !TOKEN_CHARS.test(o.token)) throw bad('options.token must be printable ASCII without spaces')
  return o
}
const TOKEN_CHARS = /^[\x21-\x7e]+$/

/** Where an id not in the cache is read from: `{ endpoint, token }`, or `{ why }` it is not. */
function hubNetwork(o) {
  if (/^(1|true|yes|on)$/i.test(env('HF_HUB_OFFLINE') ?? '')) return { why: 'HF_HUB_OFFLINE is set, so it is not read over HTTP' }
  const endpoint = o.endpoint ?? env('HF_ENDPOINT')
  if (endpoint === undefined) return { why: `to read it over HTTP pass options.endpoint (e.g. '${DEFAULT_ENDPOINT_HINT}') or set HF_ENDPOINT` }
  if (!isUrl(endpoint)) throw codedError('ERR_INVALID_ARGUMENT', `HF_ENDPOINT must be an http:// or https:// URL, got ${JSON.stringify(endpoint)}`)
  const token = o.token ?? env('HF_TOKEN') ?? env('HUGGING_FACE_HUB_TOKEN')
  if (token !== undefined && !TOKEN_CHARS.test(token)) throw codedError('ERR_INVALID_ARGUMENT', 'HF_TOKEN must be printable ASCII without spaces')
  return { endpoint: endpoint.replace(/\/+$/, ''), token }
}

/**
 * The variables that name the Hugging Face cache (the core picks one, as huggingface_hub does).
 * HOME as huggingface_hub's expanduser('~') reads it (USERPROFILE on Windows): a variable, so
 * Deno needs only --allow-env, not --allow-sys for os.homedir().
 */
function cacheVars() {
  const vars = {}
  for (const k of ['HOME', 'HF_HUB_CACHE', 'HUGGINGFACE_HUB_CACHE', 'HF_HOME', 'XDG_CACHE_HOME']) if (env(k) !== undefined) vars[k] = env(k)
  if (process.platform === 'win32' && env('USERPROFILE') !== undefined) vars.HOME = env('USERPROFILE')
  return vars
}

/** ERR_NOT_FOUND for a model id neither in a directory, the cache nor (allowed) over HTTP. */
function notCached(found, why) {
  const where = found.cacheDir == null ? 'no Hugging Face cache directory is set (HF_HUB_CACHE, HF_HOME or HOME)' : `it is not in the Hugging Face cache at ${found.cacheDir}${found.commit ? ` (revision '${found.revision}' is commit ${found.commit}, whose snapshot lacks config.json or weights)` : ` (revision '${found.revision}')`}`
  return codedError('ERR_NOT_FOUND', `there is no file or directory '${found.id}', and ${where}; ${why}`, { path: found.id })
}

/**
 * `target` as a path-taking call gets it (not a URL): a path, else a model id resolved to its
 * cached snapshot directory. Returns `{ dir }` to read locally, or (only for `caller`
 * 'loadPretrained', with an endpoint set) `{ url, hub }` to read over HTTP.
 */
function resolveTarget(target, options, caller) {
  const o = hubOptions(options)
  if (typeof target !== 'string') return { dir: target } // the native call names the type error
  const found = binding.resolveModelId(target, o.revision, o.cacheDir, cacheVars())
  if (found == null) return { dir: target }
  if (found.snapshot != null) return { dir: found.snapshot }
  if (!HTTP_CALLERS.has(caller)) throw notCached(found, `${caller} reads model ids from the cache only: Model.loadPretrained with options.endpoint or HF_ENDPOINT reads them over HTTP`)
  const net = hubNetwork(o)
  if (net.why) throw notCached(found, net.why)
  const resolve = `${net.endpoint}/${found.id}/resolve/`
  return { url: `${resolve}${encodeURIComponent(found.revision)}/`, hub: { origin: new URL(net.endpoint).origin, token: net.token, resolve } }
}

/** The calls that read a model id the cache lacks over HTTP (the async ones; openWeights gives no RemoteModel). */
const HTTP_CALLERS = new Set(['loadPretrained', 'inspect', 'validate', 'convert'])

/**
 * `fn(localPath)` for what a path-taking async call got (not a URL): a path, a cached model
 * id's snapshot, or a temporary copy of a model id read over HTTP (see withLocalCopy; `data`:
 * whether tensor data is needed).
 */
async function withTarget(target, options, caller, data, fn, onCopyError) {
  const where = resolveTarget(target, options, caller)
  if (where.dir !== undefined) return fn(where.dir)
  return withLocalCopy(where.url, data, { ...(options ?? {}), [HUB]: where.hub }, fn, onCopyError)
}

/** Model.loadPretrained of anything but a URL: a local directory, else a model id. */
async function loadPretrained(target, options, loadDir) {
  const where = resolveTarget(target, options, 'loadPretrained')
  if (where.dir !== undefined) return loadDir(where.dir, options)
  return loadPretrainedUrl(where.url, { ...(options ?? {}), [HUB]: where.hub })
}

module.exports = { redactUrl, withLocalCopy, withTarget, loadPretrained, resolveTarget, openUrl, loadPretrainedUrl, openRemoteWeights, isUrl, codedError, httpGet, settings, rethrowWithPath, checkAborted, hubOptions, hubNetwork, cacheVars, sleep, HUB }

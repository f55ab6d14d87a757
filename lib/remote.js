'use strict'
// Remote weights over HTTP(S) with range requests, using Node's built-in fetch.
//
// The header is fetched with one range request (the first 100 KiB, extended only when the
// header is larger) and validated by the same native code as a local file; each tensor is
// then one range request for exactly its bytes, decoded natively. A server that ignores
// `Range` (answers 200) is read once, whole, and served from memory.

const binding = require('../binding.js')

const FIRST_REQUEST_BYTES = 100 * 1024
const MiB = 1024 * 1024
/**
 * Size caps of what is read whole (the body is streamed and dropped at the cap + 1 byte;
 * a larger declared Content-Length is refused before the body is read): weights.mlx 1 GiB; a
 * file whose server ignores Range (200 to a range request), served from memory: 16 MiB.
 * (config.json and a sharded index: the core's caps, binding.modelLayout().)
 */
const CAPS = { mlx: 1024 * MiB, unranged: 16 * MiB }
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
      if (res.status === 404 || res.status === 410) throw fail('ERR_NOT_FOUND', `HTTP ${res.status}`, false)
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
      const cap = range ? CAPS.unranged : limit
      const tooLarge = (n) =>
        range
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

/** A SafeTensors file behind a URL: header validated at open, tensors fetched on demand. */
class RemoteSafeTensorsFile {
  constructor(url, file, opts, stats, local, validators = null) {
    this.url = url
    this._validators = validators // size, ETag and Last-Modified at open: later ranges must match
    this._file = file
    this._opts = opts
    this._stats = stats
    this._local = local // true when the whole file is in memory (server ignored Range)
  }

  static async open(url, options) {
    if (!isUrl(url)) throw codedError('ERR_INVALID_ARGUMENT', `openUrl needs an http:// or https:// URL, got ${typeof url === 'string' ? JSON.stringify(url) : typeof url}`)
    const opts = settings(options, url)
    const stats = { bytesFetched: 0 }
    const report = () => opts.onProgress?.({ loadedBytes: stats.bytesFetched, totalBytes: total })
    let total = null
    const first = await httpGet(url, opts, stats, { range: [0, FIRST_REQUEST_BYTES - 1] })
    total = first.total
    if (!first.ranged) {
      // No range support: we already streamed the whole body once; serve it from memory.
      report()
      return new RemoteSafeTensorsFile(url, wrapLocal(url, first.bytes), opts, stats, true)
    }
    if (total === null) throw codedError('ERR_IO', 'the server did not report the file size (Content-Range: */*)', { path: url })
    return RemoteSafeTensorsFile._fromFirst(url, first, opts, stats, report)
  }

  /** Open from the first response of `open` (a range of the file's start, its size known). */
  static async _fromFirst(url, first, opts, stats, report) {
    let head = first.bytes
    // The core decides whether the length prefix is one to follow (the format's limit).
    const need = binding.safetensorsHeaderEnd(head, first.total)
    if (need !== null && need > head.length) {
      const rest = await httpGet(url, opts, stats, { range: [head.length, need - 1], seen: first.validators })
      head = Buffer.concat([head, rest.bytes])
    }
    report()
    const file = rethrowWithPath(url, () => binding.safetensorsFromHeader(head, first.total, url))
    return new RemoteSafeTensorsFile(url, file, opts, stats, false, first.validators)
  }

  get path() { return this.url }
  get metadata() { return this._file.metadata }
  get tensorNames() { return this._file.tensorNames }
  get numParameters() { return this._file.numParameters }
  get byteLength() { return this._file.byteLength }
  /** Bytes transferred so far for this file (header and tensors). */
  get bytesFetched() { return this._stats.bytesFetched }
  has(name) { return this._file.has(name) }
  info(name) { return this._file.info(name) }

  getTensor(name, options) {
    if (this._open()._local) return this._file.getTensor(name, options)
    throw codedError('ERR_INVALID_ARGUMENT', 'reading a remote tensor needs the network: use getTensorAsync', { path: this.url, tensor: name })
  }

  getSlice(name, ranges, options) {
    if (this._open()._local) return this._file.getSlice(name, ranges, options)
    throw codedError('ERR_INVALID_ARGUMENT', 'reading a remote tensor needs the network: use getSliceAsync', { path: this.url, tensor: name })
  }

  tensors(options) {
    if (this._open()._local) return this._file.tensors(options)
    throw codedError('ERR_INVALID_ARGUMENT', 'reading remote tensors needs the network: use tensorsAsync', { path: this.url })
  }

  async getTensorAsync(name, options) {
    if (this._local) return this._file.getTensorAsync(name, options)
    const info = this._file.info(name)
    const [start, end] = binding.tensorFileRange(this._file, name)
    const bytes = end > start ? (await httpGet(this.url, this._opts, this._stats, { range: [start, end - 1], seen: this._validators })).bytes : new Uint8Array(0)
    this._opts.onProgress?.({ loadedBytes: this._stats.bytesFetched, totalBytes: this.byteLength })
    return rethrowWithPath(this.url, () => binding.decodeTensor(name, info.dtype, info.shape, bytes, options), name)
  }

  async getSliceAsync(name, ranges, options) {
    if (this._local) return this._file.getSliceAsync(name, ranges, options)
    const info = this._file.info(name)
    const { shape, spans } = binding.tensorSliceSpans(this._file, name, ranges)
    const parts = []
    for (const [offset, length] of spans) {
      if (length > 0) parts.push((await httpGet(this.url, this._opts, this._stats, { range: [offset, offset + length - 1], seen: this._validators })).bytes)
    }
    return rethrowWithPath(this.url, () => binding.decodeTensor(name, info.dtype, shape, Buffer.concat(parts), options), name)
  }

  async tensorsAsync(options) {
    const names = this.tensorNames
    const out = {}
    const results = await mapLimit(names, this._opts.concurrency, (n) => this.getTensorAsync(n, options))
    names.forEach((n, i) => (out[n] = results[i]))
    return out
  }

  /** Release the header (later calls throw ERR_CLOSED); tensors handed out stay valid. */
  close() {
    this._closed = true
    this._file.close()
  }
  _open() {
    if (this._closed) throw codedError('ERR_CLOSED', 'this SafeTensorsFile was closed: open it again to read it', { path: this.url })
    return this
  }
  [Symbol.dispose ?? Symbol.for('nodejs.dispose')]() { this.close() }
}

function wrapLocal(url, bytes) {
  return rethrowWithPath(url, () => binding.SafeTensorsFile.fromBytes(bytes))
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
// Any weights file behind a URL.

/** `RemoteSafeTensorsFile` with the `WeightsFile` additions (`format`, `config`). */
class RemoteWeightsFile {
  constructor(file) {
    this._file = file
  }
  get format() { return 'safetensors' }
  get url() { return this._file.url }
  get path() { return this._file.path }
  get metadata() { return this._file.metadata }
  get config() { return null }
  get tensorNames() { return this._file.tensorNames }
  get numParameters() { return this._file.numParameters }
  get byteLength() { return this._file.byteLength }
  /** Bytes transferred so far (header and tensors). */
  get bytesFetched() { return this._file.bytesFetched }
  get _opts() { return this._file._opts }
  has(name) { return this._file.has(name) }
  info(name) { return this._file.info(name) }
  getTensor(name, options) { return this._file.getTensor(name, options) }
  getTensorAsync(name, options) { return this._file.getTensorAsync(name, options) }
  tensors(options) { return this._file.tensors(options) }
  tensorsAsync(options) { return this._file.tensorsAsync(options) }
  close() { this._file.close() }
  [Symbol.dispose ?? Symbol.for('nodejs.dispose')]() { this.close() }
}

/** A native `WeightsFile` of a whole file fetched from `url`, reporting what it cost. */
function wholeFile(url, bytes, format, opts) {
  const file = rethrowWithPath(url, () => binding.weightsFromBytes(bytes, { format, path: url }))
  Object.defineProperties(file, { bytesFetched: { value: bytes.length }, _opts: { value: opts } })
  return file
}

/**
 * Open a weights file behind a URL, recognised by its first bytes as a local file is (or
 * read as `options.format`): SafeTensors lazily (header by range request, tensors on
 * demand), weights.mlx whole (at most CAPS.mlx). Other formats are not read remotely yet.
 */
async function openRemoteWeights(url, options) {
  if (!isUrl(url)) throw codedError('ERR_INVALID_ARGUMENT', `openWeights needs a path or an http:// or https:// URL, got ${typeof url}`)
  const { format: forced, backend: _backend, ...rest } = options ?? {}
  const opts = settings(rest, url)
  const stats = { bytesFetched: 0 }
  const first = await httpGet(url, opts, stats, { range: [0, FIRST_REQUEST_BYTES - 1] })
  let format = forced
  if (format === undefined) {
    const sniffed = binding.sniffFormat(first.bytes, first.total ?? first.bytes.length)
    if (typeof sniffed !== 'string') throw codedError('ERR_UNKNOWN_FORMAT', `this is ${sniffed.foreign}, not a weights format this package reads`, { path: url })
    format = sniffed
  }
  if (format === 'safetensors') {
    const report = () => opts.onProgress?.({ loadedBytes: stats.bytesFetched, totalBytes: first.total })
    if (!first.ranged) return new RemoteWeightsFile(new RemoteSafeTensorsFile(url, wrapLocal(url, first.bytes), opts, stats, true))
    if (first.total === null) throw codedError('ERR_IO', 'the server did not report the file size (Content-Range: */*)', { path: url })
    return new RemoteWeightsFile(await RemoteSafeTensorsFile._fromFirst(url, first, opts, stats, report))
  }
  if (format === 'mlx') {
    let bytes = first.bytes
    if (first.ranged && first.total > bytes.length) {
      const name = new URL(url).pathname.split('/').pop() || 'the file'
      if (first.total > CAPS.mlx) throw codedError('ERR_INVALID_MLX', `${name} is larger than ${CAPS.mlx / MiB} MiB (${first.total} bytes or more), the most read`, { path: url })
      bytes = Buffer.concat([bytes, (await httpGet(url, opts, stats, { range: [bytes.length, first.total - 1], seen: first.validators })).bytes])
    }
    opts.onProgress?.({ loadedBytes: stats.bytesFetched, totalBytes: bytes.length })
    return wholeFile(url, bytes, 'mlx', opts)
  }
  if (format === 'gguf') return require('./remote-gguf.js').RemoteGgufFile._fromFirst(url, first, opts, stats)
  throw codedError('ERR_INVALID_ARGUMENT', `remote ${format} files are not read yet (SafeTensors, GGUF and weights.mlx are): download the file and open it with openWeights(path)`, { path: url })
}

// ---------------------------------------------------------------------------------------
// Remote model directories: the core's rules (binding.modelLayout, parseModelConfig,
// parseShardIndex, checkShards, throwLayoutError), applied to what HTTP fetches.

/** The coded error the core raises for `kind` (the same a local directory gives). */
function layoutError(kind, path, shard, cause) {
  try {
    binding.throwLayoutError(kind, path, shard, cause)
  } catch (e) {
    return redacted(e)
  }
  return codedError('ERR_IO', `no error for ${kind}`, { path })
}

/** An error's message without the `path: ` and `tensor '…': ` prefixes. */
function detailOf(e) {
  let m = String(e?.message ?? e)
  if (e?.path && m.startsWith(`${e.path}: `)) m = m.slice(e.path.length + 2)
  if (e?.tensor && m.startsWith(`tensor '${e.tensor}': `)) m = m.slice(e.tensor.length + 10)
  return m
}

/**
 * The URL of the shard `name` (from the index at `indexUrl`) under `base`: the core's rule
 * (the name checked, every byte a URL parser could read as something else percent-encoded),
 * then checked again as fetch will read it: the base's origin, a path below the base's.
 */
function shardUrl(base, name, indexUrl) {
  const url = rethrowWithPath(indexUrl, () => binding.shardUrl(base, name))
  const [at, under] = [new URL(url), new URL(base)]
  if (at.origin !== under.origin || !at.pathname.startsWith(under.pathname)) {
    throw codedError('ERR_UNSAFE_PATH', `shard ${JSON.stringify(name)} resolves outside the model directory`, { path: indexUrl })
  }
  return url
}

class RemoteModel {
  constructor(base, config, format, files, sources, defaultAs) {
    this.dir = base
    this.config = config
    this.format = format
    this.files = files
    this._sources = sources // [{ name, file }]: checked against each other by the core
    this._lookup = new Map()
    this._defaultAs = defaultAs
    this._concurrency = sources[0]?.file._opts.concurrency ?? DEFAULTS.concurrency
    for (const { name, file } of sources) {
      for (const t of file.tensorNames) this._lookup.set(t, { name, file })
    }
  }

  get tensorNames() { return [...this._open()._lookup.keys()] }
  get numParameters() { return this._sources.reduce((n, s) => n + s.file.numParameters, 0) }
  /** Bytes transferred so far for this model. */
  get bytesFetched() { return this._sources.reduce((n, s) => n + s.file.bytesFetched, 0) }
  has(name) { return this._open()._lookup.has(name) }
  info(name) { return this._source(name).info(name) }

  _source(name) {
    const s = this._open()._lookup.get(name)
    if (!s) throw codedError('ERR_NOT_FOUND', 'no such tensor in the model', { path: this.dir, tensor: name })
    return s.file
  }
  _options(options) { return { as: this._defaultAs, ...(options ?? {}) } }

  getTensor(name, options) { return this._source(name).getTensor(name, this._options(options)) }
  getTensorAsync(name, options) {
    try {
      return this._source(name).getTensorAsync(name, this._options(options))
    } catch (e) {
      return Promise.reject(e)
    }
  }
  tensors(options) {
    const out = {}
    for (const n of this.tensorNames) out[n] = this.getTensor(n, options)
    return out
  }
  async tensorsAsync(options) {
    const names = this.tensorNames
    const results = await mapLimit(names, this._concurrency, (n) => this.getTensorAsync(n, options))
    const out = {}
    names.forEach((n, i) => (out[n] = results[i]))
    return out
  }
  predict() {
    throw codedError('ERR_INVALID_ARGUMENT', 'predict needs the weights locally: save() the model to a directory and load that', { path: this.dir })
  }
  /** Close every weight file (later tensor reads throw ERR_CLOSED). */
  close() {
    this._closed = true
    for (const { file } of this._sources) file.close()
  }
  _open() {
    if (this._closed) throw codedError('ERR_CLOSED', 'this Model was closed: load it again to read it', { path: this.dir })
    return this
  }
  [Symbol.dispose ?? Symbol.for('nodejs.dispose')]() { this.close() }
}

async function loadPretrainedUrl(url, options) {
  const opts = settings(options, url)
  options = options ?? {}
  if (options.as !== undefined && options.as !== 'native' && options.as !== 'F32') {
    throw codedError('ERR_INVALID_ARGUMENT', `options.as must be 'native' or 'F32', not '${options.as}'`)
  }
  let base = url.endsWith('/') ? url : `${url}/`
  const stats = { bytesFetched: 0 }
  const progress = (file, loaded, total) => options.onProgress?.({ file, loadedBytes: loaded, totalBytes: total })
  const fileOpts = { ...opts, onProgress: undefined, [HUB]: opts.hub, [HOME]: opts.home }

  const layout = binding.modelLayout()
  const configUrl = base + layout.configFile
  const configBody = await httpGet(configUrl, opts, stats, { limit: layout.configMaxBytes, what: layout.configFile, code: 'ERR_INVALID_MODEL' })
  const config = rethrowWithPath(configUrl, () => binding.parseModelConfig(configBody.bytes))
  // A model id at a branch or tag: the rest is read at the commit config.json came from
  // (the Hub's X-Repo-Commit), so a push in between cannot mix two versions.
  if (opts.hub && COMMIT.test(configBody.repoCommit ?? '')) base = `${opts.hub.resolve}${configBody.repoCommit}/`

  for (const { file: name, layout: kind } of layout.discovery) {
    if (kind === 'file') {
      let file
      try {
        file = await openRemoteWeights(base + name, fileOpts)
      } catch (e) {
        if (e.code === 'ERR_NOT_FOUND') continue
        throw e
      }
      progress(name, file.bytesFetched, file.bytesFetched)
      return new RemoteModel(base, config, file.format, [name], [{ name, file }], options.as)
    }
    let index
    try {
      index = await httpGet(base + name, opts, stats, { limit: layout.indexMaxBytes, what: name, code: 'ERR_INVALID_MODEL' })
    } catch (e) {
      if (e.code === 'ERR_NOT_FOUND') continue
      throw e
    }
    const indexUrl = base + name
    const shardNames = rethrowWithPath(indexUrl, () => binding.parseShardIndex(index.bytes))
    const sources = []
    let loaded = 0
    for (const shard of shardNames) {
      const at = shardUrl(base, shard, indexUrl)
      let file
      try {
        file = await RemoteSafeTensorsFile.open(at, fileOpts)
      } catch (e) {
        if (e.code === 'ERR_NOT_FOUND') throw layoutError('shard-missing', at)
        if (e.code === 'ERR_UNKNOWN_FORMAT') throw e
        throw layoutError('shard-failed', e.path ?? at, shard, { code: String(e.code ?? 'ERR_IO'), detail: detailOf(e), tensor: e.tensor })
      }
      loaded += file.bytesFetched
      progress(shard, loaded, null)
      sources.push({ name: shard, file })
    }
    rethrowWithPath(indexUrl, () => binding.checkShards(index.bytes, sources.map(({ file }) => ({ path: file.url, tensorNames: file.tensorNames }))))
    return new RemoteModel(base, config, 'sharded-safetensors', shardNames, sources, options.as)
  }
  throw layoutError('no-weights', base)
}

// ---------------------------------------------------------------------------------------
// inspect / validate / convert of a URL: the native functions take paths, so a URL's
// file (or directory) is copied into a private temporary directory, the function runs on
// the copy, and every path of the copy in its result or error is replaced by the URL. A
// SafeTensors file is copied as its header only, in a sparse file of its full length, when
// `data` is false (inspect, validate: they read nothing else, so the verdict is the local one).

/** Bytes fetched per range request when copying a file. */
const COPY_CHUNK = 16 * MiB

/** Write `bytes` at `position` of the open file `fd`. */
function writeAt(fd, bytes, position) {
  let done = 0
  while (done < bytes.length) done += fs().writeSync(fd, bytes, done, bytes.length - done, position + done)
}

const fs = () => require('node:fs')

/**
 * Copy the file at `url` to `dest` (a new file): whole, by ranges of COPY_CHUNK (each checked
 * against the first response's validators), or, when `data` is false and it is SafeTensors,
 * its header only in a sparse file of the same length; at most `limit` + 1 bytes of it (the
 * rest sparse). A missing file is ERR_NOT_FOUND.
 */
async function copyFile(url, dest, data, opts, stats, limit = Infinity) {
  const first = await httpGet(url, opts, stats, { range: [0, FIRST_REQUEST_BYTES - 1] })
  if (first.ranged && first.total === null) throw codedError('ERR_IO', 'the server did not report the file size (Content-Range: */*)', { path: url })
  fs().mkdirSync(require('node:path').dirname(dest), { recursive: true })
  const fd = fs().openSync(dest, 'wx', 0o600)
  try {
    writeAt(fd, first.bytes, 0)
    if (!first.ranged) return first.repoCommit
    const total = first.total
    let end = total
    if (!data && binding.sniffFormat(first.bytes, total) === 'safetensors') {
      const need = binding.safetensorsHeaderEnd(first.bytes, total)
      end = need === null ? first.bytes.length : Math.min(total, Math.max(need, first.bytes.length))
    }
    // A file read whole under a cap (config.json, an index): past the cap the reader refuses
    // it from its length, so the copy needs no more than the cap + 1 bytes.
    end = Math.min(end, limit + 1)
    for (let at = first.bytes.length; at < end; at += COPY_CHUNK) {
      const part = await httpGet(url, opts, stats, { range: [at, Math.min(end, at + COPY_CHUNK) - 1], seen: first.validators })
      writeAt(fd, part.bytes, at)
    }
    fs().ftruncateSync(fd, total)
    return first.repoCommit
  } finally {
    fs().closeSync(fd)
  }
}

/**
 * A local copy of what `url` names in `root`: a file, or (a URL ending in `/`, or one whose
 * file is not found but whose `config.json` is) a model directory: config.json, the weight
 * files of the discovery order that exist, an index and its shards (names checked by the
 * core first), and, when `data` is wanted (a conversion), the companion files beside them. Files the server lacks are left out, so the native call reports them as it
 * would locally. Resolves to `{ local, dir }`: the local path standing for `url`, and whether
 * it is a directory.
 */
async function copyTarget(url, root, data, opts, stats) {
  const path = require('node:path')
  /** Copy one file of the directory: its X-Repo-Commit (or null), or false when it is missing. */
  const tryCopy = async (u, dest, limit) => {
    try {
      return (await copyFile(u, dest, data, opts, stats, limit)) ?? null
    } catch (e) {
      if (e.code === 'ERR_NOT_FOUND') return false
      throw e
    }
  }
  const layout = binding.modelLayout()
  // The copy keeps the URL's last name where it is a plain one (reports name the URL anyway;
  // a GGUF's general.name is the directory's name, as locally).
  const plainName = (u, fallback) => {
    const last = new URL(u).pathname.split('/').filter(Boolean).pop() ?? ''
    return /^[A-Za-z0-9_-][A-Za-z0-9._-]{0,200}$/.test(last) ? last : fallback
  }
  let base = url
  if (!url.endsWith('/')) {
    const dest = path.join(root, plainName(url, 'file'))
    try {
      await copyFile(url, dest, data, opts, stats)
      return { local: dest, dir: false }
    } catch (e) {
      if (e.code !== 'ERR_NOT_FOUND') throw e
      // Perhaps a directory written without its trailing slash.
      const config = await httpGet(`${url}/${layout.configFile}`, opts, stats, { limit: layout.configMaxBytes, what: layout.configFile, code: 'ERR_INVALID_MODEL' }).catch(() => null)
      if (config === null) throw e
      base = `${url}/`
    }
  }
  const dir = path.join(root, 'dir', plainName(base, 'model'))
  fs().mkdirSync(dir, { recursive: true })
  // A model id without config.json is a model the endpoint does not have (its error says so).
  const configDest = path.join(dir, layout.configFile)
  const commit = opts.hub ? await copyFile(base + layout.configFile, configDest, data, opts, stats, layout.configMaxBytes) : await tryCopy(base + layout.configFile, configDest, layout.configMaxBytes)
  // A model id: the rest at config.json's commit, as loadPretrainedUrl reads it.
  if (opts.hub && COMMIT.test(commit || '')) base = `${opts.hub.resolve}${commit}/`
  for (const { file: name, layout: kind } of layout.discovery) {
    if ((await tryCopy(base + name, path.join(dir, name), kind === 'sharded' ? layout.indexMaxBytes : Infinity)) === false) continue
    // An index past its cap is left for the native call to refuse (from its length).
    if (kind === 'sharded' && fs().statSync(path.join(dir, name)).size <= layout.indexMaxBytes) {
      const shards = rethrowWithPath(base + name, () => binding.parseShardIndex(fs().readFileSync(path.join(dir, name))))
      for (const shard of shards) await tryCopy(shardUrl(base, shard, base + name), path.join(dir, ...shard.split('/')))
    }
    break
  }
  // A conversion reads the tokenizer and the files beside it as well (those the server has).
  if (data) {
    for (const name of layout.companionFiles) await tryCopy(shardUrl(base, name, base), path.join(dir, ...name.split('/')), layout.companionMaxBytes)
  }
  return { local: dir, dir: true }
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

module.exports = { redactUrl, withLocalCopy, withTarget, loadPretrained, resolveTarget, RemoteSafeTensorsFile, RemoteWeightsFile, RemoteModel, loadPretrainedUrl, openRemoteWeights, isUrl, codedError, httpGet, settings, rethrowWithPath, mapLimit, checkAborted, hubOptions, hubNetwork, cacheVars, shardUrl, sleep, HUB, FIRST_REQUEST_BYTES }

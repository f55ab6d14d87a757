'use strict'
// Remote weights over HTTP(S) with range requests, using Node's built-in fetch.
//
// The header is fetched with one range request (the first 100 KiB, extended only when the
// header is larger) and validated by the same native code as a local file; each tensor is
// then one range request for exactly its bytes, decoded natively. A server that ignores
// `Range` (answers 200) is read once, whole, and served from memory.

const binding = require('../binding.js')

const FIRST_REQUEST_BYTES = 100 * 1024
const MAX_HEADER_SIZE = 100_000_000
const MiB = 1024 * 1024
/**
 * Size caps of what is read whole (the body is streamed and dropped at the cap + 1 byte;
 * a larger declared Content-Length is refused before the body is read):
 * - config.json: 16 MiB; a sharded index: 64 MiB; weights.mlx: 1 GiB;
 * - a file whose server ignores Range (200 to a range request), served from memory: 16 MiB.
 */
const CAPS = { config: 16 * MiB, index: 64 * MiB, mlx: 1024 * MiB, unranged: 16 * MiB }
const DEFAULTS = { timeoutMs: 30_000, retries: 2, retryDelayMs: 200, concurrency: 8 }

function codedError(code, message, extra = {}) {
  const err = new Error(extra.path ? `${extra.path}: ${extra.tensor ? `tensor '${extra.tensor}': ` : ''}${message}` : message)
  err.code = code
  for (const [k, v] of Object.entries(extra)) if (v !== undefined) err[k] = v
  return err
}

/** Our own errors (DOMExceptions carry a numeric `code` too). */
function isCoded(e) {
  return typeof e?.code === 'string' && e.code.startsWith('ERR_')
}

function isUrl(s) {
  return typeof s === 'string' && /^https?:\/\//i.test(s)
}

const isPlainObject = (v) => v !== null && typeof v === 'object' && !Array.isArray(v) && [Object.prototype, null].includes(Object.getPrototypeOf(v))

/** Options of openUrl / loadPretrained(url), checked and completed with the defaults. */
function settings(options) {
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
  return o
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms))

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
 * validators }`: `ranged` is false when the server ignored the range and sent the whole file
 * (accepted up to CAPS.unranged). `seen`: the validators open saw (total size, ETag,
 * Last-Modified); the request then carries If-Range, and any sign of another file fails.
 * Never holds more than the bytes asked for (or the cap) plus one network chunk. Retries
 * network errors, timeouts, short bodies and 5xx with exponential backoff.
 */
async function httpGet(url, opts, stats, { range = null, limit = Infinity, what = 'the file', code = 'ERR_IO', seen = null } = {}) {
  let lastError
  for (let attempt = 0; attempt <= opts.retries; attempt++) {
    if (attempt > 0) await sleep(opts.retryDelayMs * 2 ** (attempt - 1))
    let res
    try {
      // fetch itself asks for identity when a Range header is present (Fetch standard).
      const headers = { ...opts.headers }
      if (!range) headers['Accept-Encoding'] = 'identity'
      if (range) {
        headers.Range = `bytes=${range[0]}-${range[1]}`
        const validator = strongEtag(seen?.etag) ?? seen?.lastModified
        if (validator) headers['If-Range'] = validator
      }
      res = await fetch(url, { headers, signal: AbortSignal.timeout(opts.timeoutMs), redirect: 'follow' })
      const fail = (code, message, retry) => codedError(code, message, { path: url, retry })
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
        if (declaredLength !== null && declaredLength > want) {
          throw fail('ERR_IO', `the server declares ${declared} bytes for a range of ${want}; it is not read`, false)
        }
        const bytes = await readBody(res, want, (n) => fail('ERR_IO', `the server sent more than the ${want} bytes asked for (${n} so far); stopped reading`, false))
        stats.bytesFetched += bytes.length
        if (bytes.length !== want) throw fail('ERR_INCOMPLETE_FILE', `short response: asked for ${want} bytes from ${range[0]}, got ${bytes.length}`, true)
        return { bytes, total, ranged, validators }
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
      return { bytes, total: bytes.length, ranged, validators: validatorsOf(res, bytes.length) }
    } catch (e) {
      // Whatever failed, the rest of the body is not wanted.
      await res?.body?.cancel().catch(() => {})
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
  const why = lastError?.name === 'TimeoutError' ? `timed out after ${opts.timeoutMs} ms` : String(lastError?.cause?.message ?? lastError?.message ?? lastError)
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
    const opts = settings(options)
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
    let head = first.bytes
    if (head.length >= 8) {
      const n = Number(Buffer.from(head.buffer, head.byteOffset, 8).readBigUInt64LE(0))
      const need = 8 + n
      if (n <= MAX_HEADER_SIZE && need <= total && need > head.length) {
        const rest = await httpGet(url, opts, stats, { range: [head.length, need - 1], seen: first.validators })
        head = Buffer.concat([head, rest.bytes])
      }
    }
    report()
    const file = rethrowWithPath(url, () => binding.safetensorsFromHeader(head, total, url))
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
    if (this._local) return this._file.getTensor(name, options)
    throw codedError('ERR_INVALID_ARGUMENT', 'reading a remote tensor needs the network: use getTensorAsync', { path: this.url, tensor: name })
  }

  getSlice(name, ranges, options) {
    if (this._local) return this._file.getSlice(name, ranges, options)
    throw codedError('ERR_INVALID_ARGUMENT', 'reading a remote tensor needs the network: use getSliceAsync', { path: this.url, tensor: name })
  }

  tensors(options) {
    if (this._local) return this._file.tensors(options)
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
}

function wrapLocal(url, bytes) {
  return rethrowWithPath(url, () => binding.SafeTensorsFile.fromBytes(bytes))
}

/** Native errors from remote data name the URL (fromBytes knows no path). */
function rethrowWithPath(url, fn, tensor) {
  try {
    return fn()
  } catch (e) {
    if (isCoded(e) && !e.path) {
      e.path = url
      e.message = `${url}: ${e.message}`
    }
    if (e && tensor && !e.tensor) e.tensor = tensor
    throw e
  }
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
// Remote model directories.

const SINGLE_FILES = ['weights.safetensors', 'model.safetensors']
const INDEX_FILE = 'model.safetensors.index.json'
const MLX_FILE = 'weights.mlx'

/** Resolve a shard name under `base`, refusing anything that could leave it. */
function safeShardUrl(base, name) {
  const bad =
    typeof name !== 'string' ||
    name === '' ||
    name.startsWith('/') ||
    name.includes('\\') ||
    name.includes('\0') ||
    /^[a-z][a-z0-9+.-]*:/i.test(name) ||
    name.split('/').some((part) => part === '..' || part === '.' || part === '' || /%2e%2e|%2f/i.test(part))
  const resolved = bad ? null : new URL(name, base).href
  if (!resolved || !resolved.startsWith(base)) {
    throw codedError('ERR_UNSAFE_PATH', `'${name}' is not a plain path inside the model directory`, { path: base })
  }
  return resolved
}

class RemoteModel {
  constructor(base, config, format, files, sources, defaultAs) {
    this.dir = base
    this.config = config
    this.format = format
    this.files = files
    this._sources = sources // [{ name, file: RemoteSafeTensorsFile }]
    this._lookup = new Map()
    this._defaultAs = defaultAs
    this._concurrency = sources[0]?.file._opts.concurrency ?? DEFAULTS.concurrency
    for (const { name, file } of sources) {
      for (const t of file.tensorNames) {
        if (this._lookup.has(t)) {
          throw codedError('ERR_INVALID_MODEL', `tensor is stored in two shards: '${this._lookup.get(t).name}' and '${name}'`, { path: file.url, tensor: t })
        }
        this._lookup.set(t, { name, file })
      }
    }
  }

  get tensorNames() { return [...this._lookup.keys()] }
  get numParameters() { return this._sources.reduce((n, s) => n + s.file.numParameters, 0) }
  /** Bytes transferred so far for this model. */
  get bytesFetched() { return this._sources.reduce((n, s) => n + s.file.bytesFetched, 0) }
  has(name) { return this._lookup.has(name) }

  _source(name) {
    const s = this._lookup.get(name)
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
}

async function loadPretrainedUrl(url, options) {
  const opts = settings(options)
  options = options ?? {}
  if (options.as !== undefined && options.as !== 'native' && options.as !== 'F32') {
    throw codedError('ERR_INVALID_ARGUMENT', `options.as must be 'native' or 'F32', not '${options.as}'`)
  }
  const base = url.endsWith('/') ? url : `${url}/`
  const stats = { bytesFetched: 0 }
  const progress = (file, loaded, total) => options.onProgress?.({ file, loadedBytes: loaded, totalBytes: total })
  const fileOpts = { ...opts, onProgress: undefined }

  const configUrl = base + 'config.json'
  const configBody = await httpGet(configUrl, opts, stats, { limit: CAPS.config, what: 'config.json', code: 'ERR_INVALID_MODEL' })
  let config
  try {
    config = JSON.parse(Buffer.from(configBody.bytes).toString('utf8'))
  } catch (e) {
    throw codedError('ERR_INVALID_MODEL', `config.json is not valid JSON: ${e.message}`, { path: configUrl })
  }
  if (config === null || typeof config !== 'object' || Array.isArray(config)) {
    throw codedError('ERR_INVALID_MODEL', 'config.json must hold a JSON object', { path: configUrl })
  }

  const tryOpen = async (name) => {
    try {
      return await RemoteSafeTensorsFile.open(base + name, fileOpts)
    } catch (e) {
      if (e.code === 'ERR_NOT_FOUND') return null
      throw e
    }
  }
  for (const name of SINGLE_FILES) {
    const file = await tryOpen(name)
    if (file) {
      progress(name, file.bytesFetched, file.bytesFetched)
      return new RemoteModel(base, config, 'safetensors', [name], [{ name, file }], options.as)
    }
  }
  let index = null
  try {
    index = await httpGet(base + INDEX_FILE, opts, stats, { limit: CAPS.index, what: INDEX_FILE, code: 'ERR_INVALID_MODEL' })
  } catch (e) {
    if (e.code !== 'ERR_NOT_FOUND') throw e
  }
  if (index) {
    let parsed
    try {
      parsed = JSON.parse(Buffer.from(index.bytes).toString('utf8'))
    } catch (e) {
      throw codedError('ERR_INVALID_MODEL', `not a valid sharded index: ${e.message}`, { path: base + INDEX_FILE })
    }
    const weightMap = parsed?.weight_map
    if (!weightMap || typeof weightMap !== 'object') {
      throw codedError('ERR_INVALID_MODEL', 'not a valid sharded index ({"weight_map": {tensor: file}})', { path: base + INDEX_FILE })
    }
    const shardNames = [...new Set(Object.values(weightMap))].sort()
    const shardUrls = shardNames.map((n) => safeShardUrl(base, n))
    const sources = []
    let loaded = 0
    for (let i = 0; i < shardNames.length; i++) {
      let file
      try {
        file = await RemoteSafeTensorsFile.open(shardUrls[i], fileOpts)
      } catch (e) {
        throw codedError('ERR_INVALID_MODEL', `shard '${shardNames[i]}' failed: [${e.code ?? 'ERR_IO'}] ${e.message}`, { path: shardUrls[i], tensor: e.tensor })
      }
      loaded += file.bytesFetched
      progress(shardNames[i], loaded, null)
      sources.push({ name: shardNames[i], file })
    }
    for (const [tensor, shard] of Object.entries(weightMap)) {
      const source = sources.find((s) => s.name === shard)
      if (!source || !source.file.has(tensor)) {
        throw codedError('ERR_INVALID_MODEL', `${INDEX_FILE} places this tensor in '${shard}', which does not hold it`, { path: base + shard, tensor })
      }
    }
    return new RemoteModel(base, config, 'sharded-safetensors', shardNames, sources, options.as)
  }
  let mlx = null
  try {
    mlx = await httpGet(base + MLX_FILE, opts, stats, { limit: CAPS.mlx, what: MLX_FILE, code: 'ERR_INVALID_MLX' })
  } catch (e) {
    if (e.code !== 'ERR_NOT_FOUND') throw e
  }
  if (mlx) {
    progress(MLX_FILE, mlx.bytes.length, mlx.bytes.length)
    const bytes = rethrowWithPath(base + MLX_FILE, () => binding.mlxToSafetensors(mlx.bytes))
    const file = new RemoteSafeTensorsFile(base + MLX_FILE, wrapLocal(base + MLX_FILE, bytes), opts, { bytesFetched: mlx.bytes.length }, true)
    return new RemoteModel(base, config, 'mlx', [MLX_FILE], [{ name: MLX_FILE, file }], options.as)
  }
  throw codedError('ERR_NO_WEIGHTS', `no weight file found; looked for ${SINGLE_FILES.join(', ')}, ${INDEX_FILE} and ${MLX_FILE}`, { path: base })
}

module.exports = { RemoteSafeTensorsFile, RemoteModel, loadPretrainedUrl, isUrl, codedError }

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

function settings(options = {}) {
  const o = { ...DEFAULTS, ...options, headers: { ...(options.headers ?? {}) } }
  if (!(o.timeoutMs > 0)) throw codedError('ERR_INVALID_ARGUMENT', `options.timeoutMs must be positive, got ${o.timeoutMs}`)
  if (!(Number.isInteger(o.retries) && o.retries >= 0)) throw codedError('ERR_INVALID_ARGUMENT', `options.retries must be a non-negative integer, got ${o.retries}`)
  return o
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms))

/**
 * GET `url`, optionally a byte range [start, end] (inclusive). Resolves to
 * `{ bytes, total, ranged }`: `ranged` is false when the server ignored the range and sent
 * the whole body. Retries network errors, timeouts and 5xx with exponential backoff.
 */
async function httpGet(url, opts, range, stats) {
  let lastError
  for (let attempt = 0; attempt <= opts.retries; attempt++) {
    if (attempt > 0) await sleep(opts.retryDelayMs * 2 ** (attempt - 1))
    try {
      const headers = { ...opts.headers }
      if (range) headers.Range = `bytes=${range[0]}-${range[1]}`
      const res = await fetch(url, { headers, signal: AbortSignal.timeout(opts.timeoutMs), redirect: 'follow' })
      if (res.status === 404 || res.status === 410) {
        await res.body?.cancel()
        throw codedError('ERR_NOT_FOUND', `HTTP ${res.status}`, { path: url, retry: false })
      }
      if (res.status === 416) {
        await res.body?.cancel()
        throw codedError('ERR_INCOMPLETE_FILE', `HTTP 416: the file is shorter than byte ${range?.[0]}`, { path: url, retry: false })
      }
      if (res.status >= 500 || res.status === 429) {
        await res.body?.cancel()
        throw codedError('ERR_IO', `HTTP ${res.status} ${res.statusText}`, { path: url, retry: true })
      }
      if (res.status !== 200 && res.status !== 206) {
        await res.body?.cancel()
        throw codedError('ERR_IO', `HTTP ${res.status} ${res.statusText}`, { path: url, retry: false })
      }
      const ranged = res.status === 206
      let total = null
      if (ranged) {
        const m = /^bytes (\d+)-(\d+)\/(\d+|\*)$/.exec(res.headers.get('content-range') ?? '')
        if (!m || Number(m[1]) !== range[0]) {
          await res.body?.cancel()
          throw codedError('ERR_IO', `bad Content-Range '${res.headers.get('content-range')}' for bytes=${range[0]}-${range[1]}`, { path: url, retry: false })
        }
        total = m[3] === '*' ? null : Number(m[3])
      }
      const body = new Uint8Array(await res.arrayBuffer())
      stats.bytesFetched += body.length
      if (ranged) {
        const want = Math.min(range[1], (total ?? Infinity) - 1) - range[0] + 1
        if (body.length !== want) {
          throw codedError('ERR_INCOMPLETE_FILE', `short response: asked for ${want} bytes from ${range[0]}, got ${body.length}`, { path: url, retry: true })
        }
      } else {
        const declared = Number(res.headers.get('content-length') ?? NaN)
        if (Number.isFinite(declared) && declared !== body.length) {
          throw codedError('ERR_INCOMPLETE_FILE', `short response: ${body.length} of ${declared} bytes`, { path: url, retry: true })
        }
        total = body.length
      }
      return { bytes: body, total, ranged }
    } catch (e) {
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
  constructor(url, file, opts, stats, local) {
    this.url = url
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
    const first = await httpGet(url, opts, [0, FIRST_REQUEST_BYTES - 1], stats)
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
        const rest = await httpGet(url, opts, [head.length, need - 1], stats)
        head = Buffer.concat([head, rest.bytes])
      }
    }
    report()
    const file = rethrowWithPath(url, () => binding.SafeTensorsFile.fromHeader(head, total, url))
    return new RemoteSafeTensorsFile(url, file, opts, stats, false)
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
    const [start, end] = this._file.fileRange(name)
    const bytes = end > start ? (await httpGet(this.url, this._opts, [start, end - 1], this._stats)).bytes : new Uint8Array(0)
    this._opts.onProgress?.({ loadedBytes: this._stats.bytesFetched, totalBytes: this.byteLength })
    return rethrowWithPath(this.url, () => binding.decodeTensor(name, info.dtype, info.shape, bytes, options), name)
  }

  async getSliceAsync(name, ranges, options) {
    if (this._local) return this._file.getSliceAsync(name, ranges, options)
    const info = this._file.info(name)
    const { shape, spans } = this._file.sliceSpans(name, ranges)
    const parts = []
    for (const [offset, length] of spans) {
      if (length > 0) parts.push((await httpGet(this.url, this._opts, [offset, offset + length - 1], this._stats)).bytes)
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
    const results = await mapLimit(names, DEFAULTS.concurrency, (n) => this.getTensorAsync(n, options))
    const out = {}
    names.forEach((n, i) => (out[n] = results[i]))
    return out
  }
  predict() {
    throw codedError('ERR_INVALID_ARGUMENT', 'predict needs the weights locally: save() the model to a directory and load that', { path: this.dir })
  }
}

async function loadPretrainedUrl(url, options = {}) {
  const opts = settings(options)
  if (options.as !== undefined && options.as !== 'native' && options.as !== 'F32') {
    throw codedError('ERR_INVALID_ARGUMENT', `options.as must be 'native' or 'F32', not '${options.as}'`)
  }
  const base = url.endsWith('/') ? url : `${url}/`
  const stats = { bytesFetched: 0 }
  const progress = (file, loaded, total) => options.onProgress?.({ file, loadedBytes: loaded, totalBytes: total })
  const fileOpts = { ...opts, onProgress: undefined }

  const configUrl = base + 'config.json'
  const configBody = await httpGet(configUrl, opts, null, stats)
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
    index = await httpGet(base + INDEX_FILE, opts, null, stats)
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
    mlx = await httpGet(base + MLX_FILE, opts, null, stats)
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

// safetensors-node/wasm: the reader for browsers, workers, Deno, Bun and edge runtimes — the
// core's parsers and codecs compiled to WebAssembly (safetensors-node.wasm, loaded once, at
// the first open), driven by `fetch` Range requests, `Blob.slice` or bytes in memory. No
// native addon, no Node API (Node reads the .wasm file itself with node:fs, imported only
// there). Results and error codes are the native addon's.
//
// Byte sources: the core's opener says which byte ranges it needs (the header first, then
// the rest of it if longer); a `Blob` is read by `slice()`, a URL by Range requests, bytes
// by `subarray`. A tensor is then read from its own ranges only. Nothing reads a whole file
// unless the core asks for it (NumPy, PyTorch: formats read whole).

const KINDS = [null, Float32Array, Float64Array, Int8Array, Uint8Array, Int16Array, Uint16Array, Int32Array, Uint32Array, BigInt64Array, BigUint64Array]
const AS = { native: 0, F32: 1, F64: 2, raw: 3 }

/** An Error with the native addon's `code` (and `path` / `tensor` when the core names them). */
function coded(code, message, extra = {}) {
  return Object.assign(new Error(message), { code }, extra)
}

let wasmSource
let loading

/**
 * Where the .wasm comes from, for hosts that cannot resolve it next to this module (a CDN
 * build, a bundler without asset support): a URL, a `Response`, bytes or a compiled
 * `WebAssembly.Module`. Call before the first open.
 */
export function initWasm(source) {
  wasmSource = source
  loading = undefined
  return load().then(() => undefined)
}

function load() {
  loading ??= instantiate().catch((e) => {
    loading = undefined
    throw e
  })
  return loading
}

async function compile(source) {
  if (source instanceof WebAssembly.Module) return source
  if (source instanceof Uint8Array || source instanceof ArrayBuffer) return WebAssembly.compile(source)
  const url = source instanceof Response ? null : new URL(String(source), import.meta.url)
  if (url?.protocol === 'file:') {
    const fs = 'node:fs/promises'
    const { readFile } = await import(/* webpackIgnore: true */ /* @vite-ignore */ fs)
    return WebAssembly.compile(await readFile(url))
  }
  const response = source instanceof Response ? source : await fetch(url)
  if (!response.ok) throw coded('ERR_IO', `cannot load ${response.url || url}: HTTP ${response.status}`)
  // compileStreaming needs the server to say application/wasm; plain bytes work anywhere.
  return WebAssembly.compile(await response.arrayBuffer())
}

async function instantiate() {
  const module = await compile(wasmSource ?? new URL('./safetensors-node.wasm', import.meta.url))
  const instance = await WebAssembly.instantiate(module, {})
  return new Core(instance.exports)
}

const encoder = new TextEncoder()
const decoder = new TextDecoder()

/** The module's exports, with arguments copied in and results copied out. */
class Core {
  constructor(x) {
    this.x = x
    this.broken = null
  }

  /** `bytes` copied into a buffer the module owns (handed over to the call it is passed to). */
  put(bytes) {
    if (bytes.length === 0) return [0, 0]
    const ptr = this.x.stw_alloc(bytes.length)
    if (ptr === 0) throw coded('ERR_IO', `cannot allocate ${bytes.length} bytes in WebAssembly memory`)
    new Uint8Array(this.x.memory.buffer, ptr, bytes.length).set(bytes)
    return [ptr, bytes.length]
  }

  /** Several byte arrays copied, one after another, into one buffer (as `put`). */
  putAll(parts) {
    const len = parts.reduce((n, p) => n + p.byteLength, 0)
    if (len === 0) return [0, 0]
    const ptr = this.x.stw_alloc(len)
    if (ptr === 0) throw coded('ERR_IO', `cannot allocate ${len} bytes in WebAssembly memory`)
    let at = ptr
    for (const p of parts) {
      new Uint8Array(this.x.memory.buffer, at, p.byteLength).set(p)
      at += p.byteLength
    }
    return [ptr, len]
  }

  str(s) {
    return this.put(encoder.encode(s))
  }

  /** Call `fn`; its result: parsed JSON, or a tensor's elements as their typed array. */
  call(fn, ...args) {
    if (this.broken) throw this.broken
    let status
    try {
      status = this.x[fn](...args)
    } catch (e) {
      // A trap (a panic aborts): the instance's state is unknown from here on.
      this.broken = coded('ERR_INTERNAL', `internal error: ${fn} trapped (${e.message}); this is a bug in safetensors-node, please report it`)
      loading = undefined
      throw this.broken
    }
    const ptr = this.x.stw_result_ptr()
    const len = this.x.stw_result_len()
    const kind = this.x.stw_result_kind()
    let out
    if (kind === 0) {
      const text = decoder.decode(new Uint8Array(this.x.memory.buffer, ptr, len))
      out = JSON.parse(text)
    } else {
      out = new KINDS[kind](this.x.memory.buffer.slice(ptr, ptr + len))
    }
    this.x.stw_result_clear()
    if (status !== 0) {
      const { code, message, ...extra } = out
      throw coded(code, message, extra)
    }
    return out
  }
}

/** A byte source: `read(start, end)` → `{ bytes, total }`. */
function bytesSource(bytes, name) {
  return {
    name,
    async read(start, end) {
      return { bytes: bytes.subarray(Math.min(start, bytes.length), Math.min(end, bytes.length)), total: bytes.length }
    },
  }
}

function blobSource(blob) {
  return {
    name: blob.name || 'blob',
    async read(start, end) {
      const part = blob.slice(start, Math.min(end, blob.size))
      return { bytes: new Uint8Array(await part.arrayBuffer()), total: blob.size }
    },
  }
}

/**
 * A URL and the files of its directory (a sharded model's) or beside it (a split GGUF's),
 * each read by Range requests; `file(url)` is the source of one of them, which must be on
 * the same origin (the core names them under the URL: the check is the driver's too).
 */
function urlSource(url, options) {
  const files = new Map()
  const source = urlFile(url, options)
  source.file = (at) => {
    if (at === null || at === undefined || at === url) return source
    if (new URL(at).origin !== new URL(url).origin) {
      throw coded('ERR_UNSAFE_PATH', `${at} resolves outside the model directory`, { path: url })
    }
    if (!files.has(at)) files.set(at, urlFile(at, options))
    return files.get(at)
  }
  return source
}

function urlFile(url, options) {
  const fetchFn = options.fetch ?? globalThis.fetch
  let whole = null
  return {
    name: url,
    async read(start, end) {
      if (whole) return { bytes: whole.subarray(Math.min(start, whole.length), Math.min(end, whole.length)), total: whole.length }
      let res
      try {
        res = await fetchFn(url, { headers: { ...options.headers, Range: `bytes=${start}-${end - 1}` }, signal: options.signal })
      } catch (e) {
        if (e?.name === 'AbortError') throw coded('ERR_ABORTED', `${url}: the request was aborted`)
        throw coded('ERR_IO', `${url}: ${e?.message ?? e}`)
      }
      if (res.status === 404) return { missing: true }
      const range = /^bytes (?:(\d+)-\d+|\*)\/(\d+)$/.exec(res.headers.get('content-range') ?? '')
      if (res.status === 416 && range) return { bytes: new Uint8Array(0), total: Number(range[2]) }
      if (res.status === 206 && range && Number(range[1]) === start) {
        return { bytes: new Uint8Array(await res.arrayBuffer()), total: Number(range[2]) }
      }
      if (res.status === 200) {
        // The server ignored the Range header: it sent the whole file, kept for later reads.
        whole = new Uint8Array(await res.arrayBuffer())
        return this.read(start, end)
      }
      await res.body?.cancel()
      return { failed: `${url}: HTTP ${res.status} for bytes ${start}-${end - 1}` }
    },
  }
}

function sourceOf(input, options) {
  if (typeof input === 'string' || input instanceof URL) return urlSource(String(input), options)
  if (typeof Blob !== 'undefined' && input instanceof Blob) return blobSource(input)
  if (input instanceof ArrayBuffer) return bytesSource(new Uint8Array(input), options.name ?? 'bytes')
  if (ArrayBuffer.isView(input)) return bytesSource(new Uint8Array(input.buffer, input.byteOffset, input.byteLength), options.name ?? 'bytes')
  throw coded('ERR_INVALID_ARGUMENT', 'openWeights takes a URL, a Blob or File, or bytes (Uint8Array / ArrayBuffer)')
}

const registry = new FinalizationRegistry(({ core, handle }) => {
  if (!core.broken) core.x.stw_close(handle)
})

/** The source of the file at `url` (null: `source` itself): another file of a URL's directory. */
function fileOf(source, url) {
  if (url === null) return source
  if (!source.file) throw coded('ERR_INVALID_ARGUMENT', `${source.name}: a model directory or split GGUF is opened by its URL`, { path: source.name })
  return source.file(url)
}

/** Drive the core's opener over `source`: the handle of the open file. */
async function openWith(core, source, format) {
  const opener = core.call('stw_opener_new', ...core.str(source.name), ...core.str(format ?? '')).handle
  try {
    for (;;) {
      const step = core.call('stw_opener_step', opener)
      if (step.ready !== undefined) return step.ready
      const answers = await Promise.all(step.fetch.map((r) => fileOf(source, r.file === '' ? null : r.url).read(r.start ?? 0, r.end ?? r.whole + 1)))
      step.fetch.forEach((r, i) => {
        const a = answers[i]
        if (a.missing) core.call('stw_opener_fail', opener, r.id, 0, 0, 0)
        else if (a.failed) core.call('stw_opener_fail', opener, r.id, 1, ...core.str(a.failed))
        else core.call('stw_opener_reply', opener, r.id, ...core.put(a.bytes), a.total ?? -1)
      })
    }
  } catch (e) {
    if (!core.broken) core.x.stw_close(opener)
    throw e
  }
}

const ARRAYS = { UINT8: Uint8Array, INT8: Int8Array, UINT16: Uint16Array, INT16: Int16Array, UINT32: Uint32Array, INT32: Int32Array, FLOAT32: Float32Array, FLOAT64: Float64Array, UINT64: BigUint64Array, INT64: BigInt64Array }
const SPECIAL = { NaN: NaN, inf: Infinity, '-inf': -Infinity }

/** One GGUF value as `GgufFile.metadata` gives it (64-bit integers as bigint, numeric arrays typed). */
function ggufValue(type, value) {
  const scalar = (t, v) => (t === 'UINT64' || t === 'INT64' ? BigInt(v) : typeof v === 'string' && t.startsWith('FLOAT') ? SPECIAL[v] : v)
  const item = /^ARRAY\[(\w+)\]$/.exec(type)?.[1]
  if (!item) return scalar(type, value)
  const values = value.map((v) => scalar(item, v))
  return ARRAYS[item] ? ARRAYS[item].from(values) : values
}

/** A weights file opened in WebAssembly (see `openWeights`). */
class WasmWeightsFile {
  #core
  #handle
  #source
  #infos
  #closed = false

  constructor(core, handle, source, described) {
    this.#core = core
    this.#handle = handle
    this.#source = source
    this.format = described.format
    this.path = source.name
    if (described.gguf) {
      this.metadata = Object.fromEntries(described.metadata.map(([k, t, v]) => [k, ggufValue(t, v)]))
      this.metadataTypes = Object.fromEntries(described.metadata.map(([k, t]) => [k, t]))
    } else {
      this.metadata = described.metadata
    }
    this.config = described.config ?? null
    this.#infos = new Map(described.tensors.map((t) => [t.name, t]))
    this.tensorNames = described.tensors.map((t) => t.name)
    this.numParameters = described.tensors.reduce((n, t) => n + t.numel, 0)
    registry.register(this, { core, handle }, this)
  }

  #live() {
    if (this.#closed) throw coded('ERR_CLOSED', `${this.path}: the file is closed`)
  }

  has(name) {
    this.#live()
    return this.#infos.has(name)
  }

  info(name) {
    this.#live()
    const t = this.#infos.get(name)
    if (!t) this.#core.call('stw_file_spans', this.#handle, ...this.#core.str(String(name)))
    return structuredClone(t)
  }

  async getTensor(name, options = {}) {
    this.#live()
    const as = AS[options?.as ?? 'native']
    if (as === undefined) throw coded('ERR_INVALID_ARGUMENT', `options.as must be 'native', 'F32', 'F64' or 'raw', not '${options.as}'`)
    const core = this.#core
    const spans = core.call('stw_file_spans', this.#handle, ...core.str(String(name)))
    let stored = new Uint8Array(0)
    if (spans.length > 0) {
      const parts = await Promise.all(spans.map(([start, len, url]) => fileOf(this.#source, url ?? null).read(start, start + len)))
      this.#live()
      stored = new Uint8Array(spans.reduce((n, [, len]) => n + len, 0))
      let at = 0
      parts.forEach((p, i) => {
        if (p.missing || p.failed || p.bytes.length !== spans[i][1]) {
          throw coded('ERR_IO', p.failed ?? `${this.path}: tensor '${name}': ${p.bytes?.length ?? 0} bytes came for a range of ${spans[i][1]}`, { path: this.path, tensor: name })
        }
        stored.set(p.bytes, at)
        at += p.bytes.length
      })
    }
    const data = core.call('stw_file_tensor', this.#handle, ...core.str(String(name)), as, ...core.put(stored))
    const t = this.#infos.get(name)
    return { name: t.name, dtype: t.dtype, shape: [...t.shape], data }
  }

  /** The same as `getTensor` (every read is asynchronous here). */
  getTensorAsync(name, options) {
    return this.getTensor(name, options)
  }

  async tensors(options) {
    const out = {}
    for (const name of this.tensorNames) out[name] = await this.getTensor(name, options)
    return out
  }

  close() {
    if (this.#closed) return
    this.#closed = true
    registry.unregister(this)
    if (!this.#core.broken) this.#core.x.stw_close(this.#handle)
  }

  [Symbol.dispose]() {
    this.close()
  }
}

/**
 * Open a weights file: a URL (read by Range requests: the header, then each tensor's bytes
 * when asked for), a `Blob`/`File` (read by `slice`), or bytes. SafeTensors and GGUF are
 * read by ranges; NumPy and PyTorch files whole (they are parsed whole). `options.format`
 * forces a format; `options.headers`, `options.signal` and `options.fetch` apply to URLs.
 */
export async function openWeights(input, options = {}) {
  const source = sourceOf(input, options ?? {})
  const core = await load()
  const handle = await openWith(core, source, options?.format)
  try {
    return new WasmWeightsFile(core, handle, source, core.call('stw_file_describe', handle))
  } catch (e) {
    if (!core.broken) core.x.stw_close(handle)
    throw e
  }
}

/** The dtype a typed array's elements are (what the native addon reads them as). */
const NATURAL = new Map([
  [Int8Array, 'I8'], [Uint8Array, 'U8'], [Uint8ClampedArray, 'U8'], [Int16Array, 'I16'], [Uint16Array, 'U16'],
  [Int32Array, 'I32'], [Uint32Array, 'U32'], [Float32Array, 'F32'], [Float64Array, 'F64'], [BigInt64Array, 'I64'], [BigUint64Array, 'U64'],
])

/** One `TensorInput` as the core's writer takes it: its plan entry and its bytes. */
function tensorInput(name, t) {
  const bad = (message) => coded('ERR_INVALID_ARGUMENT', `tensor '${name}': ${message}`, { tensor: name })
  if (t === null || typeof t !== 'object') throw bad('each tensor must be an object {dtype?, shape, data}')
  const { dtype, shape, data } = t
  if (dtype !== undefined && dtype !== null && typeof dtype !== 'string') throw bad('dtype must be a string')
  if (!Array.isArray(shape)) throw bad('missing shape (an array of integers)')
  for (const d of shape) {
    if (!Number.isSafeInteger(d) || d < 0) throw bad(`shape entries must be non-negative integers, got ${d}`)
  }
  let source
  let bytes
  if (ArrayBuffer.isView(data) && !(data instanceof DataView)) {
    source = NATURAL.get(data.constructor)
    if (!source) throw bad(`unsupported typed array type ${data.constructor.name}`)
    bytes = new Uint8Array(data.buffer, data.byteOffset, data.byteLength)
  } else if (data instanceof DataView) {
    throw bad('DataView data is not supported; pass a Uint8Array of the raw bytes')
  } else if (Array.isArray(data)) {
    if (!data.every((v) => typeof v === 'number')) {
      throw bad('data must be an array of numbers only (for 64-bit integers beyond 2^53, pass a BigInt64Array or BigUint64Array)')
    }
    source = 'numbers'
    bytes = new Uint8Array(Float64Array.from(data).buffer)
  } else {
    throw bad('data must be a typed array or an array of numbers')
  }
  return [{ name, dtype: dtype ?? null, source, shape, len: bytes.byteLength }, bytes]
}

/**
 * The bytes of a SafeTensors file holding `tensors` (`{ name: { dtype?, shape, data } }`),
 * byte-identical to the native `serialize`; `options.metadata` is `__metadata__` (strings).
 */
export async function serialize(tensors, options = {}) {
  if (tensors === null || typeof tensors !== 'object') throw coded('ERR_INVALID_ARGUMENT', 'serialize takes an object of tensors')
  const metadata = options?.metadata ?? null
  if (metadata !== null) {
    if (typeof metadata !== 'object') throw coded('ERR_INVALID_ARGUMENT', 'options.metadata must be an object of strings')
    for (const [k, v] of Object.entries(metadata)) {
      if (typeof v !== 'string') throw coded('ERR_INVALID_ARGUMENT', `options.metadata['${k}'] must be a string, got ${JSON.stringify(v)}`)
    }
  }
  const entries = Object.keys(tensors).map((name) => tensorInput(name, tensors[name]))
  const core = await load()
  const plan = JSON.stringify({ metadata, tensors: entries.map(([e]) => e) })
  return core.call('stw_serialize', ...core.str(plan), ...core.putAll(entries.map(([, b]) => b)))
}

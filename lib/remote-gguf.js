'use strict'
// A GGUF file behind a URL (`GgufFile.openUrl`, `openWeights(url)` of a GGUF file).
//
// The header is read with range requests from the start of the file, grown (at least
// doubling) until the core has all of it, and validated by the same native code as a local
// file against the file's size; each tensor is then one range request for exactly its stored
// bytes, decoded natively (block types to F32, bit-exact as locally). A server that ignores
// `Range` (answers 200) is read once, whole (lib/remote.js's cap), and served from memory.

const binding = require('../binding.js')
const { httpGet, settings, rethrowWithPath, mapLimit, codedError, isUrl, FIRST_REQUEST_BYTES } = require('./remote.js')

const MiB = 1024 * 1024
/** The largest header read over HTTP (vocabularies of 256k tokens take ~10 MiB). */
const MAX_HEADER_BYTES = 256 * MiB

class RemoteGgufFile {
  constructor(url, file, opts, stats, local, validators = null) {
    this.url = url
    this._file = file // a native GgufFile: the whole file (local) or its header only
    this._opts = opts
    this._stats = stats
    this._local = local // true when the whole file is in memory (server ignored Range)
    this._validators = validators // size, ETag and Last-Modified at open: later ranges must match
  }

  static async open(url, options) {
    if (!isUrl(url)) throw codedError('ERR_INVALID_ARGUMENT', `openUrl needs an http:// or https:// URL, got ${typeof url === 'string' ? JSON.stringify(url) : typeof url}`)
    const opts = settings(options, url)
    const stats = { bytesFetched: 0 }
    const first = await httpGet(url, opts, stats, { range: [0, FIRST_REQUEST_BYTES - 1] })
    return RemoteGgufFile._fromFirst(url, first, opts, stats)
  }

  /** Open from a first response (a range of the file's start, or the whole file). */
  static async _fromFirst(url, first, opts, stats) {
    const report = () => opts.onProgress?.({ loadedBytes: stats.bytesFetched, totalBytes: first.total })
    if (!first.ranged) {
      report()
      const file = rethrowWithPath(url, () => binding.weightsFromBytes(first.bytes, { format: 'gguf', path: url }))
      return new RemoteGgufFile(url, file, opts, stats, true)
    }
    if (first.total === null) throw codedError('ERR_IO', 'the server did not report the file size (Content-Range: */*)', { path: url })
    let head = first.bytes
    for (;;) {
      const parsed = rethrowWithPath(url, () => binding.ggufFromHeader(head, first.total, url))
      if (typeof parsed !== 'number') {
        report()
        return new RemoteGgufFile(url, parsed, opts, stats, false, first.validators)
      }
      // The core needs `parsed` bytes at least (never more than the file has); doubling keeps
      // a large vocabulary to a few requests.
      const want = Math.min(first.total, Math.max(parsed, head.length * 2))
      if (want > MAX_HEADER_BYTES) throw codedError('ERR_INVALID_GGUF', `the header runs past ${MAX_HEADER_BYTES / MiB} MiB, the most read over HTTP`, { path: url })
      const rest = await httpGet(url, opts, stats, { range: [head.length, want - 1], seen: first.validators })
      head = Buffer.concat([head, rest.bytes])
      report()
    }
  }

  get format() { return 'gguf' }
  get path() { return this.url }
  get version() { return this._file.version }
  get alignment() { return this._file.alignment }
  get dataOffset() { return this._file.dataOffset }
  get metadata() { return this._file.metadata }
  get metadataTypes() { return this._file.metadataTypes }
  get config() { return null }
  get tensorNames() { return this._file.tensorNames }
  get numParameters() { return this._file.numParameters }
  get byteLength() { return this._file.byteLength }
  /** Bytes transferred so far for this file (header and tensors). */
  get bytesFetched() { return this._stats.bytesFetched }
  has(name) { return this._file.has(name) }
  info(name) { return rethrowWithPath(this.url, () => this._file.info(name), name) }

  getTensor(name, options) {
    if (this._open()._local) return rethrowWithPath(this.url, () => this._file.getTensor(name, options), name)
    throw codedError('ERR_INVALID_ARGUMENT', 'reading a remote tensor needs the network: use getTensorAsync', { path: this.url, tensor: name })
  }

  tensors(options) {
    if (this._open()._local) return rethrowWithPath(this.url, () => this._file.tensors(options))
    throw codedError('ERR_INVALID_ARGUMENT', 'reading remote tensors needs the network: use tensorsAsync', { path: this.url })
  }

  async getTensorAsync(name, options) {
    if (this._local) return this._file.getTensorAsync(name, options).catch((e) => rethrowWithPath(this.url, () => { throw e }, name))
    const [start, end] = rethrowWithPath(this.url, () => binding.ggufTensorRange(this._file, name), name)
    const bytes = end > start ? (await httpGet(this.url, this._opts, this._stats, { range: [start, end - 1], seen: this._validators })).bytes : new Uint8Array(0)
    this._opts.onProgress?.({ loadedBytes: this._stats.bytesFetched, totalBytes: this.byteLength })
    return rethrowWithPath(this.url, () => binding.ggufDecodeTensor(this._file, name, bytes, options), name)
  }

  async tensorsAsync(options) {
    const names = this.tensorNames
    const results = await mapLimit(names, this._opts.concurrency, (n) => this.getTensorAsync(n, options))
    const out = {}
    // Defined, not assigned: a tensor named '__proto__' is data.
    names.forEach((n, i) => Object.defineProperty(out, n, { value: results[i], writable: true, enumerable: true, configurable: true }))
    return out
  }
  /** Release the header (later calls throw ERR_CLOSED); tensors handed out stay valid. */
  close() {
    this._closed = true
    this._file.close()
  }
  _open() {
    if (this._closed) throw codedError('ERR_CLOSED', 'this GgufFile was closed: open it again to read it', { path: this.url })
    return this
  }
  [Symbol.dispose ?? Symbol.for('nodejs.dispose')]() { this.close() }
}

module.exports = { RemoteGgufFile }

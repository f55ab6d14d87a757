'use strict'
// safetensors-node, the package entry (CommonJS; index.mjs re-exports it for ES modules).
// It exports the documented API and nothing else. The generated native binding (binding.js)
// also holds internal calls, which lib/remote.js (the HTTP layer: Node's fetch with range
// requests) uses directly.
let binding
try {
  binding = require('./binding.js')
} catch (e) {
  throw require('./lib/missing-binary.js').missingBinaryError(e, __dirname)
}
const { loadPretrained, loadPretrainedUrl, openRemoteWeights, openUrl, isUrl, redactUrl, resolveTarget, withLocalCopy, withTarget } = require('./lib/remote.js')
const hub = require('./lib/hub.js')

// napi-rs rejects arguments of the wrong JS type (a number where a string belongs, …) before
// our code runs, with its own status as `code`; callers get ERR_INVALID_ARGUMENT, the code
// every other wrong argument has (docs/api.md), and the status stays as `napiStatus`.
const NAPI_ARGUMENT_CODES = new Set([
  'InvalidArg', 'ObjectExpected', 'StringExpected', 'NameExpected', 'FunctionExpected', 'NumberExpected',
  'BooleanExpected', 'ArrayExpected', 'BigintExpected', 'DateExpected', 'ArrayBufferExpected',
])
function argumentError(e) {
  if (e && typeof e.code === 'string' && NAPI_ARGUMENT_CODES.has(e.code)) {
    e.napiStatus = e.code
    e.code = 'ERR_INVALID_ARGUMENT'
    // napi-rs names the Rust type: "Expect value to be Option<Object>, but received Number".
    if (typeof e.message === 'string') e.message = e.message.replace(/\bOption<(\w+)>/g, '$1 or undefined')
  }
  return e
}
// Calls that return a Promise report every failure, argument errors included, as a rejection
// (as an async function does), never as a synchronous throw. The errors suite calls every
// declaration of index.d.ts to check these sets.
const PROMISE_FUNCTIONS = new Set(['convert', 'inspectJson', 'validate', 'loadModelDir'])
const PROMISE_METHODS = new Set(['save'])
const PROMISE_STATICS = new Set()
const isAsync = (name, set) => name.endsWith('Async') || set.has(name)
function withArgumentErrors(fn, async) {
  const wrapped = function (...args) {
    let result
    try {
      result = fn.apply(this, args)
    } catch (e) {
      if (async) return Promise.reject(argumentError(e))
      throw argumentError(e)
    }
    return result instanceof Promise ? result.catch((e) => Promise.reject(argumentError(e))) : result
  }
  Object.defineProperty(wrapped, 'name', { value: fn.name })
  return wrapped
}
/** Wrap each method, or each static method (src/ declares statics `writable`: napi-rs's default is read-only). */
function wrapMembers(target, set) {
  for (const key of Object.getOwnPropertyNames(target)) {
    const d = Object.getOwnPropertyDescriptor(target, key)
    if (key !== 'constructor' && typeof d.value === 'function' && d.writable) target[key] = withArgumentErrors(d.value, isAsync(key, set))
  }
}
for (const value of Object.values(binding)) {
  if (typeof value !== 'function' || !value.prototype) continue
  wrapMembers(value.prototype, PROMISE_METHODS)
  wrapMembers(value, PROMISE_STATICS)
}

// Functions too, in place: internal callers (lib/remote.js) get the same codes.
for (const [name, value] of Object.entries(binding)) {
  if (typeof value === 'function' && !/^[A-Z]/.test(name)) binding[name] = withArgumentErrors(value, isAsync(name, PROMISE_FUNCTIONS))
}

const { SafeTensorsFile, GgufFile, Model, LinearRegression, LogisticRegression, inspectJson, loadModelDir, openWeightsAsync } = binding

// Explicit resource management: `using file = SafeTensorsFile.open(path)` closes it at the end
// of the block. Every class with a native close() (SafeTensorsFile, WeightsFile, Model, …).
const DISPOSE = Symbol.dispose ?? Symbol.for('nodejs.dispose')
const INSPECT = Symbol.for('nodejs.util.inspect.custom')
for (const value of Object.values(binding)) {
  if (typeof value !== 'function' || typeof value.prototype?.close !== 'function') continue
  Object.defineProperty(value.prototype, DISPOSE, { value: function dispose() { this.close() }, writable: true, configurable: true })
  Object.defineProperty(value.prototype, INSPECT, { value: inspectWeights, writable: true, configurable: true })
}

/** What `console.log(file)` shows: path, format, tensor count, stored types, parameters. */
function inspectWeights(depth, options, inspect) {
  const name = this.constructor.name
  let summary
  try {
    const names = this.tensorNames
    const types = {}
    for (const n of names) {
      const type = this.info(n).storedType
      types[type] = (types[type] ?? 0) + 1
    }
    summary = { path: this.path, format: this.format ?? 'safetensors', tensors: names.length, types, parameters: this.numParameters }
  } catch (e) {
    if (e?.code !== 'ERR_CLOSED') throw e
    return `${name} <closed>`
  }
  return depth < 0 ? `[${name}]` : `${name} ${(inspect ?? require('node:util').inspect)(summary, { ...options, depth: options?.depth == null ? null : options.depth - 1 })}`
}

/** Open a SafeTensors file over HTTP(S): header by range request, tensors on demand. */
SafeTensorsFile.openUrl = (url, options) => openUrl(url, options, { kind: 'file', required: 'safetensors', caller: 'openUrl' })

/** Open a GGUF file over HTTP(S): header by range requests, tensors on demand. */
GgufFile.openUrl = (url, options) => openUrl(url, options, { kind: 'file', required: 'gguf', caller: 'openUrl' })

/**
 * A local directory, an http(s):// URL of one (fetched lazily with range requests), or a
 * Hugging Face model id `org/name`: its snapshot in the local Hugging Face cache, else (with
 * options.endpoint or HF_ENDPOINT) `{endpoint}/{id}/resolve/{revision}/` over HTTP.
 */
Model.loadPretrained = async (dir, options) => (isUrl(dir) ? loadPretrainedUrl(dir, options) : loadPretrained(dir, options, loadModelDir))
/** `loadPretrained` of a local directory or a cached model id, on the calling thread. */
const loadPretrainedSync = Model.loadPretrainedSync
Model.loadPretrainedSync = withArgumentErrors(function loadPretrainedSync_(dir, options) {
  return loadPretrainedSync.call(Model, resolveTarget(dir, options, 'loadPretrainedSync').dir, options)
}, false)
Object.defineProperty(Model.loadPretrainedSync, 'name', { value: 'loadPretrainedSync' })

// The public API: index.mjs re-exports exactly these by name, index.d.ts declares them and
// docs/api.md documents them (__test__/exports.spec.ts and docs.spec.ts check they agree).
module.exports = {
  SafeTensorsFile,
  GgufFile,
  Model,
  LinearRegression,
  LogisticRegression,
  loadFile: binding.loadFile,
  loadFileAsync: binding.loadFileAsync,
  saveFile: binding.saveFile,
  saveFileAsync: binding.saveFileAsync,
  serialize: binding.serialize,
  /**
   * Convert a local path, a model id (as loadPretrained resolves it), or an http(s):// URL of
   * a file or directory (copied to a temporary directory first).
   */
  convert: async (input, output, options) =>
    isUrl(input)
      ? withLocalCopy(input, true, options, (local) => binding.convert(local, output, options))
      : withTarget(input, options, 'convert', true, (local) => binding.convert(local, output, options)),
  /** Describe a weights file of any format, a sharded index or a model directory (a path, a model id, or a URL: SafeTensors headers only). */
  inspect: async (path, options) =>
    JSON.parse(await (isUrl(path) ? withLocalCopy(path, false, options, (local) => inspectJson(local)) : withTarget(path, options, 'inspect', false, (local) => inspectJson(local)))),
  /** Every problem of a file or model directory (a path, a model id, or a URL: SafeTensors headers only). */
  validate: async (path, options) => {
    // What cannot be read is a problem in the report, as a missing local path is.
    const asReport = (e) => ({ path: isUrl(path) ? redactUrl(path) : path, format: null, ok: false, errors: [{ code: e.code, message: e.message }], omittedErrors: 0 })
    if (isUrl(path)) return withLocalCopy(path, false, options, (local) => binding.validate(local), asReport)
    try {
      return await withTarget(path, options, 'validate', false, (local) => binding.validate(local), asReport)
    } catch (e) {
      if (typeof e?.code === 'string' && e.code !== 'ERR_INVALID_ARGUMENT') return asReport(e)
      throw e
    }
  },
  /**
   * Any weights file (SafeTensors, a sharded index, a model directory, GGUF, weights.mlx),
   * recognised by its bytes (a GGUF file is a `GgufFile`); or an http(s):// URL of one
   * (SafeTensors and GGUF lazily, weights.mlx whole).
   */
  openWeights: async (pathOrUrl, options) =>
    isUrl(pathOrUrl) ? openRemoteWeights(pathOrUrl, options) : openWeightsAsync(resolveTarget(pathOrUrl, options, 'openWeights').dir, options),
  /** `openWeights` of a local path (or a model id in the Hugging Face cache), on the calling thread. */
  openWeightsSync: withArgumentErrors(function openWeightsSync(path, options) {
    return binding.openWeightsSync(resolveTarget(path, options, 'openWeightsSync').dir, options)
  }, false),
  /** Download a model from the Hugging Face Hub into the shared cache; resolves to its snapshot directory. */
  download: hub.download,
  /** Hash every file of a cache snapshot, a cached model id or (with options.id) a plain directory against the Hub's hashes. */
  verify: hub.verify,
  /** Compare two weight sources (paths or cached model ids) tensor by tensor. */
  diff: async (a, b, options) =>
    binding.diffWeights(resolveTarget(a, options, 'diff').dir, resolveTarget(b, options, 'diff').dir, options?.names),
}

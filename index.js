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
const { RemoteSafeTensorsFile, loadPretrainedUrl, isUrl } = require('./lib/remote.js')

// napi-rs rejects arguments of the wrong JS type (a number where a string belongs, …) before
// our code runs, with its own status as `code`; callers get API.md's code for that case.
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

const { SafeTensorsFile, Model, LinearRegression, LogisticRegression, inspectJson, loadModelDir } = binding

/** Open a SafeTensors file over HTTP(S): header by range request, tensors on demand. */
SafeTensorsFile.openUrl = (url, options) => RemoteSafeTensorsFile.open(url, options)

/** A local directory, or an http(s):// URL of one (fetched lazily with range requests). */
Model.loadPretrained = (dir, options) => (isUrl(dir) ? loadPretrainedUrl(dir, options) : loadModelDir(dir, options))

// The public API: README's "API" section lists exactly these (index.mjs re-exports them by
// name, index.d.ts declares them; __test__/exports.spec.ts checks the four agree).
module.exports = {
  SafeTensorsFile,
  Model,
  LinearRegression,
  LogisticRegression,
  loadFile: binding.loadFile,
  loadFileAsync: binding.loadFileAsync,
  saveFile: binding.saveFile,
  saveFileAsync: binding.saveFileAsync,
  serialize: binding.serialize,
  convert: binding.convert,
  /** Describe a SafeTensors file, sharded index, GGUF file, weights.mlx or model directory. */
  inspect: async (path) => JSON.parse(await inspectJson(path)),
  validate: binding.validate,
}

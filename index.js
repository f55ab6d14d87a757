'use strict'
// safetensors-node: the generated native binding (binding.js), plus the HTTP layer for
// remote weights (lib/remote.js, Node's fetch with range requests).
const binding = require('./binding.js')
const { RemoteSafeTensorsFile, RemoteModel, loadPretrainedUrl, isUrl } = require('./lib/remote.js')

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
  }
  return e
}
function withArgumentErrors(fn) {
  return function (...args) {
    let result
    try {
      result = fn.apply(this, args)
    } catch (e) {
      throw argumentError(e)
    }
    return result instanceof Promise ? result.catch((e) => Promise.reject(argumentError(e))) : result
  }
}
for (const value of Object.values(binding)) {
  if (typeof value !== 'function' || !value.prototype) continue
  for (const key of Object.getOwnPropertyNames(value.prototype)) {
    const d = Object.getOwnPropertyDescriptor(value.prototype, key)
    if (key !== 'constructor' && typeof d.value === 'function' && d.writable) value.prototype[key] = withArgumentErrors(d.value)
  }
}

const { SafeTensorsFile, Model } = binding

/** Open a SafeTensors file over HTTP(S): header by range request, tensors on demand. */
SafeTensorsFile.openUrl = (url, options) => RemoteSafeTensorsFile.open(url, options)

/** A local directory, or an http(s):// URL of one (fetched lazily with range requests). */
Model.loadPretrained = (dir, options) => (isUrl(dir) ? loadPretrainedUrl(dir, options) : Model.loadPretrainedDir(dir, options))

const exported = { ...binding, RemoteSafeTensorsFile, RemoteModel }
for (const [name, value] of Object.entries(binding)) {
  if (typeof value === 'function' && !/^[A-Z]/.test(name)) exported[name] = withArgumentErrors(value)
}
/** Describe a SafeTensors file, sharded index, GGUF file, weights.mlx or model directory. */
exported.inspect = async (path) => JSON.parse(await exported.inspectJson(path))
module.exports = exported

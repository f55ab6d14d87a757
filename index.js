'use strict'
// safetensors-node: the generated native binding (binding.js), plus the HTTP layer for
// remote weights (lib/remote.js), which uses Node's fetch for range requests.
const binding = require('./binding.js')
const { RemoteSafeTensorsFile, RemoteModel, loadPretrainedUrl, isUrl } = require('./lib/remote.js')

const { SafeTensorsFile, Model } = binding

/** Open a SafeTensors file over HTTP(S): header by range request, tensors on demand. */
SafeTensorsFile.openUrl = (url, options) => RemoteSafeTensorsFile.open(url, options)

/** A local directory, or an http(s):// URL of one (fetched lazily with range requests). */
Model.loadPretrained = (dir, options) => (isUrl(dir) ? loadPretrainedUrl(dir, options) : Model.loadPretrainedDir(dir, options))

module.exports = { ...binding, RemoteSafeTensorsFile, RemoteModel }

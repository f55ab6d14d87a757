// The package from CommonJS: require gives the same API. Prints checks.cjs's result as JSON.
const api = require('safetensors-node')
const checks = require('./checks.cjs')

checks(api).then((result) => console.log(JSON.stringify({ ...result, defaultIsNamespace: true })))

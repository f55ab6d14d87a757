'use strict'
// What a user's first program does with the installed package, in any runtime (Node, Bun,
// Deno) and from either module system: `api` is what the entry gave (require's object, or the
// ES namespace without `default`). Returns plain data; __test__/package.spec.ts compares it
// with values it knows independently (hand-encoded BF16 bytes, y = 2x + 1, …).
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')

function codeOf(fn) {
  try {
    fn()
    return null
  } catch (e) {
    return e.code ?? `no code: ${e.message}`
  }
}

module.exports = async function checks(api) {
  const { SafeTensorsFile, Model, LinearRegression, saveFile, loadFile, serialize, convert, inspect, validate } = api
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'stn-smoke-'))
  try {
    const file = path.join(dir, 'w.safetensors')
    saveFile(file, {
      w: { dtype: 'BF16', shape: [3], data: [1, -2.5, 3.140625] },
      ids: { shape: [2], data: new BigInt64Array([7n, -1n]) },
    }, { metadata: { source: 'smoke' } })
    const f = SafeTensorsFile.open(file)
    const asyncTensor = await f.getTensorAsync('w', { as: 'F64' })
    const lr = new LinearRegression().fit([[0], [1], [2], [3]], [1, 3, 5, 7])
    const modelDir = path.join(dir, 'linear')
    await lr.save(modelDir)
    const model = await Model.loadPretrained(modelDir)
    const gguf = path.join(dir, 'w.gguf')
    const report = await convert(file, gguf, { to: 'gguf' })
    const described = await inspect(gguf)
    return {
      exports: Object.keys(api).sort(),
      tensorNames: f.tensorNames,
      metadata: f.metadata,
      w: Array.from(f.getTensor('w').data),
      wRaw: Array.from(f.getTensor('w', { as: 'raw' }).data),
      wAsync: Array.from(asyncTensor.data),
      ids: Array.from(loadFile(file).ids.data, String),
      serializedBytes: serialize({ x: { shape: [1], data: new Float32Array([0.5]) } }).length,
      predict: Array.from(lr.predict([[10]])),
      modelPredict: Array.from(model.predict([[10]])),
      modelFormat: model.format,
      converted: { outputFormat: report.outputFormat, tensors: report.tensors },
      inspected: { format: described.format, names: described.tensors.map((t) => t.name).sort() },
      validateOk: (await validate(file)).ok,
      codes: {
        missingFile: codeOf(() => SafeTensorsFile.open(path.join(dir, 'missing.safetensors'))),
        newSafeTensorsFile: codeOf(() => new SafeTensorsFile()),
        newModel: codeOf(() => new Model()),
        badArgument: codeOf(() => SafeTensorsFile.open(42)),
      },
    }
  } finally {
    fs.rmSync(dir, { recursive: true, force: true })
  }
}

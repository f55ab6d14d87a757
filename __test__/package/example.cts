// TypeScript (module: nodenext) in a CommonJS project: `import x = require(…)` and named
// imports, the types of results (`as: 'F32'` is a Float32Array), and what is not there.
// Compiled and run by __test__/package.spec.ts; type-checked in the repository by `tsc` too.
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import sn = require('safetensors-node')
import { LinearRegression, SafeTensorsFile, saveFile, type ErrorCode, type SafeTensorsError, type Tensor } from 'safetensors-node'
// @ts-expect-error internals are not part of the package's types
import type { decodeTensor } from 'safetensors-node'

const dir = mkdtempSync(join(tmpdir(), 'stn-ts-'))
const path = join(dir, 'a.safetensors')
saveFile(path, { w: { dtype: 'F16', shape: [2], data: new Float32Array([0.5, -4]) } })
const file: SafeTensorsFile = SafeTensorsFile.open(path)
const w: Tensor<Float32Array> = file.getTensor('w', { as: 'F32' })
const raw: Uint8Array = file.getTensor('w', { as: 'raw' }).data
let code: ErrorCode | undefined
try {
  SafeTensorsFile.open(join(dir, 'missing.safetensors'))
} catch (e) {
  code = (e as SafeTensorsError).code
}
// @ts-expect-error instances come from open/openAsync/fromBytes/openUrl
const construct = () => new SafeTensorsFile()
const predicted: Float32Array = new LinearRegression().fit([[0], [1]], [1, 3]).predict([[2]])
rmSync(dir, { recursive: true })
console.log(JSON.stringify({
  w: Array.from(w.data),
  raw: Array.from(raw),
  code,
  constructCode: (() => { try { construct(); return null } catch (e) { return (e as SafeTensorsError).code } })(),
  predicted: Array.from(predicted),
  defaultIsNamed: sn.SafeTensorsFile === SafeTensorsFile,
}))

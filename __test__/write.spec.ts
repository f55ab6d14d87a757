import { describe, expect, it } from 'vitest'
import { spawnSync } from 'node:child_process'
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { convert, LinearRegression, SafeTensorsFile, saveFile, saveFileAsync, serialize, type DType, type TensorInput } from '../index.js'
import { fixture, tempDir } from './helpers'

describe('writer', () => {
  it('reproduces the reference writer byte for byte (fixture files)', () => {
    for (const name of ['all_dtypes', 'half_special', 'tiny_checkpoint']) {
      const path = fixture('safetensors', `${name}.safetensors`)
      const original = readFileSync(path)
      const f = SafeTensorsFile.open(path)
      const inputs: Record<string, TensorInput> = {}
      for (const n of f.tensorNames) {
        const t = f.getTensor(n, { as: 'raw' })
        inputs[n] = { dtype: t.dtype, shape: t.shape, data: t.data }
      }
      const bytes = serialize(inputs, f.metadata ? { metadata: f.metadata } : undefined)
      expect(bytes.equals(original), name).toBe(true)
    }
  })

  it('pads the header with spaces to a multiple of 8 and orders by dtype, then name', () => {
    const bytes = serialize({
      b: { data: new Uint8Array([1]), shape: [1] },
      a: { data: new Uint8Array([2]), shape: [1] },
      w: { data: new Float64Array([1]), shape: [1] },
    })
    const n = Number(bytes.readBigUInt64LE(0))
    expect(n % 8).toBe(0)
    const header = bytes.subarray(8, 8 + n).toString()
    expect(header).toMatch(/^\{"w":\{"dtype":"F64","shape":\[1\],"data_offsets":\[0,8\]\},"a":.*"b":.*\} *$/)
    expect(header.trimEnd().length).toBeGreaterThan(n - 8)
  })

  it('is deterministic: metadata keys sorted, same bytes for the same input in any order', () => {
    const one = serialize({ x: { data: [1, 2], shape: [2] }, y: { data: [3], shape: [1] } }, { metadata: { z: '1', a: '2' } })
    const two = serialize({ y: { data: [3], shape: [1] }, x: { data: [1, 2], shape: [2] } }, { metadata: { a: '2', z: '1' } })
    expect(one.equals(two)).toBe(true)
    expect(one.toString()).toContain('{"__metadata__":{"a":"2","z":"1"}')
  })

  const samples: Record<string, { data: TensorInput['data']; expect: ArrayLike<number | bigint> }> = {
    F32: { data: new Float32Array([1.5, -0, Infinity, NaN]), expect: [1.5, -0, Infinity, NaN] },
    F64: { data: new Float64Array([Math.PI, -1e300]), expect: [Math.PI, -1e300] },
    I8: { data: new Int8Array([-128, 127]), expect: [-128, 127] },
    U8: { data: new Uint8Array([0, 255]), expect: [0, 255] },
    I16: { data: new Int16Array([-32768, 7]), expect: [-32768, 7] },
    U16: { data: new Uint16Array([65535]), expect: [65535] },
    I32: { data: new Int32Array([-(2 ** 31), 5]), expect: [-(2 ** 31), 5] },
    U32: { data: new Uint32Array([2 ** 32 - 1]), expect: [2 ** 32 - 1] },
    I64: { data: new BigInt64Array([-(2n ** 63n), 2n ** 53n + 1n]), expect: [-(2n ** 63n), 2n ** 53n + 1n] },
    U64: { data: new BigUint64Array([2n ** 64n - 1n]), expect: [2n ** 64n - 1n] },
    BOOL: { data: new Uint8Array([1, 0, 1]), expect: [1, 0, 1] },
    F16: { data: new Float32Array([1, 65504, 2 ** -24, -0]), expect: [1, 65504, 2 ** -24, -0] },
    BF16: { data: new Float32Array([1, -2, 3.140625]), expect: [1, -2, 3.140625] },
    F8_E4M3: { data: new Uint8Array([0x38, 0x7e]), expect: [1, 448] },
    F8_E5M2: { data: new Uint8Array([0x3c, 0x7c]), expect: [1, Infinity] },
    F8_E8M0: { data: new Uint8Array([127, 128]), expect: [1, 2] },
    F8_E4M3FNUZ: { data: new Uint8Array([0x40]), expect: [1] },
    F8_E5M2FNUZ: { data: new Uint8Array([0x40]), expect: [1] },
  }

  it.each(Object.keys(samples))('%s round-trips through a file', async (dtype) => {
    const s = samples[dtype]
    const dir = tempDir()
    const p = join(dir, 'rt.safetensors')
    const n = (s.data as any).length
    saveFile(p, { t: { dtype: dtype as DType, shape: [n], data: s.data } })
    const t = SafeTensorsFile.open(p).getTensor('t')
    expect(t.dtype).toBe(dtype)
    expect(t.shape).toEqual([n])
    for (let i = 0; i < n; i++) expect(Object.is(t.data[i], s.expect[i]), `${dtype}[${i}]`).toBe(true)
    await saveFileAsync(p, { t: { dtype: dtype as DType, shape: [n], data: s.data } })
    expect(SafeTensorsFile.open(p).getTensor('t').data.length).toBe(n)
  })

  it('writes sub-byte and complex dtypes from raw bytes', () => {
    const f = SafeTensorsFile.fromBytes(
      serialize({
        f4: { dtype: 'F4', shape: [2, 2], data: new Uint8Array([0xab, 0xcd]) },
        f6: { dtype: 'F6_E2M3', shape: [4], data: new Uint8Array([1, 2, 3]) },
        f6b: { dtype: 'F6_E3M2', shape: [4], data: new Uint8Array([4, 5, 6]) },
        c: { dtype: 'C64', shape: [2], data: new Uint8Array(16) },
      }),
    )
    expect(Array.from(f.getTensor('f4', { as: 'raw' }).data as Uint8Array)).toEqual([0xab, 0xcd])
    expect(f.info('f6').byteLength).toBe(3)
    expect(f.info('c').byteLength).toBe(16)
  })

  it('rounds float data to nearest even for F16 / BF16; Uint16Array is taken as raw bits', () => {
    const tie16 = 1 + 2 ** -11 // exactly between 1 and the next f16: ties to even (1)
    const above16 = 1 + 3 * 2 ** -11 // between 1+2^-10 and 1+2^-9: ties to even (1+2^-9)
    const tieBf = 1 + 2 ** -8
    const f = SafeTensorsFile.fromBytes(
      serialize({
        h: { dtype: 'F16', shape: [4], data: new Float64Array([tie16, above16, NaN, 70000]) },
        b: { dtype: 'BF16', shape: [2], data: [tieBf, NaN] },
        bits: { dtype: 'F16', shape: [2], data: new Uint16Array([0x3c00, 0x7c00]) },
        bbits: { dtype: 'BF16', shape: [1], data: new Uint16Array([0x4049]) },
      }),
    )
    const h = f.getTensor('h').data as Float32Array
    expect(h[0]).toBe(1)
    expect(h[1]).toBe(1 + 2 ** -9)
    expect(Number.isNaN(h[2])).toBe(true)
    expect(h[3]).toBe(Infinity)
    const b = f.getTensor('b').data as Float32Array
    expect(b[0]).toBe(1)
    expect(Number.isNaN(b[1])).toBe(true)
    expect(Array.from(f.getTensor('bits').data as Float32Array)).toEqual([1, Infinity])
    expect((f.getTensor('bbits').data as Float32Array)[0]).toBe(3.140625)
  })

  it('number[] defaults to F32; other dtypes check integers', () => {
    const f = SafeTensorsFile.fromBytes(serialize({ a: { data: [0.1, 2], shape: [2] }, i: { dtype: 'I32', data: [-3, 4], shape: [1, 2] } }))
    expect(f.info('a').dtype).toBe('F32')
    expect((f.getTensor('a').data as Float32Array)[0]).toBe(Math.fround(0.1))
    expect(Array.from(f.getTensor('i').data as Int32Array)).toEqual([-3, 4])
    expect(() => serialize({ i: { dtype: 'I32', data: [1.5], shape: [1] } })).toThrow(expect.objectContaining({ code: 'ERR_INVALID_ARGUMENT', tensor: 'i' }))
    // Anything but numbers in the array: one clear message, the tensor named once.
    for (const data of [[1, 'x'], [1n], [null]]) {
      expect(() => serialize({ w: { dtype: 'I64', data: data as any, shape: [data.length] } })).toThrow(
        expect.objectContaining({ code: 'ERR_INVALID_ARGUMENT', tensor: 'w', message: expect.stringMatching(/^tensor 'w': data must be an array of numbers only/) }),
      )
    }
  })

  it('rejects bad input with ERR_INVALID_ARGUMENT naming the tensor', async () => {
    const bad: Array<[Record<string, any>, object | undefined]> = [
      [{ a: { data: new Float32Array(3), shape: [2] } }, undefined],
      [{ a: { data: new Float32Array(3), shape: [3], dtype: 'F128' } }, undefined],
      [{ a: { data: new Float32Array(3) } }, undefined],
      [{ a: { data: 'nope', shape: [1] } }, undefined],
      [{ a: { data: new Float32Array(1), shape: [-1] } }, undefined],
      [{ a: { data: new Float32Array(1), shape: [1.5] } }, undefined],
      [{ a: 5 }, undefined],
      [{ a: { data: new BigInt64Array(1), shape: [1], dtype: 'F32' } }, undefined],
      [{ a: { data: new Float32Array(1), shape: [1] } }, { metadata: { k: 1 } }],
      [{ a: { data: new Float32Array(1), shape: [1] } }, { metadata: 'x' }],
      [{ __metadata__: { data: new Float32Array(1), shape: [1] } }, undefined],
    ]
    const dir = tempDir()
    for (const [i, [tensors, options]] of bad.entries()) {
      expect(() => serialize(tensors, options as any), `case ${i}`).toThrow(expect.objectContaining({ code: 'ERR_INVALID_ARGUMENT' }))
      expect(() => saveFile(join(dir, 'x.safetensors'), tensors, options as any)).toThrow(expect.objectContaining({ code: 'ERR_INVALID_ARGUMENT' }))
      await expect(Promise.resolve().then(() => saveFileAsync(join(dir, 'x.safetensors'), tensors, options as any))).rejects.toMatchObject({ code: 'ERR_INVALID_ARGUMENT' })
    }
    expect(readdirSync(dir)).toEqual([])
  })

  it('writes atomically: no temp file left, an open mapping of the old file stays valid', async () => {
    const dir = tempDir()
    const p = join(dir, 'w.safetensors')
    saveFile(p, { t: { data: new Float32Array([1, 2, 3]), shape: [3] } })
    const old = SafeTensorsFile.open(p)
    const oldView = old.getTensor('t').data as Float32Array
    await saveFileAsync(p, { t: { data: new Float32Array([7, 8, 9, 10]), shape: [4] } })
    expect(readdirSync(dir)).toEqual(['w.safetensors'])
    expect(Array.from(oldView)).toEqual([1, 2, 3])
    expect(Array.from(old.getTensor('t').data as Float32Array)).toEqual([1, 2, 3])
    expect(Array.from(SafeTensorsFile.open(p).getTensor('t').data as Float32Array)).toEqual([7, 8, 9, 10])
  })

  it('a missing directory is ERR_NOT_FOUND and leaves nothing behind', async () => {
    const dir = tempDir()
    const p = join(dir, 'no', 'such', 'x.safetensors')
    expect(() => saveFile(p, { t: { data: [1], shape: [1] } })).toThrow(expect.objectContaining({ code: 'ERR_NOT_FOUND' }))
    await expect(saveFileAsync(p, { t: { data: [1], shape: [1] } })).rejects.toMatchObject({ code: 'ERR_NOT_FOUND' })
  })

  it('saveFileAsync copies input: the caller may reuse its arrays at once', async () => {
    const dir = tempDir()
    const p = join(dir, 'c.safetensors')
    const data = new Float32Array([1, 2])
    const pending = saveFileAsync(p, { t: { data, shape: [2] } })
    data.fill(0)
    await pending
    expect(Array.from(SafeTensorsFile.open(p).getTensor('t').data as Float32Array)).toEqual([1, 2])
  })

  it('a subarray view writes only its own bytes', () => {
    const backing = new Float32Array([9, 1, 2, 9])
    const f = SafeTensorsFile.fromBytes(serialize({ t: { data: backing.subarray(1, 3), shape: [2] } }))
    expect(Array.from(f.getTensor('t').data as Float32Array)).toEqual([1, 2])
    writeFileSync(join(tempDir(), 'unused'), '')
  })
})

describe('names that are awkward in JavaScript', () => {
  // Valid JSON keys that a naive binding mishandles: "__proto__" assigned (not defined) sets
  // the prototype and vanishes; a NUL inside a name breaks C-string property APIs.
  it('"__proto__" and names with NUL round-trip as own keys, sync and async, tensors and metadata', async () => {
    const inputs = JSON.parse('{"__proto__": {"shape": [1], "data": [1]}, "a\\u0000b": {"shape": [2], "data": [2, 3]}}')
    const metadata = JSON.parse('{"__proto__": "p", "k\\u0000": "v"}')
    const f = SafeTensorsFile.fromBytes(serialize(inputs, { metadata }))
    expect(f.tensorNames).toEqual(['__proto__', 'a\u0000b'])
    for (const all of [f.tensors(), await f.tensorsAsync()]) {
      expect(Object.keys(all)).toEqual(['__proto__', 'a\u0000b'])
      expect(Object.getPrototypeOf(all)).toBe(Object.prototype)
      expect(Array.from(Object.getOwnPropertyDescriptor(all, '__proto__')!.value.data)).toEqual([1])
      expect(Array.from(all['a\u0000b'].data as Float32Array)).toEqual([2, 3])
    }
    expect(Object.keys(f.metadata!)).toEqual(['__proto__', 'k\u0000'])
    expect(Object.getOwnPropertyDescriptor(f.metadata, '__proto__')!.value).toBe('p')
    expect(Object.getPrototypeOf(f.metadata)).toBe(Object.prototype)
  })
})

const STRACE = ['/usr/bin/strace', '/bin/strace'].find((p) => existsSync(p) && spawnSync(p, ['-f', '-o', '/dev/null', 'true']).status === 0)

describe('durability', () => {
  it('durable: true writes the same bytes, atomically; serialize takes no such option', async () => {
    const dir = tempDir()
    const tensors = { w: { shape: [2, 2], data: new Float32Array([1, 2, 3, 4]) }, b: { dtype: 'BF16' as const, shape: [2], data: [0.5, -1] } }
    saveFile(join(dir, 'plain.safetensors'), tensors, { metadata: { k: 'v' } })
    saveFile(join(dir, 'durable.safetensors'), tensors, { metadata: { k: 'v' }, durable: true })
    await saveFileAsync(join(dir, 'durable-async.safetensors'), tensors, { metadata: { k: 'v' }, durable: true })
    const want = readFileSync(join(dir, 'plain.safetensors'))
    expect(readFileSync(join(dir, 'durable.safetensors')).equals(want)).toBe(true)
    expect(readFileSync(join(dir, 'durable-async.safetensors')).equals(want)).toBe(true)
    expect(serialize(tensors, { metadata: { k: 'v' } }).equals(want)).toBe(true)
    expect(readdirSync(dir).sort()).toEqual(['durable-async.safetensors', 'durable.safetensors', 'plain.safetensors'])
  })

  // The only way to see an fsync from outside is to watch the system calls.
  it.skipIf(!STRACE)('fsyncs nothing by default; durable: true fsyncs each temporary file, then its directory (saveFile, saveFileAsync, convert, Model.save, model classes)', () => {
    const fsyncs = (mode: string) => {
      const dir = tempDir()
      const log = join(dir, 'strace.log')
      const child = join(__dirname, 'child', 'durable_writes.cjs')
      const r = spawnSync(STRACE!, ['-f', '-y', '-e', 'trace=fsync,fdatasync', '-o', log, process.execPath, child, dir, mode], { encoding: 'utf8' })
      expect(r.status, r.stderr).toBe(0)
      expect(readdirSync(dir).sort()).toEqual([
        'async.safetensors', 'lin', 'lin-async.safetensors', 'lin.gguf', 'lin.onnx', 'lin.safetensors', 'model', 'out.gguf', 'restyled', 'saved', 'strace.log', 'sync.safetensors',
      ])
      for (const d of ['saved', 'lin']) expect(readdirSync(join(dir, d)).sort()).toEqual(['config.json', 'model.safetensors'])
      expect(readdirSync(join(dir, 'restyled')).sort()).toEqual(['config.json', 'weights.mlx'])
      // "1234 fsync(21</tmp/x/.sync.safetensors.1234.<random>.tmp>) = 0" → the path, relative
      // to dir (a Model.save writes into a new directory beside its target, `.NAME.<id>.saving`).
      return readFileSync(log, 'utf8').split('\n').flatMap((line) => {
        const m = /\b(?:fsync|fdatasync)\(\d+<([^>]*)>\)\s*=\s*0/.exec(line)
        return m ? [m[1] === dir ? '.' : m[1].replace(`${dir}/`, '').replace(/\.\d+\.[0-9a-f]{16}\.tmp$/, '.tmp').replace(/\.[0-9a-f]{16}\.saving/, '.saving')] : []
      })
    }
    expect(fsyncs('default')).toEqual([])
    // A Model.save writes each file of the new directory (fsynced, then the new directory),
    // fsyncs the new directory once more before it takes the target's place, and the parent
    // ('.') after.
    expect(fsyncs('durable')).toEqual([
      '.sync.safetensors.tmp', '.', '.async.safetensors.tmp', '.', '.out.gguf.tmp', '.',
      '.saved.saving/.model.safetensors.tmp', '.saved.saving', '.saved.saving/.config.json.tmp', '.saved.saving', '.saved.saving', '.',
      '.restyled.saving/.weights.mlx.tmp', '.restyled.saving', '.restyled.saving/.config.json.tmp', '.restyled.saving', '.restyled.saving', '.',
      '.lin.safetensors.tmp', '.', '.lin-async.safetensors.tmp', '.',
      '.lin.saving/.model.safetensors.tmp', '.lin.saving', '.lin.saving/.config.json.tmp', '.lin.saving', '.lin.saving', '.',
      '.lin.gguf.tmp', '.', '.lin.onnx.tmp', '.',
    ])
  })

  it('durable must be a boolean', async () => {
    const dir = tempDir()
    const t = { w: { shape: [1], data: new Float32Array([1]) } }
    expect(() => saveFile(join(dir, 'a.safetensors'), t, { durable: 'yes' as never })).toThrow(expect.objectContaining({ code: 'ERR_INVALID_ARGUMENT' }))
    saveFile(join(dir, 'a.safetensors'), t)
    await expect(convert(join(dir, 'a.safetensors'), join(dir, 'a.gguf'), { to: 'gguf', durable: 1 as never })).rejects.toMatchObject({ code: 'ERR_INVALID_ARGUMENT' })
    const lin = new LinearRegression().fit([[1], [2]], [1, 2])
    expect(() => lin.toOnnx(join(dir, 'a.onnx'), { durable: 'yes' as never })).toThrow(expect.objectContaining({ code: 'ERR_INVALID_ARGUMENT' }))
    expect(() => lin.toGguf(join(dir, 'a.gguf'), { durable: 0 as never })).toThrow(expect.objectContaining({ code: 'ERR_INVALID_ARGUMENT' }))
    await expect(lin.save(join(dir, 'lin'), { durable: 'no' as never })).rejects.toMatchObject({ code: 'ERR_INVALID_ARGUMENT' })
    expect(readdirSync(dir)).toEqual(['a.safetensors'])
  })
})

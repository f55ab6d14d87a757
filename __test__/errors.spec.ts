import { describe, expect, it } from 'vitest'
import { spawnSync } from 'node:child_process'
import { existsSync, mkdirSync, readFileSync, readdirSync, statSync, truncateSync, writeFileSync } from 'node:fs'
import { totalmem } from 'node:os'
import { join } from 'node:path'
import * as lib from '../index.js'
import { GgufFile, LinearRegression, LogisticRegression, Model, SafeTensorsFile, loadFileAsync, serialize } from '../index.js'
import { rawFile, tempDir } from './helpers'

const ok = { a: { dtype: 'F32', shape: [2], data_offsets: [0, 8] } }
const MKFIFO = ['/usr/bin/mkfifo', '/bin/mkfifo'].find((p) => existsSync(p))
const j = (v: unknown) => JSON.stringify(v)

/** One crafted file per rule of the reference implementation, with the code it must give. */
const cases: Array<[string, Buffer, string, string | undefined]> = [
  ['fewer than 8 bytes', Buffer.from([1, 2, 3]), 'ERR_HEADER_TOO_SMALL', undefined],
  ['empty file', Buffer.alloc(0), 'ERR_HEADER_TOO_SMALL', undefined],
  ['header length 2^64-1', Buffer.from([255, 255, 255, 255, 255, 255, 255, 255, 123, 125]), 'ERR_HEADER_TOO_LARGE', undefined],
  ['header length 100,000,001', (() => { const b = Buffer.from('........{}'); b.writeBigUInt64LE(100_000_001n); return b })(), 'ERR_HEADER_TOO_LARGE', undefined],
  ['header runs past the file', (() => { const b = Buffer.from('........{}'); b.writeBigUInt64LE(64n); return b })(), 'ERR_INVALID_HEADER', undefined],
  ['header not UTF-8', rawFile('{"\xff":1}'.replace('\xff', '\u00ff')).fill(0xff, 10, 11), 'ERR_INVALID_HEADER', undefined],
  ['header not JSON', rawFile('hello'), 'ERR_INVALID_HEADER', undefined],
  ['header with a NUL', rawFile(j(ok) + '\0', 8), 'ERR_INVALID_HEADER', undefined],
  ['metadata value not a string', rawFile(j({ __metadata__: { a: 1 } })), 'ERR_INVALID_HEADER', undefined],
  ['unknown dtype', rawFile(j({ a: { dtype: 'F128', shape: [1], data_offsets: [0, 16] } }), 16), 'ERR_INVALID_HEADER', 'a'],
  ['duplicate names', rawFile('{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"a":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}}', 2), 'ERR_INVALID_HEADER', 'a'],
  ['offsets not from 0', rawFile(j({ a: { dtype: 'U8', shape: [1], data_offsets: [1, 2] } }), 2), 'ERR_INVALID_OFFSETS', 'a'],
  ['end before start', rawFile(j({ a: { dtype: 'U8', shape: [0], data_offsets: [0, 0] }, b: { dtype: 'U8', shape: [0], data_offsets: [2, 0] } }), 2), 'ERR_INVALID_OFFSETS', 'b'],
  ['gap between tensors', rawFile(j({ a: { dtype: 'U8', shape: [1], data_offsets: [0, 1] }, b: { dtype: 'U8', shape: [1], data_offsets: [2, 3] } }), 3), 'ERR_INVALID_OFFSETS', 'b'],
  ['shape disagrees with bytes', rawFile(j({ a: { dtype: 'F32', shape: [3], data_offsets: [0, 8] } }), 8), 'ERR_SIZE_MISMATCH', 'a'],
  ['shape product overflows', rawFile('{"a":{"dtype":"F32","shape":[4294967296,4294967296,16],"data_offsets":[0,8]}}', 8), 'ERR_SIZE_MISMATCH', 'a'],
  ['truncated data', rawFile(j(ok), 7), 'ERR_INCOMPLETE_FILE', undefined],
  ['trailing bytes', rawFile(j(ok), 9), 'ERR_INCOMPLETE_FILE', undefined],
]

describe.each(cases)('%s', (_what, bytes, code, tensor) => {
  const dir = tempDir()
  const path = join(dir, 'bad.safetensors')
  writeFileSync(path, bytes)

  it(`open throws ${code} naming the file`, () => {
    for (const backend of ['mmap', 'read'] as const) {
      let err: any
      try {
        SafeTensorsFile.open(path, { backend })
      } catch (e) {
        err = e
      }
      expect(err).toBeInstanceOf(Error)
      expect(err.code).toBe(code)
      expect(err.message).toContain(path)
      expect(err.path).toBe(path)
      if (tensor) {
        expect(err.tensor).toBe(tensor)
        expect(err.message).toContain(`'${tensor}'`)
      }
    }
  })

  it(`openAsync and loadFileAsync reject with ${code}`, async () => {
    await expect(SafeTensorsFile.openAsync(path)).rejects.toMatchObject({ code, path })
    await expect(loadFileAsync(path)).rejects.toMatchObject({ code })
  })

  it(`fromBytes throws ${code}`, () => {
    expect(() => SafeTensorsFile.fromBytes(bytes)).toThrow(expect.objectContaining({ code }))
  })
})

describe('other failures', () => {
  it('a missing file is ERR_NOT_FOUND; a directory is ERR_INVALID_ARGUMENT', async () => {
    const dir = tempDir()
    expect(() => SafeTensorsFile.open(join(dir, 'missing.safetensors'))).toThrow(expect.objectContaining({ code: 'ERR_NOT_FOUND' }))
    await expect(SafeTensorsFile.openAsync(join(dir, 'missing.safetensors'), { backend: 'read' })).rejects.toMatchObject({ code: 'ERR_NOT_FOUND' })
    expect(() => SafeTensorsFile.open(dir)).toThrow(expect.objectContaining({ code: 'ERR_INVALID_ARGUMENT' }))
  })

  // Opening a FIFO for reading blocks until a writer comes: a FIFO named like a model file
  // (or /dev/stdin of a process whose input is a pipe) would hang the event loop or a
  // libuv thread forever. Every reader refuses non-regular files instead, at once.
  it.skipIf(!MKFIFO)('a FIFO or a device is ERR_INVALID_ARGUMENT from every reader, without blocking', async () => {
    const dir = tempDir()
    const fifo = join(dir, 'weights.safetensors')
    expect(spawnSync(MKFIFO!, [fifo]).status).toBe(0)
    const model = join(dir, 'model')
    mkdirSync(model)
    expect(spawnSync(MKFIFO!, [join(model, 'config.json')]).status).toBe(0)
    const refused = { code: 'ERR_INVALID_ARGUMENT', message: expect.stringContaining('is not a regular file') }
    for (const path of [fifo, '/dev/null']) {
      expect(() => SafeTensorsFile.open(path), path).toThrow(expect.objectContaining(refused))
      expect(() => lib.loadFile(path), path).toThrow(expect.objectContaining(refused))
      expect(() => LinearRegression.loadSafetensors(path), path).toThrow(expect.objectContaining(refused))
      await expect(SafeTensorsFile.openAsync(path, { backend: 'read' })).rejects.toMatchObject(refused)
      await expect(lib.inspect(path)).rejects.toMatchObject(refused)
      await expect(lib.convert(path, join(dir, 'out.gguf'), { to: 'gguf' })).rejects.toMatchObject(refused)
      expect((await lib.validate(path)).errors).toEqual([expect.objectContaining(refused)])
    }
    await expect(Model.loadPretrained(model)).rejects.toMatchObject({ ...refused, path: join(model, 'config.json') })
  }, 10_000)

  // backend 'read' (the README's advice for network file systems) holds a GGUF, PyTorch or
  // NumPy file whole in memory, and reads a SafeTensors tensor whole: one larger than memory
  // is ERR_IO, not an abort of the process. Sparse files take no disk; a child process runs
  // them, since an abort would take the test runner down with it.
  it('backend read of a file or tensor larger than memory is ERR_IO, not an abort', () => {
    const dir = tempDir()
    const size = Math.max(2 ** 40, 2 * totalmem())
    const sparse = (name: string, head: Buffer, at = 0) => {
      const path = join(dir, name)
      writeFileSync(path, head)
      truncateSync(path, size + at)
      return path
    }
    const gguf = Buffer.alloc(24)
    gguf.write('GGUF', 'latin1')
    gguf.writeUInt32LE(3, 4)
    const npy = `{'descr': '|u1', 'fortran_order': False, 'shape': (${size},), }`.padEnd(117) + '\n'
    // A legacy torch.save file starts with pickle protocol 2 and torch's magic number.
    const pickle = Buffer.from([0x80, 0x02, 0x8a, 0x0a, 0x6c, 0xfc, 0x9c, 0x46, 0xf9, 0x20, 0x6a, 0xa8, 0x50, 0x19])
    const header = JSON.stringify({ t: { dtype: 'U8', shape: [size], data_offsets: [0, size] } })
    const files = {
      gguf: sparse('big.gguf', gguf),
      numpy: sparse('big.npy', Buffer.concat([Buffer.from('\x93NUMPY\x01\x00\x75\x00', 'latin1'), Buffer.from(npy)])),
      pytorch: sparse('pytorch_model.bin', pickle),
      safetensors: sparse('big.safetensors', rawFile(header), 8 + header.length),
    }
    const script = `
      const lib = require(${j(join(__dirname, '..', 'index.js'))})
      const files = ${j(files)}
      const calls = {
        gguf: () => lib.GgufFile.open(files.gguf, { backend: 'read' }),
        ggufWeights: () => lib.openWeightsSync(files.gguf, { backend: 'read' }),
        numpy: () => lib.openWeightsSync(files.numpy, { backend: 'read' }),
        pytorch: () => lib.openWeightsSync(files.pytorch, { backend: 'read' }),
        safetensors: () => lib.SafeTensorsFile.open(files.safetensors, { backend: 'read' }).getTensor('t', { as: 'raw' }),
      }
      const out = {}
      for (const [name, call] of Object.entries(calls)) {
        try { call(); out[name] = 'read' } catch (e) { out[name] = { code: e.code, message: e.message } }
      }
      lib.GgufFile.openAsync(files.gguf, { backend: 'read' }).then(() => 'read', (e) => ({ code: e.code, message: e.message })).then((a) => {
        out.async = a
        console.log(JSON.stringify(out))
      })`
    const r = spawnSync(process.execPath, ['-e', script], { encoding: 'utf8', timeout: 120_000 })
    expect(r.signal, r.stderr).toBeNull()
    expect(r.status, r.stderr).toBe(0)
    const out = JSON.parse(r.stdout)
    for (const name of ['gguf', 'ggufWeights', 'numpy', 'pytorch', 'safetensors', 'async']) {
      expect(out[name], name).toEqual({ code: 'ERR_IO', message: expect.stringContaining(`cannot hold ${size} bytes in memory`) })
    }
    expect(out.gguf.message).toContain("backend 'mmap' maps it instead")
  }, 150_000)

  // A writer renames a new file into place, which would replace whatever the path names:
  // as root, saveFile('/dev/null', …) would swap the device for a regular file.
  it.skipIf(!MKFIFO)('writers refuse to replace a directory, a FIFO or a device; a model directory cannot go where a file is', async () => {
    const dir = tempDir()
    const fifo = join(dir, 'out.safetensors')
    expect(spawnSync(MKFIFO!, [fifo]).status).toBe(0)
    const t = { w: { shape: [1], data: new Float32Array([1]) } }
    const lin = new LinearRegression().fit([[1], [2]], [1, 2])
    for (const path of [fifo, dir, '/dev/null']) {
      expect(() => lib.saveFile(path, t), path).toThrow(expect.objectContaining({ code: 'ERR_INVALID_ARGUMENT', path }))
      await expect(lib.saveFileAsync(path, t, { durable: true })).rejects.toMatchObject({ code: 'ERR_INVALID_ARGUMENT', path })
      expect(() => lin.toOnnx(path), path).toThrow(expect.objectContaining({ code: 'ERR_INVALID_ARGUMENT' }))
    }
    expect(statSync(fifo).isFIFO()).toBe(true)
    expect(statSync('/dev/null').isCharacterDevice()).toBe(true)
    const file = join(dir, 'plain')
    writeFileSync(file, 'x')
    await expect(lin.save(file)).rejects.toMatchObject({ code: 'ERR_INVALID_ARGUMENT', path: file })
    expect(readdirSync(dir).sort()).toEqual(['out.safetensors', 'plain'])
  })

  it('a path with a NUL byte or a name too long for the file system is ERR_INVALID_ARGUMENT', async () => {
    const dir = tempDir()
    const t = { w: { shape: [1], data: new Float32Array([1]) } }
    for (const path of [join(dir, 'a\0b.safetensors'), join(dir, `${'n'.repeat(300)}.safetensors`)]) {
      const bad = expect.objectContaining({ code: 'ERR_INVALID_ARGUMENT' })
      expect(() => SafeTensorsFile.open(path)).toThrow(bad)
      expect(() => lib.saveFile(path, t)).toThrow(bad)
      await expect(lib.convert(path, join(dir, 'o.gguf'), { to: 'gguf' })).rejects.toMatchObject({ code: 'ERR_INVALID_ARGUMENT' })
      await expect(Model.loadPretrained(path)).rejects.toMatchObject({ code: 'ERR_INVALID_ARGUMENT' })
    }
    expect(readdirSync(dir)).toEqual([])
  })

  it('an unreadable file is ERR_IO with the OS text', () => {
    if (process.getuid?.() === 0) {
      // root reads everything; use a path whose parent is a file instead (ENOTDIR).
      const dir = tempDir()
      const file = join(dir, 'plain')
      writeFileSync(file, 'x')
      expect(() => SafeTensorsFile.open(join(file, 'child.safetensors'))).toThrow(
        expect.objectContaining({ code: 'ERR_IO', message: expect.stringContaining('Not a directory') }),
      )
    }
  })

  it('a missing tensor is ERR_NOT_FOUND, sync and async', async () => {
    const f = SafeTensorsFile.fromBytes(rawFile(j(ok), 8))
    expect(() => f.getTensor('zz')).toThrow(expect.objectContaining({ code: 'ERR_NOT_FOUND', tensor: 'zz' }))
    expect(() => f.info('zz')).toThrow(expect.objectContaining({ code: 'ERR_NOT_FOUND' }))
    await expect(f.getTensorAsync('zz')).rejects.toMatchObject({ code: 'ERR_NOT_FOUND', tensor: 'zz' })
  })

  it('bad options are ERR_INVALID_ARGUMENT', async () => {
    const dir = tempDir()
    const p = join(dir, 'ok.safetensors')
    writeFileSync(p, rawFile(j(ok), 8))
    expect(() => SafeTensorsFile.open(p, { backend: 'ftp' as any })).toThrow(expect.objectContaining({ code: 'ERR_INVALID_ARGUMENT' }))
    await expect(SafeTensorsFile.open(p).getTensorAsync('a', { as: 'F16' as any })).rejects.toMatchObject({ code: 'ERR_INVALID_ARGUMENT' })
  })
})

/**
 * Every call of the public API (index.d.ts), given a first argument
 * of the wrong type (a Symbol, which converts to nothing): synchronous calls throw
 * ERR_INVALID_ARGUMENT; calls that return a Promise return one that rejects with it, never
 * throwing — as an async function would.
 */
describe('arguments of the wrong type', () => {
  interface Decl {
    owner: string // 'function', or a class name
    isStatic: boolean
    name: string
    params: number
    promise: boolean
  }

  /** Split a parameter list on its top-level commas. */
  function countParams(list: string): number {
    if (!list.trim()) return 0
    let depth = 0
    let n = 1
    for (const c of list) {
      if ('<[({'.includes(c)) depth++
      else if ('>])}'.includes(c)) depth--
      else if (c === ',' && depth === 0) n++
    }
    return n
  }

  function declarations(): Decl[] {
    const out: Decl[] = []
    let owner = ''
    for (const line of readFileSync(join(__dirname, '..', 'index.d.ts'), 'utf8').split('\n')) {
      const cls = /^export declare class (\w+)/.exec(line)
      if (cls) owner = cls[1]
      else if (line === '}') owner = ''
      const fn = /^export declare function (\w+)(?:<[^(]*>)?\((.*)\): (.+)$/.exec(line)
      if (fn) out.push({ owner: 'function', isStatic: false, name: fn[1], params: countParams(fn[2]), promise: fn[3].startsWith('Promise<') })
      const member = /^ {2}(static )?(\w+)(?:<[^(]*>)?\((.*)\): (.+)$/.exec(line)
      const seen = out.some((d) => d.owner === owner && member && d.name === member[2] && d.isStatic === !!member[1]) // overloads
      if (owner && member && member[2] !== 'constructor' && !seen) {
        out.push({ owner, isStatic: !!member[1], name: member[2], params: countParams(member[3]), promise: member[4].startsWith('Promise<') })
      }
    }
    return out
  }

  it('every call with parameters: sync ones throw ERR_INVALID_ARGUMENT, Promise ones reject with it', async () => {
    const dir = join(tempDir(), 'linear')
    const lin = new LinearRegression().fit([[1], [2], [3]], [1, 2, 3])
    const log = new LogisticRegression().fit([[0], [1], [2], [3]], [0, 0, 1, 1])
    await lin.save(dir) // a Model that can predict, so that predict reaches its argument
    const gguf = join(tempDir(), 'linear.gguf')
    lin.toGguf(gguf)
    const receivers: Record<string, any> = {
      GgufFile: GgufFile.open(gguf),
      function: lib,
      SafeTensorsFile: SafeTensorsFile.fromBytes(serialize({ w: { shape: [2], data: new Float32Array([1, 2]) } })),
      Model: Model.loadPretrainedSync(dir),
      LinearRegression: lin,
      LogisticRegression: log,
    }
    const decls = declarations().filter((d) => d.params > 0)
    expect(decls.length).toBeGreaterThanOrEqual(50)
    const wrong: string[] = []
    for (const d of decls) {
      const target = d.isStatic ? (lib as any)[d.owner] : receivers[d.owner]
      const label = `${d.owner}${d.isStatic ? '.' : '#'}${d.name}`
      expect(typeof target?.[d.name], label).toBe('function')
      const call = () => target[d.name](Symbol('bad'))
      let result: unknown
      try {
        result = call()
      } catch (e: any) {
        if (d.promise || e?.code !== 'ERR_INVALID_ARGUMENT') wrong.push(`${label} threw ${e?.code ?? e}`)
        continue
      }
      if (!d.promise) {
        wrong.push(`${label} returned`)
        continue
      }
      if (!(result instanceof Promise)) {
        wrong.push(`${label} returned no Promise`)
        continue
      }
      const e: any = await result.then(() => null, (err) => err)
      if (e?.code !== 'ERR_INVALID_ARGUMENT') wrong.push(`${label} ${e ? `rejected with ${e.code ?? e}` : 'resolved'}`)
    }
    expect(wrong).toEqual([])
  })

  it('options that are not objects are ERR_INVALID_ARGUMENT, constructors included (not silently ignored)', async () => {
    const dir = tempDir()
    const path = join(dir, 'a.safetensors')
    const t = { w: { shape: [1], data: new Float32Array([1]) } }
    lib.saveFile(path, t)
    const f = SafeTensorsFile.open(path)
    const bad: any = 5
    const sync: Array<[string, () => unknown]> = [
      ['new LinearRegression', () => new LinearRegression(bad)],
      ['new LogisticRegression', () => new LogisticRegression('x' as any)],
      ['SafeTensorsFile.open', () => SafeTensorsFile.open(path, bad)],
      ['serialize', () => serialize(t, bad)],
      ['saveFile', () => lib.saveFile(join(dir, 'b.safetensors'), t, bad)],
      ['loadFile', () => lib.loadFile(path, bad)],
      ['getTensor', () => f.getTensor('w', bad)],
      ['tensors', () => f.tensors(bad)],
    ]
    for (const [what, call] of sync) {
      expect(call, what).toThrow(expect.objectContaining({ code: 'ERR_INVALID_ARGUMENT', message: expect.not.stringContaining('Option<') }))
    }
    const async: Array<[string, () => Promise<unknown>]> = [
      ['Model.loadPretrained', () => Model.loadPretrained(dir, bad)],
      ['convert', () => lib.convert(path, join(dir, 'a.gguf'), bad)],
      ['saveFileAsync', () => lib.saveFileAsync(join(dir, 'c.safetensors'), t, bad)],
      ['getTensorAsync', () => f.getTensorAsync('w', bad)],
    ]
    for (const [what, call] of async) await expect(call(), what).rejects.toMatchObject({ code: 'ERR_INVALID_ARGUMENT' })
    // null and undefined mean "no options".
    expect(new LinearRegression(null as any).fitIntercept).toBe(true)
    expect(Array.from(SafeTensorsFile.open(path, undefined).getTensor('w', null).data as Float32Array)).toEqual([1])
    expect(readdirSync(dir)).toEqual(['a.safetensors'])
  })

  it('convert without options rejects with ERR_INVALID_ARGUMENT naming options.to', async () => {
    await expect((lib.convert as any)('a.safetensors', 'b.gguf')).rejects.toMatchObject({ code: 'ERR_INVALID_ARGUMENT', message: expect.stringContaining('options.to') })
  })
})

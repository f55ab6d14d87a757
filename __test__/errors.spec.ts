import { describe, expect, it } from 'vitest'
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { SafeTensorsFile, loadFileAsync } from '../index.js'
import { rawFile, tempDir } from './helpers'

const ok = { a: { dtype: 'F32', shape: [2], data_offsets: [0, 8] } }
const j = (v: unknown) => JSON.stringify(v)

/** One crafted file per rule of the reference implementation, with the code it must give. */
const cases: Array<[string, Buffer, string, string | undefined]> = [
  ['fewer than 8 bytes', Buffer.from([1, 2, 3]), 'ERR_HEADER_TOO_SMALL', undefined],
  ['empty file', Buffer.alloc(0), 'ERR_HEADER_TOO_SMALL', undefined],
  ['header length 2^64-1', Buffer.from([255, 255, 255, 255, 255, 255, 255, 255, 123, 125]), 'ERR_HEADER_TOO_LARGE', undefined],
  ['header length 100,000,001', (() => { const b = Buffer.alloc(10); b.writeBigUInt64LE(100_000_001n); return b })(), 'ERR_HEADER_TOO_LARGE', undefined],
  ['header runs past the file', (() => { const b = Buffer.alloc(10); b.writeBigUInt64LE(64n); return b })(), 'ERR_INVALID_HEADER', undefined],
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

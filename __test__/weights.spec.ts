import { beforeAll, describe, expect, it } from 'vitest'
import { spawnSync } from 'node:child_process'
import { copyFileSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import { join, resolve } from 'node:path'
import { GgufFile, Model, SafeTensorsFile, convert, inspect, openWeights, openWeightsSync, saveFile, validate, type WeightsFile } from '../index.js'
import { PYTHON, fixture, tempDir } from './helpers'

/**
 * `openWeights` reads every format through one interface, each file written by that
 * format's own tool (scripts/weights_peers.py: gguf-py's GGUFWriter and quantizers,
 * safetensors' reference writer) and read back to the exact bit: stored bytes with
 * `as: 'raw'`, served bytes (dequantized by gguf-py for block types) natively.
 */

interface PeerTensor {
  shape: number[]
  stored_hex: string
  served_hex: string
  file?: string
}
type PeerReport = Record<string, Record<string, PeerTensor>>

const dir = tempDir('weights-')
let peers: PeerReport

beforeAll(() => {
  const run = spawnSync(PYTHON, [resolve(__dirname, '../scripts/weights_peers.py'), dir], { encoding: 'utf8', maxBuffer: 64 << 20 })
  expect(run.status, run.stderr).toBe(0)
  peers = JSON.parse(run.stdout)
})

const hex = (a: ArrayBufferView) => Buffer.from(a.buffer, a.byteOffset, a.byteLength).toString('hex')

/** Every tensor of `file` equals the peer's, stored and served, through every accessor. */
async function expectPeerTensors(file: WeightsFile, expected: Record<string, PeerTensor>) {
  expect([...file.tensorNames].sort()).toEqual(Object.keys(expected).sort())
  const all = file.tensors()
  const allAsync = await file.tensorsAsync()
  for (const [name, t] of Object.entries(expected)) {
    expect(file.has(name)).toBe(true)
    const info = file.info(name)
    expect(info.shape, name).toEqual(t.shape)
    expect(info.byteLength, name).toBe(t.stored_hex.length / 2)
    expect(hex(file.getTensor(name, { as: 'raw' }).data), name).toBe(t.stored_hex)
    const served = file.getTensor(name)
    // Natively, F16 upcasts to F32 (as SafeTensorsFile does); other types are served as is.
    if (info.dtype !== 'F16') expect(hex(served.data), name).toBe(t.served_hex)
    expect(hex((await file.getTensorAsync(name, { as: 'raw' })).data), name).toBe(t.stored_hex)
    expect(hex(all[name].data)).toBe(hex(served.data))
    expect(hex(allAsync[name].data)).toBe(hex(served.data))
  }
}

describe('openWeights: every format through one interface', () => {
  it('GGUF written by gguf-py: plain types as stored (F32 a view of the mapping), Q8_0/Q4_0 dequantized exactly as gguf-py does', async () => {
    const path = join(dir, 'peer.gguf')
    const expected = peers['peer.gguf']
    for (const file of [await openWeights(path), openWeightsSync(path), openWeightsSync(path, { backend: 'read' })]) {
      expect(file.format).toBe('gguf')
      expect(file.path).toBe(path)
      expect(file.metadata).toMatchObject({ 'general.architecture': 'peertest', 'peer.note': 'written by gguf-py', 'peer.count': 7 })
      await expectPeerTensors(file, expected)
      expect(file.info('q8_0')).toMatchObject({ dtype: 'F32', storedType: 'Q8_0', shape: [4, 64], numel: 256, byteLength: 8 * 34 })
      expect(file.info('f16')).toMatchObject({ dtype: 'F16', storedType: 'F16' })
      expect(file.info('i32')).toMatchObject({ dtype: 'I32', storedType: 'I32', shape: [2, 2] })
      expect(file.numParameters).toBe(64 + 64 + 10 + 6 + 4 + 3 + 256 + 256)
      // F16 is served natively as F32 (exact upcast), like a SafeTensors F16 tensor.
      const f16 = new Uint16Array(Uint8Array.from(Buffer.from(expected.f16.stored_hex, 'hex')).buffer)
      const upcast = file.getTensor('f16').data as Float32Array
      expect(upcast).toBeInstanceOf(Float32Array)
      expect(upcast.length).toBe(f16.length)
      expect(Array.from(file.getTensor('f16', { as: 'F32' }).data as Float32Array)).toEqual(Array.from(upcast))
    }
    // Zero-copy (copy: false; the default is a copy): two reads of an F32 tensor share memory
    // (a view of the private mapping).
    const file = openWeightsSync(path)
    const a = file.getTensor('f32', { copy: false }).data as Float32Array
    const b = file.getTensor('f32', { copy: false }).data as Float32Array
    a[0] = 1234.5
    expect(b[0]).toBe(1234.5)
    expect(hex(openWeightsSync(path).getTensor('f32', { as: 'raw' }).data)).toBe(expected.f32.stored_hex)
    expect(file.info('f32').dataOffsets).toEqual([expect.any(Number), expect.any(Number)])
  })

  it('SafeTensors (the reference writer): as SafeTensorsFile reads it, metadata included', async () => {
    const path = join(dir, 'single.safetensors')
    const file = await openWeights(path)
    expect(file.format).toBe('safetensors')
    expect(file.metadata).toEqual({ format: 'np', who: 'peer' })
    await expectPeerTensors(file, peers['single.safetensors'])
    const reference = SafeTensorsFile.open(path)
    expect(file.info('a.bias')).toEqual({ ...reference.info('a.bias'), storedType: 'F16' })
    expect(Array.from(file.getTensor('a.bias').data as Float32Array)).toEqual(Array.from(reference.getTensor('a.bias').data as Float32Array))
    expect(file.config).toBeNull()
  })

  it('a sharded index and its model directory: every shard, tensors from their own shard', async () => {
    const sharded = join(dir, 'sharded')
    const index = await openWeights(join(sharded, 'model.safetensors.index.json'))
    expect(index.format).toBe('sharded-safetensors')
    expect(index.metadata).toEqual({ format: 'np' })
    await expectPeerTensors(index, peers.sharded)
    const model = await openWeights(sharded)
    expect(model.format).toBe('sharded-safetensors')
    expect(model.path).toBe(sharded)
    // config.json's keys are own properties, __proto__ included (as JSON.parse makes them).
    const config = model.config as Record<string, unknown>
    expect(Object.getPrototypeOf(config)).toBe(Object.prototype)
    expect(Object.keys(config).sort()).toEqual(['__proto__', 'model_type'])
    expect(config.__proto__).toEqual({ polluted: true })
    expect((config as any).polluted).toBeUndefined()
    await expectPeerTensors(model, peers.sharded)
    const loaded = await Model.loadPretrained(sharded)
    expect(loaded.tensorNames).toEqual(model.tensorNames)
    expect(loaded.info('l1.w')).toEqual(model.info('l1.w'))
  })

  it('weights.mlx (MLX-Node JSON) decoded once, served as views', async () => {
    const path = join(dir, 'w.mlx')
    writeFileSync(path, JSON.stringify({ version: '1.0', metadata: { format: 'mlx' }, weights: { w: { shape: [2], dtype: 'float32', data: [1.5, -2] }, h: { shape: [1], dtype: 'float16', data: [0.1] } } }))
    const file = await openWeights(path)
    expect(file.format).toBe('mlx')
    expect(file.metadata).toEqual({ format: 'mlx' })
    expect(Array.from(file.getTensor('w').data as Float32Array)).toEqual([1.5, -2])
    expect(file.getTensor('h').data[0]).toBe(0.0999755859375) // float16 nearest to 0.1
    expect(file.info('h')).toMatchObject({ dtype: 'F16', storedType: 'F16', byteLength: 2 })
    expect(file.info('h').dataOffsets).toBeUndefined()
    const a = file.getTensor('w', { copy: false }).data as Float32Array
    a[0] = 7
    expect(file.getTensor('w', { copy: false }).data[0]).toBe(7)
    expect(file.getTensor('w').data[0]).toBe(7) // a copy of the (written) decoded bytes
    const c = file.getTensor('w').data as Float32Array
    c[0] = 8
    expect(file.getTensor('w').data[0]).toBe(7)
  })

  it('options.format forces a format; a wrong one names what the file is', async () => {
    const gg = join(dir, 'peer.gguf')
    expect((await openWeights(gg, { format: 'gguf' })).format).toBe('gguf')
    await expect(openWeights(gg, { format: 'safetensors' })).rejects.toMatchObject({
      code: 'ERR_UNKNOWN_FORMAT',
      path: gg,
      message: expect.stringContaining('this is a GGUF file (gguf), not a SafeTensors file'),
    })
    expect(() => openWeightsSync(gg, { format: 'onnx' as any })).toThrow(expect.objectContaining({ code: 'ERR_INVALID_ARGUMENT', message: expect.stringContaining("options.format must be one of 'safetensors'") }))
    expect(() => openWeightsSync(gg, { backend: 'ftp' as any })).toThrow(expect.objectContaining({ code: 'ERR_INVALID_ARGUMENT' }))
    await expect(openWeights(join(dir, 'missing.gguf'))).rejects.toMatchObject({ code: 'ERR_NOT_FOUND' })
  })
})

/** The fields of `TensorInfo`, in the order every reader gives them. */
const TENSOR_INFO_KEYS = ['name', 'dtype', 'storedType', 'shape', 'byteLength', 'numel', 'dataOffsets']

describe('info(): one TensorInfo whichever reader opened the file', () => {
  it('SafeTensorsFile, WeightsFile (file and directory) and Model give the same keys and values; GgufFile the same fields first, then its own', async () => {
    const model = join(dir, 'info-model')
    mkdirSync(model)
    const file = join(model, 'model.safetensors')
    saveFile(file, {
      'a.weight': { dtype: 'BF16', shape: [2, 3], data: Float32Array.from({ length: 6 }, (_, i) => i / 2) },
      'b.bias': { dtype: 'F32', shape: [3], data: new Float32Array([1, 2, 3]) },
      ids: { dtype: 'I64', shape: [4], data: new BigInt64Array([1n, 2n, 3n, 4n]) as any },
    })
    writeFileSync(join(model, 'config.json'), '{"model_type":"x"}')
    const reference = SafeTensorsFile.open(file)
    const readers = [openWeightsSync(file), await openWeights(model), Model.loadPretrainedSync(model), await Model.loadPretrained(model)]
    for (const name of reference.tensorNames) {
      const want = reference.info(name)
      expect(Object.keys(want), name).toEqual(TENSOR_INFO_KEYS)
      expect(want.storedType, name).toBe(want.dtype)
      for (const r of readers) {
        expect(Object.keys(r.info(name)), name).toEqual(TENSOR_INFO_KEYS)
        expect(r.info(name), name).toEqual(want)
      }
    }
    const a = reference.info('a.weight')
    expect(a).toEqual({ name: 'a.weight', dtype: 'BF16', storedType: 'BF16', shape: [2, 3], byteLength: 12, numel: 6, dataOffsets: [a.dataOffsets[0], a.dataOffsets[0] + 12] })

    // The same tensors in GGUF (types kept): the same values but where its data section puts them.
    const gguf = join(dir, 'info.gguf')
    await convert(file, gguf, { to: 'gguf' })
    const g = GgufFile.open(gguf)
    for (const r of [g, openWeightsSync(gguf), await openWeights(gguf)]) {
      for (const name of reference.tensorNames) {
        const info = r.info(name) as ReturnType<GgufFile['info']>
        expect(Object.keys(info), name).toEqual([...TENSOR_INFO_KEYS, 'ggmlType', 'offset'])
        expect({ ...info, dataOffsets: undefined, ggmlType: undefined, offset: undefined }, name).toEqual({ ...reference.info(name), dataOffsets: undefined })
        expect(info.ggmlType, name).toBe(info.storedType)
        expect(info.offset, name).toBe(g.dataOffset + info.dataOffsets[0])
        expect(info.dataOffsets[1] - info.dataOffsets[0], name).toBe(info.byteLength)
      }
    }
  })
})

describe('detection by content: ERR_UNKNOWN_FORMAT names what an input looks like', () => {
  /** Files of other kinds, written by their own tools. */
  function foreignFiles(): Record<string, string> {
    const script = `
import sys, pickle, zipfile, gzip, json, onnx
from onnx import helper, TensorProto
out = sys.argv[1]
g = helper.make_graph([helper.make_node('Relu', ['x'], ['y'])], 'g',
    [helper.make_tensor_value_info('x', TensorProto.FLOAT, [1])], [helper.make_tensor_value_info('y', TensorProto.FLOAT, [1])])
onnx.save(helper.make_model(g, producer_name='weights.spec'), out + '/model.onnx')
pickle.dump({'w': [1.0, 2.0]}, open(out + '/state.pkl', 'wb'), protocol=4)
with zipfile.ZipFile(out + '/archive.zip', 'w') as z: z.writestr('readme.txt', 'hi')
with gzip.open(out + '/w.gz', 'wb') as f: f.write(b'x' * 100)
json.dump({'model_type': 'llama'}, open(out + '/config.json', 'w'))
import zlib, struct, random
def chunk(kind, data): return struct.pack('>I', len(data)) + kind + data + struct.pack('>I', zlib.crc32(kind + data))
open(out + '/picture.png', 'wb').write(b'\\x89PNG\\r\\n\\x1a\\n' + chunk(b'IHDR', struct.pack('>IIBBBBB', 1, 1, 8, 0, 0, 0, 0)) + chunk(b'IDAT', zlib.compress(b'\\0\\0')) + chunk(b'IEND', b''))
open(out + '/notes.txt', 'w').write('Weights are in the other folder.\\n' * 10)
random.seed(7)
noise = bytearray(random.randbytes(4096))
noise[8] = 0x78
open(out + '/noise.bin', 'wb').write(bytes(noise))
`
    const run = spawnSync(PYTHON, ['-c', script, dir], { encoding: 'utf8' })
    expect(run.status, run.stderr).toBe(0)
    return {
      'picture.png': 'a PNG image',
      'notes.txt': 'a text file',
      'noise.bin': 'binary data of no known kind',
      'model.onnx': 'an ONNX model',
      'state.pkl': 'a Python pickle (a PyTorch checkpoint?)',
      'archive.zip': 'a zip archive (PyTorch or NumPy .npz?)',
      'w.gz': 'a gzip-compressed file',
      'config.json': 'a JSON document (not a sharded index or weights.mlx)',
    }
  }

  it('files of other kinds: every reader says what they are, never a header-length error', async () => {
    for (const [name, what] of Object.entries(foreignFiles())) {
      const path = join(dir, name)
      const expected = { code: 'ERR_UNKNOWN_FORMAT', path, message: `${path}: this is ${what}, not a weights format this package reads (it reads safetensors, gguf, numpy, pytorch, sharded-safetensors, mlx)` }
      await expect(openWeights(path), name).rejects.toMatchObject(expected)
      expect(() => openWeightsSync(path), name).toThrow(expect.objectContaining(expected))
      await expect(inspect(path), name).rejects.toMatchObject(expected)
      await expect(convert(path, join(dir, 'out.gguf'), { to: 'gguf' }), name).rejects.toMatchObject(expected)
      expect(await validate(path), name).toEqual({ path, format: null, ok: false, errors: [{ code: 'ERR_UNKNOWN_FORMAT', message: expected.message }], omittedErrors: 0 })
      expect(() => SafeTensorsFile.open(path), name).toThrow(expect.objectContaining({ code: 'ERR_UNKNOWN_FORMAT', message: `${path}: this is ${what}, not a SafeTensors file` }))
    }
  })

  it('PyTorch and NumPy files (torch.save, numpy.save) are recognised as such; not readable yet', async () => {
    const index = JSON.parse(readFileSync(fixture('pytorch', 'expected', 'index.json'), 'utf8'))
    const files: string[] = (Array.isArray(index) ? index : index.files ?? Object.keys(index)).map((f: any) => (typeof f === 'string' ? f : f.file))
    expect(files.length).toBeGreaterThanOrEqual(30)
    for (const name of files) {
      const path = fixture('pytorch', name)
      const expected = JSON.parse(readFileSync(fixture('pytorch', 'expected', `${name}.json`), 'utf8'))
      const format = expected.weights_format as 'pytorch' | 'numpy'
      const what = format === 'pytorch' ? 'a PyTorch checkpoint (pytorch)' : 'a NumPy file (numpy)'
      let file
      try {
        file = openWeightsSync(path)
      } catch (e: any) {
        expect(e.code, name).toBe('ERR_UNKNOWN_FORMAT')
        expect(e.message, name).toContain(`this is ${what}, which this version recognises but cannot read yet`)
        expect((await validate(path)).format, name).toBe(format)
        expect(() => SafeTensorsFile.open(path), name).toThrow(expect.objectContaining({ code: 'ERR_UNKNOWN_FORMAT', message: expect.stringContaining(what) }))
        continue
      }
      expect(file.format, name).toBe(format) // the format's reader has landed
    }
  })

  it('SafeTensorsFile.open of a GGUF file points at openWeights', () => {
    const path = join(dir, 'peer.gguf')
    expect(() => SafeTensorsFile.open(path)).toThrow(expect.objectContaining({ code: 'ERR_UNKNOWN_FORMAT', message: `${path}: this is a GGUF file (gguf), not a SafeTensors file: open it with openWeights` }))
    expect(() => SafeTensorsFile.fromBytes(readFileSync(path))).toThrow(expect.objectContaining({ code: 'ERR_UNKNOWN_FORMAT' }))
  })

  it('names do not matter: a GGUF file called .safetensors, a SafeTensors file called .gguf', async () => {
    const gg = join(dir, 'disguised.safetensors')
    const st = join(dir, 'disguised.gguf')
    copyFileSync(join(dir, 'peer.gguf'), gg)
    copyFileSync(join(dir, 'single.safetensors'), st)
    expect((await openWeights(gg)).format).toBe('gguf')
    expect((await openWeights(st)).format).toBe('safetensors')
    expect((await inspect(gg)).format).toBe('gguf')
    expect((await validate(st)).format).toBe('safetensors')
  })
})

import { describe, expect, it } from 'vitest'
import { spawnSync } from 'node:child_process'
import { mkdirSync, readdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs'
import { join, resolve } from 'node:path'
import { Model, SafeTensorsFile, saveFile, type TensorInput } from '../index.js'
import { fixture, minilmDir, tempDir } from './helpers'
// @ts-expect-error: a plain ESM script without types
import { torchPython } from '../scripts/peers/torch.mjs'

const config = { model_type: 'llama', hidden_size: 8, numHeads: 2 }

function bf16Weights(seed: number): Record<string, TensorInput> {
  const out: Record<string, TensorInput> = {}
  for (let l = 0; l < 3; l++) {
    out[`layers.${l}.w`] = { dtype: 'BF16', shape: [4, 8], data: Float32Array.from({ length: 32 }, (_, i) => (i - 16) * 0.125 + l + seed) }
    out[`layers.${l}.norm`] = { shape: [8], data: new Float32Array(8).fill(l + 1) }
  }
  return out
}

/** A Hugging Face style 3-shard BF16 model written file by file, with its index. */
function shardedDir(): { dir: string; weights: Record<string, TensorInput> } {
  const dir = tempDir('sharded-')
  const weights = bf16Weights(0)
  const weightMap: Record<string, string> = {}
  let total = 0
  for (let l = 0; l < 3; l++) {
    const file = `model-0000${l + 1}-of-00003.safetensors`
    const names = [`layers.${l}.w`, `layers.${l}.norm`]
    saveFile(join(dir, file), Object.fromEntries(names.map((n) => [n, weights[n]])))
    for (const n of names) weightMap[n] = file
    total += 32 * 2 + 8 * 4
  }
  writeFileSync(join(dir, 'model.safetensors.index.json'), JSON.stringify({ metadata: { total_size: total }, weight_map: weightMap }))
  writeFileSync(join(dir, 'config.json'), JSON.stringify(config))
  return { dir, weights }
}

function mlxDir(dtypeForm: 'string' | 'code'): string {
  const dir = tempDir('mlx-')
  const dt = (s: string, c: number) => (dtypeForm === 'string' ? s : c)
  writeFileSync(
    join(dir, 'weights.mlx'),
    JSON.stringify({
      version: '1.0',
      weights: {
        'w.f32': { shape: [2, 2], dtype: dt('float32', 0), data: [1.5, -2, 0.1, 4] },
        'w.f16': { shape: [3], dtype: dt('float16', 2), data: [1, 0.1, 65504] },
        'w.bf16': { shape: [2], dtype: dt('bfloat16', 3), data: [0.1, -3] },
        'w.i32': { shape: [2], dtype: dt('int32', 1), data: [-7, 9] },
      },
    }),
  )
  writeFileSync(join(dir, 'config.json'), JSON.stringify({ model_type: 'mlp', camelCaseKey: 1 }))
  return dir
}

describe('Model.loadPretrained', () => {
  it('loads a single-file directory (weights.safetensors)', async () => {
    const dir = tempDir()
    saveFile(join(dir, 'weights.safetensors'), bf16Weights(1))
    writeFileSync(join(dir, 'config.json'), JSON.stringify(config))
    const model = await Model.loadPretrained(dir)
    expect(model.dir).toBe(dir)
    expect(model.format).toBe('safetensors')
    expect(model.files).toEqual(['weights.safetensors'])
    expect(model.config).toEqual(config)
    expect(model.tensorNames.length).toBe(6)
    expect(model.numParameters).toBe(3 * (32 + 8))
    const w = model.getTensor('layers.1.w')
    expect(w.dtype).toBe('BF16')
    expect((w.data as Float32Array)[0]).toBe(-2 + 1 + 1)
  })

  it('loads a 3-shard BF16 model lazily, each tensor from its shard, bit-exact', async () => {
    const { dir, weights } = shardedDir()
    const events: any[] = []
    const model = await Model.loadPretrained(dir, { onProgress: (p) => events.push(p) })
    expect(model.format).toBe('sharded-safetensors')
    expect(model.files).toEqual(['model-00001-of-00003.safetensors', 'model-00002-of-00003.safetensors', 'model-00003-of-00003.safetensors'])
    for (const [name, t] of Object.entries(weights)) {
      const shard = SafeTensorsFile.open(join(dir, `model-0000${Number(name.split('.')[1]) + 1}-of-00003.safetensors`))
      expect(Array.from(model.getTensor(name, { as: 'raw' }).data as Uint8Array)).toEqual(Array.from(shard.getTensor(name, { as: 'raw' }).data as Uint8Array))
      expect(model.getTensor(name).shape).toEqual(t.shape)
    }
    expect(events.map((e) => e.file)).toEqual(model.files)
    expect(events[2].loadedBytes).toBe(events[2].totalBytes)
    expect(events[0].loadedBytes).toBeLessThan(events[1].loadedBytes)
  })

  it.each(['string', 'code'] as const)('loads weights.mlx with %s dtypes', async (form) => {
    const model = await Model.loadPretrained(mlxDir(form))
    expect(model.format).toBe('mlx')
    expect(model.files).toEqual(['weights.mlx'])
    expect(model.config).toEqual({ model_type: 'mlp', camelCaseKey: 1 })
    const f32 = model.getTensor('w.f32')
    expect(f32.dtype).toBe('F32')
    expect(f32.shape).toEqual([2, 2])
    expect(Array.from(f32.data as Float32Array)).toEqual([1.5, -2, Math.fround(0.1), 4])
    expect(model.getTensor('w.f16').dtype).toBe('F16')
    expect(Array.from(model.getTensor('w.f16').data as Float32Array)).toEqual([1, 0.0999755859375, 65504])
    expect(Array.from(model.getTensor('w.bf16').data as Float32Array)).toEqual([0.10009765625, -3])
    expect(Array.from(model.getTensor('w.i32').data as Int32Array)).toEqual([-7, 9])
  })

  it('options.as: F32 makes getTensor upcast by default; per-call options still win', async () => {
    const model = await Model.loadPretrained(mlxDir('string'), { as: 'F32' })
    expect(model.getTensor('w.i32').data).toBeInstanceOf(Float32Array)
    expect(model.getTensor('w.i32', { as: 'native' }).data).toBeInstanceOf(Int32Array)
    expect(model.tensors()['w.i32'].data).toBeInstanceOf(Float32Array)
  })

  it('tensorsAsync: every tensor off the event loop, as tensors() gives them; options.as applies', async () => {
    const model = await Model.loadPretrained(mlxDir('string'), { as: 'F32' })
    const all = await model.tensorsAsync()
    expect(Object.keys(all)).toEqual(model.tensorNames)
    expect(Array.from(all['w.bf16'].data as Float32Array)).toEqual([0.10009765625, -3])
    expect(all['w.i32'].data).toBeInstanceOf(Float32Array)
    expect((await model.tensorsAsync({ as: 'native' }))['w.i32'].data).toBeInstanceOf(Int32Array)
    const sync = model.tensors()
    for (const [name, t] of Object.entries(all)) {
      expect(t.dtype).toBe(sync[name].dtype)
      expect(t.shape).toEqual(sync[name].shape)
      expect(Buffer.from(t.data.buffer, t.data.byteOffset, t.data.byteLength)).toEqual(
        Buffer.from(sync[name].data.buffer, sync[name].data.byteOffset, sync[name].data.byteLength),
      )
    }
    const { dir } = shardedDir()
    const sharded = await Model.loadPretrained(dir)
    const fromShards = await sharded.tensorsAsync()
    expect(Object.keys(fromShards)).toEqual(sharded.tensorNames)
    for (const name of sharded.tensorNames) expect(fromShards[name]).toEqual(sharded.getTensor(name))
    await expect(model.tensorsAsync({ as: 'F8' as never })).rejects.toMatchObject({ code: 'ERR_INVALID_ARGUMENT' })
  })

  it('discovery order: weights.safetensors, model.safetensors, index, weights.mlx', async () => {
    const dir = mlxDir('string')
    expect((await Model.loadPretrained(dir)).format).toBe('mlx')
    const { dir: sharded } = shardedDir()
    for (const f of readdirSync(sharded)) writeFileSync(join(dir, f), readFileSync(join(sharded, f)))
    writeFileSync(join(dir, 'config.json'), JSON.stringify(config))
    expect((await Model.loadPretrained(dir)).format).toBe('sharded-safetensors')
    saveFile(join(dir, 'model.safetensors'), { m: { shape: [1], data: [1] } })
    expect((await Model.loadPretrained(dir)).files).toEqual(['model.safetensors'])
    saveFile(join(dir, 'weights.safetensors'), { w: { shape: [1], data: [1] } })
    const m = Model.loadPretrainedSync(dir)
    expect(m.files).toEqual(['weights.safetensors'])
    expect(m.tensorNames).toEqual(['w'])
  })

  it('save → loadPretrained round trips bit-exact: single file, sharded, and mlx', async () => {
    const { dir, weights } = shardedDir()
    const model = await Model.loadPretrained(dir)
    const single = join(tempDir(), 'single')
    await model.save(single)
    expect(readdirSync(single).sort()).toEqual(['config.json', 'model.safetensors'])
    const sharded = join(tempDir(), 'sharded')
    await model.save(sharded, { maxShardBytes: 100 })
    const index = JSON.parse(readFileSync(join(sharded, 'model.safetensors.index.json'), 'utf8'))
    expect(index.metadata.total_size).toBe(3 * (64 + 32))
    expect(Object.keys(index.weight_map).sort()).toEqual(Object.keys(weights).sort())
    expect(readdirSync(sharded).filter((f) => f.startsWith('model-')).length).toBeGreaterThan(1)
    const mlx = join(tempDir(), 'mlx')
    await model.save(mlx, { format: 'mlx' })
    for (const out of [single, sharded, mlx]) {
      const back = await Model.loadPretrained(out)
      expect(back.config).toEqual(config)
      expect(back.tensorNames.slice().sort()).toEqual(model.tensorNames.slice().sort())
      for (const name of model.tensorNames) {
        const a = model.getTensor(name, { as: 'raw' })
        const b = back.getTensor(name, { as: 'raw' })
        expect(b.dtype).toBe(a.dtype)
        expect(b.shape).toEqual(a.shape)
        expect(Buffer.from(b.data.buffer, b.data.byteOffset, b.data.byteLength).equals(Buffer.from(a.data.buffer, a.data.byteOffset, a.data.byteLength))).toBe(true)
      }
    }
  })

  it('loads the fixture checkpoint as a directory', async () => {
    const dir = tempDir()
    writeFileSync(join(dir, 'model.safetensors'), readFileSync(fixture('safetensors', 'tiny_checkpoint.safetensors')))
    writeFileSync(join(dir, 'config.json'), '{"model_type":"llama"}')
    const model = Model.loadPretrainedSync(dir, { onProgress: () => {} })
    expect((model.getTensor('model.embed_tokens.weight').data as Float32Array)[0]).toBe(2)
  })
})

describe('Model errors', () => {
  const expectCode = async (dir: string, code: string, extra: Record<string, unknown> = {}) => {
    await expect(Model.loadPretrained(dir)).rejects.toMatchObject({ code, ...extra })
    expect(() => Model.loadPretrainedSync(dir)).toThrow(expect.objectContaining({ code }))
  }

  it('missing config.json is ERR_NOT_FOUND naming it; invalid JSON is ERR_INVALID_MODEL', async () => {
    const dir = tempDir()
    saveFile(join(dir, 'weights.safetensors'), { w: { shape: [1], data: [1] } })
    await expectCode(dir, 'ERR_NOT_FOUND', { message: expect.stringContaining('config.json') })
    writeFileSync(join(dir, 'config.json'), '{"a": ')
    await expectCode(dir, 'ERR_INVALID_MODEL')
  })

  it('no weights is ERR_NO_WEIGHTS listing what was looked for', async () => {
    const dir = tempDir()
    writeFileSync(join(dir, 'config.json'), '{}')
    await expectCode(dir, 'ERR_NO_WEIGHTS', { message: expect.stringContaining('model.safetensors.index.json') })
    await expectCode(join(dir, 'missing'), 'ERR_NOT_FOUND')
  })

  it('shard names that are not plain relative paths are ERR_UNSAFE_PATH; symlinks in the directory are followed', async () => {
    for (const bad of ['../x.safetensors', '/etc/passwd', 'a/../../x.safetensors', './link.safetensors', 'a//link.safetensors']) {
      const { dir } = shardedDir()
      writeFileSync(join(dir, 'model.safetensors.index.json'), JSON.stringify({ weight_map: { 'layers.0.w': bad } }))
      await expectCode(dir, 'ERR_UNSAFE_PATH')
    }
    // A symlink the directory's owner placed is their choice (the Hugging Face cache links
    // every file into ../../blobs/): followed, as Python's loaders do.
    const { dir } = shardedDir()
    const outside = tempDir()
    saveFile(join(outside, 'x.safetensors'), { 'layers.0.w': { shape: [1], data: [7] } })
    symlinkSync(join(outside, 'x.safetensors'), join(dir, 'link.safetensors'))
    writeFileSync(join(dir, 'model.safetensors.index.json'), JSON.stringify({ weight_map: { 'layers.0.w': 'link.safetensors' } }))
    expect(Array.from(Model.loadPretrainedSync(dir).getTensor('layers.0.w').data as Float32Array)).toEqual([7])
  })

  it('index/shard disagreements and broken shards are ERR_INVALID_MODEL naming tensor and file', async () => {
    let { dir } = shardedDir()
    const index = JSON.parse(readFileSync(join(dir, 'model.safetensors.index.json'), 'utf8'))
    index.weight_map['layers.0.w'] = 'model-00002-of-00003.safetensors'
    writeFileSync(join(dir, 'model.safetensors.index.json'), JSON.stringify(index))
    await expectCode(dir, 'ERR_INVALID_MODEL', { tensor: 'layers.0.w', message: expect.stringContaining('model-00002-of-00003') })
    ;({ dir } = shardedDir())
    saveFile(join(dir, 'model-00003-of-00003.safetensors'), { 'layers.2.w': { shape: [1], data: [1] }, 'layers.2.norm': { shape: [1], data: [1] }, 'layers.0.norm': { shape: [1], data: [1] } })
    await expectCode(dir, 'ERR_INVALID_MODEL', { tensor: 'layers.0.norm' })
    ;({ dir } = shardedDir())
    writeFileSync(join(dir, 'model-00002-of-00003.safetensors'), Buffer.from('0100000000000000', 'hex'))
    await expectCode(dir, 'ERR_INVALID_MODEL', { message: expect.stringContaining('model-00002-of-00003') })
    // An index naming itself as a shard: refused, not opened again and again until the
    // stack overflows (which took the process down).
    ;({ dir } = shardedDir())
    writeFileSync(join(dir, 'model.safetensors.index.json'), JSON.stringify({ weight_map: { 'layers.0.w': 'model.safetensors.index.json' } }))
    await expectCode(dir, 'ERR_INVALID_MODEL', { message: expect.stringContaining('itself a sharded index') })
  })

  it('weights.mlx problems are ERR_INVALID_MLX naming the tensor', async () => {
    const cases: Array<[unknown, string | undefined, RegExp?]> = [
      [{ version: '1', weights: { a: { shape: [3], dtype: 'float32', data: [1, 2] } } }, 'a'],
      [{ version: '1', weights: { a: { shape: [2], dtype: 'float32', data: [1, 'x'] } } }, 'a'],
      [{ version: '1', weights: { a: { shape: ['2'], dtype: 'float32', data: [1, 2] } } }, 'a'],
      [{ version: '1', weights: { a: { dtype: 'float32', data: [1, 2] } } }, 'a'],
      [{ version: '1', weights: { a: { shape: [2], dtype: 'float8', data: [1, 2] } } }, 'a'],
      [{ version: '1', weights: { a: { shape: [2], dtype: 'float32' } } }, undefined, /elsewhere/],
    ]
    for (const [content, tensor, message] of cases) {
      const dir = tempDir()
      writeFileSync(join(dir, 'config.json'), '{}')
      writeFileSync(join(dir, 'weights.mlx'), JSON.stringify(content))
      await expectCode(dir, 'ERR_INVALID_MLX', tensor ? { tensor } : { message: expect.stringMatching(message!) })
    }
  })

  it('a missing tensor is ERR_NOT_FOUND; bad options are ERR_INVALID_ARGUMENT', async () => {
    const { dir } = shardedDir()
    const model = await Model.loadPretrained(dir)
    expect(() => model.getTensor('nope')).toThrow(expect.objectContaining({ code: 'ERR_NOT_FOUND', tensor: 'nope' }))
    await expect(model.getTensorAsync('nope')).rejects.toMatchObject({ code: 'ERR_NOT_FOUND' })
    await expect(model.save(join(tempDir(), 'x'), { format: 'onnx' as any })).rejects.toMatchObject({ code: 'ERR_INVALID_ARGUMENT' })
    await expect(model.save(join(tempDir(), 'x'), { maxShardBytes: -1 })).rejects.toMatchObject({ code: 'ERR_INVALID_ARGUMENT' })
    await expect(Model.loadPretrained(dir, { as: 'F64' as any })).rejects.toMatchObject({ code: 'ERR_INVALID_ARGUMENT' })
    await expect(Model.loadPretrained(dir, { onProgress: 5 as any })).rejects.toMatchObject({ code: 'ERR_INVALID_ARGUMENT' })
    mkdirSync(join(dir, 'sub'))
  })
})

describe('Model has the accessors SafeTensorsFile has', () => {
  it('getSlice / getSliceAsync / info / getTensorAsync / tensorsAsync agree with each shard read as a SafeTensorsFile', async () => {
    const { dir } = shardedDir()
    const model = Model.loadPretrainedSync(dir)
    const f32 = Model.loadPretrainedSync(dir, { as: 'F32' })
    for (let l = 0; l < 3; l++) {
      const shard = SafeTensorsFile.open(join(dir, `model-0000${l + 1}-of-00003.safetensors`))
      const name = `layers.${l}.w`
      const ranges: Array<Array<[number, number] | number | null>> = [[[1, 3]], [2], [null, [2, 5]], [[-2, 4], -1], [[3, 3]], []]
      for (const r of ranges) {
        const want = shard.getSlice(name, r as any)
        for (const got of [model.getSlice(name, r as any), await model.getSliceAsync(name, r as any)]) {
          expect(got.shape, `${name} ${JSON.stringify(r)}`).toEqual(want.shape)
          expect(got.dtype).toBe('BF16')
          // BF16 comes back as its stored 16-bit words ('native'), bit for bit.
          expect(Array.from(got.data as Uint16Array)).toEqual(Array.from(want.data as Uint16Array))
        }
        // The directory's default `as: 'F32'` applies to slices too.
        expect(Array.from(f32.getSlice(name, r as any).data as Float32Array)).toEqual(Array.from(shard.getSlice(name, r as any, { as: 'F32' }).data as Float32Array))
      }
      expect(model.info(name)).toMatchObject({ ...shard.info(name), storedType: 'BF16' })
      expect(Array.from((await model.getTensorAsync(name)).data as Uint16Array)).toEqual(Array.from(shard.getTensor(name).data as Uint16Array))
      shard.close()
    }
    const all = await model.tensorsAsync({ as: 'F32' })
    expect(Object.keys(all)).toEqual(model.tensorNames)
    expect(all['layers.2.norm'].data).toEqual(new Float32Array(8).fill(3))
    // Bad ranges and names: the same codes as SafeTensorsFile.
    expect(() => model.getSlice('layers.0.w', [[0, 9]])).toThrow(expect.objectContaining({ code: 'ERR_INVALID_ARGUMENT', tensor: 'layers.0.w' }))
    expect(() => model.getSlice('layers.0.w', [0, 0, 0])).toThrow(expect.objectContaining({ code: 'ERR_INVALID_ARGUMENT' }))
    expect(() => model.getSlice('nope', [0])).toThrow(expect.objectContaining({ code: 'ERR_NOT_FOUND', tensor: 'nope' }))
    await expect(model.getSliceAsync('nope', [0])).rejects.toMatchObject({ code: 'ERR_NOT_FOUND' })
  })

  it('a contiguous slice of an aligned F32 tensor is a view of the mapping, as SafeTensorsFile gives', () => {
    const dir = tempDir()
    saveFile(join(dir, 'model.safetensors'), { w: { shape: [4, 4], data: Float32Array.from({ length: 16 }, (_, i) => i) } })
    writeFileSync(join(dir, 'config.json'), JSON.stringify(config))
    const model = Model.loadPretrainedSync(dir)
    const rows = model.getSlice('w', [[1, 3]], { copy: false }).data as Float32Array
    expect(Array.from(rows)).toEqual([4, 5, 6, 7, 8, 9, 10, 11])
    // A view: writing through one array shows in another view of the same mapping.
    const whole = model.getTensor('w', { copy: false }).data as Float32Array
    rows[0] = 42
    expect(whole[4]).toBe(42)
    const gathered = model.getSlice('w', [null, [0, 1]]).data as Float32Array
    expect(Array.from(gathered)).toEqual([0, 42, 8, 12])
  })
})

// What Model.save writes is what transformers' save_pretrained writes: transformers loads it
// (safetensors only, local files only) and gives the same outputs as from the original.
describe('Model.save → transformers', () => {
  const SAME_OUTPUTS = resolve(__dirname, '../scripts/transformers/same_outputs.py')
  function transformersCompare(reference: string, candidate: string) {
    const r = spawnSync(torchPython(), [SAME_OUTPUTS, reference, candidate], { encoding: 'utf8', timeout: 300_000 })
    expect(r.status, r.stderr.split('\n').slice(-5).join('\n')).toBe(0)
    return JSON.parse(r.stdout.trim().split('\n').at(-1)!)
  }

  it('all-MiniLM-L6-v2 saved as one file and in shards: transformers loads each, same token ids, the same outputs exactly', async () => {
    const source = minilmDir()
    const model = await Model.loadPretrained(source)
    const single = join(tempDir('save-hf-'), 'single')
    const report = await model.save(single)
    expect(report.files).toEqual(['model.safetensors'])
    expect(report.companions).toEqual(expect.arrayContaining(['tokenizer.json', 'tokenizer_config.json', 'special_tokens_map.json', 'vocab.txt']))
    expect(report.warnings).toEqual([])
    const sharded = join(tempDir('save-hf-'), 'sharded')
    const shardedReport = await model.save(sharded, { maxShardBytes: 32 << 20 })
    const n = shardedReport.files.length - 1
    expect(n).toBeGreaterThan(2)
    expect(shardedReport.files).toEqual([...Array.from({ length: n }, (_, i) => `model-0000${i + 1}-of-0000${n}.safetensors`), 'model.safetensors.index.json'])
    for (const dir of [single, sharded]) {
      for (const f of readdirSync(dir).filter((f) => f.endsWith('.safetensors'))) {
        expect(SafeTensorsFile.open(join(dir, f)).metadata, f).toEqual({ format: 'pt' })
      }
      expect(JSON.parse(readFileSync(join(dir, 'config.json'), 'utf8'))).toEqual(JSON.parse(readFileSync(join(source, 'config.json'), 'utf8')))
      const out = transformersCompare(source, dir)
      expect(out, dir).toMatchObject({ sameIds: true, maxAbsDiff: 0 })
      expect(out.shapes).toEqual([[1, 12, 384], [1, 8, 384]])
    }
  }, 600_000)
})

import { beforeAll, describe, expect, it } from 'vitest'
import { spawnSync } from 'node:child_process'
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { join } from 'node:path'
import { inspect } from 'node:util'
import { GgufFile, LinearRegression, LogisticRegression, Model, SafeTensorsFile, convert, openWeights, openWeightsSync, saveFile } from '../index.js'
import { RUNTIMES, type Runtime, median, rssFloors, runtimeCommand, tempDir } from './helpers'

/**
 * close() and [Symbol.dispose]() on every weights class: released at once (not when the
 * event loop next turns), ERR_CLOSED afterwards, arrays handed out before stay valid.
 */

const CHILD = join(__dirname, 'child/close_cycles.cjs')
const W = Float32Array.from({ length: 65536 }, (_, i) => i * 0.5)
const H = Float32Array.from({ length: 65536 }, (_, i) => (i % 100) - 50) // exact in BF16

let dir = ''
let path = ''
let gguf = ''

beforeAll(async () => {
  dir = tempDir('stn-close-')
  mkdirSync(join(dir, 'model'))
  path = join(dir, 'model', 'model.safetensors')
  saveFile(path, { w: { shape: [256, 256], data: W }, h: { dtype: 'BF16', shape: [256, 256], data: H } })
  writeFileSync(join(dir, 'model', 'config.json'), '{"model_type": "test"}')
  gguf = join(dir, 'model', 'model.gguf')
  await convert(path, gguf, { to: 'gguf' })
})

interface Sample {
  cycle: number
  rssMiB: number
  maps: number
}
interface Report {
  samples: Sample[]
  final: { rssMiB: number; maps: number }
  ms: number
}

function cycles(n: number, mode: string, kind = 'file', runtime: Runtime = 'node'): Report {
  const [cmd, args] = runtimeCommand(runtime, CHILD, [path, String(n), mode, kind])
  const r = spawnSync(cmd, args, { encoding: 'utf8', timeout: 180_000 })
  expect(r.status, r.stderr).toBe(0)
  return JSON.parse(r.stdout.trim().split('\n').at(-1)!)
}

/** Bit-exact equality of two typed arrays (fast, for 65,536 elements). */
function same(a: ArrayBufferView, b: ArrayBufferView): boolean {
  return Buffer.from(a.buffer, a.byteOffset, a.byteLength).equals(Buffer.from(b.buffer, b.byteOffset, b.byteLength))
}

describe('a synchronous loop that closes what it opens', () => {
  // Every copy is an ArrayBuffer V8 allocates and collects inside the loop, and close()
  // unmaps the file at once: the same in every runtime. RSS sampled after a full collection
  // still swings: the C allocator keeps freed pages for a while (Deno's samples swing by
  // ±70 MiB from one to the next, in plain JavaScript too) and the runtime's heap grows in
  // one-time steps of 10–70 MiB at any point of the run. So the checks read the floor RSS
  // never goes below again (the minimum of every later sample), which swings cannot raise:
  // - a leak raises that floor between every pair of samples, a step only once: its median
  //   rise per 1,000 cycles is held under 2 MiB, two kibibytes a cycle, where one leaked
  //   upcast copy is 256 KiB a cycle and one mapping left ~100 KiB (Bun keeps ~500 bytes per
  //   Node-API object until the loop yields, ~1 KiB a cycle here, and is inside it);
  // - the floor of the last 4,000 cycles is within 128 MiB of the most the same loop in plain JavaScript
  //   grew by in the same runtime (a leak of 7 KiB a cycle breaks it).
  for (const runtime of RUNTIMES) {
    it(`${runtime}: 20,000 open → getTensor → close cycles that never yield keep RSS flat and no mapping of the file`, () => {
      const { samples, ms } = cycles(20_000, 'close', 'file', runtime)
      const control = cycles(20_000, 'control', 'file', runtime).samples
      const runtimeGrowth = Math.max(...control.map((s) => s.rssMiB)) - control[0].rssMiB
      console.log(
        `${runtime}: 20,000 synchronous open/getTensor/close cycles in ${ms} ms: RSS every 1,000 cycles ${samples.map((s) => s.rssMiB.toFixed(0)).join(' ')} MiB ` +
          `(the same loop in plain JS: ${control.map((s) => s.rssMiB.toFixed(0)).join(' ')}); mappings of the file at each sample: max ${Math.max(...samples.map((s) => s.maps))}`,
      )
      expect(samples.at(-1)!.cycle).toBe(20_000)
      // Each close() unmapped its file before the next open: never a mapping left at a sample.
      for (const s of samples) expect(s.maps, `cycle ${s.cycle}`).toBe(0)
      const floor = rssFloors(samples)
      const settled = floor.slice(samples.findIndex((s) => s.cycle === 2000))
      const rises = settled.slice(1).map((f, i) => f - settled[i])
      expect(median(rises), `floor rise per 1,000 cycles: ${rises.map((d) => d.toFixed(2)).join(' ')}`).toBeLessThan(2)
      expect(floor[floor.length - 5] - samples[0].rssMiB - runtimeGrowth).toBeLessThan(128)
    }, 600_000)
  }

  it('without close(), the same loop holds every mapping until it yields (what close() fixes)', () => {
    const { samples, final } = cycles(2000, 'drop')
    const last = samples[samples.length - 1]
    console.log(`2,000 synchronous cycles without close(): ${last.maps} mappings of the file before the loop yields, ${final.maps} after`)
    expect(last.maps).toBe(2000)
    expect(final.maps).toBeLessThan(2000)
  })

  it('[Symbol.dispose]() closes as close() does', () => {
    const { samples } = cycles(2000, 'dispose')
    for (const s of samples) expect(s.maps, `cycle ${s.cycle}`).toBe(0)
  })

  it('openWeightsSync files and models close the same way', () => {
    for (const kind of ['weights', 'model']) {
      const { samples } = cycles(2000, 'close', kind)
      for (const s of samples) expect(s.maps, `${kind}, cycle ${s.cycle}`).toBe(0)
    }
  })

  // Views are external buffers: Node runs their finalizers only between event-loop turns,
  // so a view keeps its mapping until then even after close() (it must stay valid).
  it('views handed out keep the mapping until JS drops them and the loop turns; then it goes', () => {
    const { samples, final } = cycles(2000, 'views')
    const last = samples[samples.length - 1]
    console.log(`2,000 synchronous cycles keeping a view each: ${last.maps} mappings before the loop yields, ${final.maps} after`)
    expect(last.maps).toBeGreaterThan(0)
    expect(final.maps).toBeLessThan(last.maps)
  })
})

/** Every public member of an instance, called as a user would: a getter read, or a method with plausible arguments. */
function accessors(obj: any): Array<[string, () => unknown]> {
  const proto = Object.getPrototypeOf(obj)
  const out: Array<[string, () => unknown]> = []
  for (const key of Object.getOwnPropertyNames(proto)) {
    if (key === 'constructor' || key === 'close') continue
    const d = Object.getOwnPropertyDescriptor(proto, key)!
    if (d.get) out.push([key, () => obj[key]])
    else if (key === 'getSlice' || key === 'getSliceAsync') out.push([key, () => obj[key]('w', [[0, 1]])])
    else if (key === 'save') out.push([key, () => obj.save(join(dir, 'saved'))])
    else if (key === 'predict' || key === 'predictProba') out.push([key, () => obj[key]({ rows: 1, cols: 2, data: new Float32Array(2) })])
    else if (['tensors', 'tensorsAsync', 'validate'].includes(key)) out.push([key, () => obj[key]()])
    else if (typeof d.value === 'function') out.push([key, () => obj[key]('w')])
  }
  return out
}

async function codeOf(call: () => unknown): Promise<string | undefined> {
  try {
    const r = call()
    if (r instanceof Promise) await r
    return 'no error'
  } catch (e: any) {
    return e?.code
  }
}

describe('after close()', () => {
  const opened: Array<[string, () => any]> = [
    ['SafeTensorsFile', () => SafeTensorsFile.open(path)],
    ['SafeTensorsFile (fromBytes)', () => SafeTensorsFile.fromBytes(require('node:fs').readFileSync(path))],
    ['WeightsFile', () => openWeightsSync(path)],
    ['Model', () => Model.loadPretrainedSync(join(dir, 'model'))],
    ['GgufFile', () => GgufFile.open(gguf)],
    ['GgufFile (openWeightsSync)', () => openWeightsSync(gguf)],
  ]

  for (const [name, open] of opened) {
    it(`${name}: every accessor throws (or rejects with) ERR_CLOSED; close() again is a no-op`, async () => {
      const file = open()
      const members = accessors(file)
      expect(members.length).toBeGreaterThan(8)
      file.close()
      for (const [key, call] of members) expect(await codeOf(call), `${name}.${key}`).toBe('ERR_CLOSED')
      expect(() => file.close()).not.toThrow()
      expect(() => file[Symbol.dispose]()).not.toThrow()
      const e = (() => {
        try {
          file.getTensor('w')
        } catch (err) {
          return err as any
        }
      })()
      expect(e).toBeInstanceOf(Error)
      expect(e.message).toMatch(/was closed/)
      if (!name.includes('fromBytes')) expect(e.path).toBe(name === 'Model' ? join(dir, 'model') : name.startsWith('GgufFile') ? gguf : path)
    })
  }

  it('arrays handed out before close stay valid, views and copies alike, and keep their values', () => {
    const file = SafeTensorsFile.open(path)
    const view = file.getTensor('w').data as Float32Array
    const upcast = file.getTensor('h').data as Float32Array
    const slice = file.getSlice('w', [[1, 2]]).data as Float32Array
    file.close()
    expect(same(view, W)).toBe(true)
    expect(same(upcast, H)).toBe(true)
    expect(same(slice, W.subarray(256, 512))).toBe(true)
    // A view is still writable (the private mapping), and the write stays in this process.
    view[0] = 42
    expect(view[0]).toBe(42)
    const again = SafeTensorsFile.open(path)
    expect((again.getTensor('w').data as Float32Array)[0]).toBe(0)
    again.close()
  })

  it('a call started before close() finishes with the right values', async () => {
    const file = openWeightsSync(path)
    const pending = Promise.all([file.getTensorAsync('w'), file.getTensorAsync('h'), file.tensorsAsync()])
    file.close()
    const [w, h, all] = await pending
    expect(same(w.data, W)).toBe(true)
    expect(same(h.data, H)).toBe(true)
    expect(same(all.w.data, W) && same(all.h.data, H)).toBe(true)
    await expect(file.getTensorAsync('w')).rejects.toMatchObject({ code: 'ERR_CLOSED' })
  })

  it('a getter of an argument may close the file: before the call reads it (ERR_CLOSED) or during it (the call finishes)', async () => {
    const file = SafeTensorsFile.open(path)
    // napi-rs reads `options` before the call starts: it sees the file closed.
    const options = {
      get as() {
        file.close()
        return 'F32'
      },
    }
    expect(() => file.getTensor('h', options as any)).toThrow(expect.objectContaining({ code: 'ERR_CLOSED' }))
    // Model.predict reads the matrix after taking the model: closed meanwhile, it finishes.
    const lr = new LinearRegression().fit({ rows: 3, cols: 1, data: new Float32Array([1, 2, 3]) }, [3, 5, 7])
    const modelDir = join(dir, 'linear')
    await lr.save(modelDir)
    const model = Model.loadPretrainedSync(modelDir)
    const x = {
      rows: 2,
      cols: 1,
      get data() {
        model.close()
        return new Float32Array([10, 20])
      },
    }
    expect(Array.from(model.predict(x), (v) => Math.round(v * 1000) / 1000)).toEqual([21, 41])
    expect(() => model.predict({ rows: 1, cols: 1, data: new Float32Array(1) })).toThrow(expect.objectContaining({ code: 'ERR_CLOSED' }))
  })
})

describe('remote files and models close too', () => {
  it('openUrl, openWeights(url) and loadPretrained(url): arrays kept, then ERR_CLOSED', async () => {
    // A server with range requests over the model directory.
    const server = createServer((req, res) => {
      let body: Buffer
      try {
        body = readFileSync(join(dir, 'model', decodeURIComponent(new URL(req.url!, 'http://x').pathname).slice(1)))
      } catch {
        res.writeHead(404).end()
        return
      }
      const range = /^bytes=(\d+)-(\d+)$/.exec(req.headers.range ?? '')
      if (!range) return res.writeHead(200, { 'Content-Length': body.length }).end(body)
      const [start, end] = [Number(range[1]), Math.min(Number(range[2]), body.length - 1)]
      res.writeHead(206, { 'Content-Range': `bytes ${start}-${end}/${body.length}`, 'Content-Length': end - start + 1 }).end(body.subarray(start, end + 1))
    })
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
    try {
      const opened: any[] = [
        await SafeTensorsFile.openUrl(`${base}/model.safetensors`),
        await openWeights(`${base}/model.safetensors`),
        await Model.loadPretrained(`${base}/`),
        await GgufFile.openUrl(`${base}/model.gguf`),
        await openWeights(`${base}/model.gguf`),
      ]
      for (const f of opened) {
        const w = await f.getTensorAsync('w')
        f.close()
        expect(same(w.data, W)).toBe(true)
        expect(() => f.tensorNames).toThrow(expect.objectContaining({ code: 'ERR_CLOSED' }))
        expect(() => f.numParameters).toThrow(expect.objectContaining({ code: 'ERR_CLOSED' }))
        expect(() => f.has('w')).toThrow(expect.objectContaining({ code: 'ERR_CLOSED' }))
        await expect(f.getTensor('w')).rejects.toMatchObject({ code: 'ERR_CLOSED' })
        await expect(f.getTensorAsync('h')).rejects.toMatchObject({ code: 'ERR_CLOSED' })
        expect(() => f[Symbol.dispose]()).not.toThrow()
      }
    } finally {
      server.close()
    }
  })
})

describe('what console.log shows', () => {
  it('path, format, tensor count, stored types and parameters; closed files say so', () => {
    const file = SafeTensorsFile.open(path)
    const summary = `{\n  path: '${path}',\n  format: 'safetensors',\n  tensors: 2,\n  types: { F32: 1, BF16: 1 },\n  parameters: 131072\n}`
    expect(inspect(file)).toBe(`SafeTensorsFile ${summary}`)
    const weights = openWeightsSync(path)
    expect(inspect(weights)).toBe(`WeightsFile ${summary}`)
    const model = Model.loadPretrainedSync(join(dir, 'model'))
    expect(inspect(model)).toBe(`Model ${summary.replace(path, join(dir, 'model'))}`)
    for (const f of [file, weights, model]) {
      f.close()
      expect(inspect(f)).toBe(`${f.constructor.name} <closed>`)
    }
    // Classes without a file keep their own inspection.
    expect(inspect(new LinearRegression())).toMatch(/^LinearRegression/)
    expect(inspect(new LogisticRegression())).toMatch(/^LogisticRegression/)
  })
})

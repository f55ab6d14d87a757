// Child process of load.spec.ts: one output-producing call repeated in a synchronous loop
// (the event loop never turns), checking every result's values and sampling the resident set.
//
//   node --expose-gc sync_loop.cjs DIR CASE ITERATIONS [control]
//
// DIR holds what load.spec.ts wrote (big.safetensors, bf16.safetensors, model/, linear.safetensors).
// CONTROL (optional, `control`): the same loop in plain JavaScript, without the addon.
// Prints one JSON line: { baseMiB, peakMiB, yieldedMiB, outMiB, ms, majorGcs }: the resident
// set before the loop, its largest value sampled after each call, after the loop has yielded
// and the engine collected, the size of one output, and the full collections that started
// during the loop (Node only: -1 where the runtime reports none).
'use strict'
const { readFileSync } = require('node:fs')
const { join } = require('node:path')
const { PerformanceObserver, constants: perf } = require('node:perf_hooks')
const { SafeTensorsFile, loadFile, Model, LinearRegression } = require('../../index.js')

const [dir, mode, itersArg, control] = process.argv.slice(2)
const iterations = Number(itersArg)
const ROWS = 2048
const COLS = 4096
const N = ROWS * COLS
// The tensors' values (exact in BF16 and F32).
const hAt = (i) => ((i % 512) - 256) / 64
const wAt = (i) => (i % 1000) * 0.25

const rssMiB = () => Number(readFileSync('/proc/self/status', 'utf8').match(/VmRSS:\s*(\d+)/)[1]) / 1024
const turn = () => new Promise((resolve) => setImmediate(resolve))
// A full, synchronous collection: Node's and Deno's `gc` (--expose-gc), Bun's own.
const gc = globalThis.gc ?? (() => globalThis.Bun.gc(true))
/** Full collections, each followed by an event-loop turn (finalizers run there). */
async function collect(times) {
  for (let i = 0; i < times; i++) {
    gc()
    await turn()
  }
}
const fail = (msg) => {
  throw new Error(msg)
}
function expectAt(array, k, want, what) {
  if (array[k] !== want) fail(`${what}[${k}] = ${array[k]}, expected ${want}`)
}

function setup() {
  const big = join(dir, 'big.safetensors')
  switch (mode) {
    case 'upcast': {
      const f = SafeTensorsFile.open(big)
      return { out: N * 4, step: (i) => {
        const d = f.getTensor('h').data
        if (!(d instanceof Float32Array) || d.length !== N) fail('wrong array')
        const k = (i * 7919) % N
        expectAt(d, k, hAt(k), 'h')
      } }
    }
    case 'keep': {
      // A model loader's loop: every output kept (and every one checked at the end).
      const f = SafeTensorsFile.open(big)
      const kept = []
      return { out: N * 4, step: (i) => {
        kept.push(f.getTensor('h').data)
        if (i === iterations - 1) {
          for (const [j, d] of kept.entries()) expectAt(d, (j * 7919) % N, hAt((j * 7919) % N), `kept ${j}: h`)
        }
      } }
    }
    case 'f64': {
      const f = SafeTensorsFile.open(big)
      return { out: N * 8, step: (i) => {
        const d = f.getTensor('h', { as: 'F64' }).data
        if (!(d instanceof Float64Array) || d.length !== N) fail('wrong array')
        const k = (i * 7919) % N
        expectAt(d, k, hAt(k), 'h as F64')
      } }
    }
    case 'copy': {
      const f = SafeTensorsFile.open(big)
      return { out: N * 4, step: (i) => {
        const d = f.getTensor('w', { copy: true }).data
        const k = (i * 7919) % N
        expectAt(d, k, wAt(k), 'w copy')
        d[k] = -1 // a copy: the next one is unaffected
      } }
    }
    case 'slice': {
      // Columns 1024..3072 of every row: 2,048 runs gathered, then upcast.
      const f = SafeTensorsFile.open(big)
      return { out: ROWS * 2048 * 4, step: (i) => {
        const t = f.getSlice('h', [null, [1024, 3072]])
        if (t.shape.join() !== '2048,2048') fail(`shape ${t.shape}`)
        const r = (i * 131) % ROWS
        const c = (i * 17) % 2048
        expectAt(t.data, r * 2048 + c, hAt(r * COLS + 1024 + c), 'h slice')
      } }
    }
    case 'loadfile': {
      const path = join(dir, 'bf16.safetensors')
      return { out: N * 4, step: (i) => {
        const all = loadFile(path, { as: 'F32' })
        const k = (i * 7919) % N
        expectAt(all.h.data, k, hAt(k), 'loadFile h')
      } }
    }
    case 'model': {
      const model = Model.loadPretrainedSync(join(dir, 'model'), { as: 'F32' })
      return { out: N * 4, step: (i) => {
        const d = model.getTensor('h').data
        const k = (i * 7919) % N
        expectAt(d, k, hAt(k), 'model h')
      } }
    }
    case 'predict': {
      // y = 2 x0 - x1 + 0.5 x2 + 0 x3 + 1, fitted exactly by the test; 2M rows → 8 MiB out.
      const m = LinearRegression.loadSafetensors(join(dir, 'linear.safetensors'))
      const rows = 1 << 21
      const x = new Float32Array(rows * 4)
      for (let r = 0; r < rows; r++) {
        x[4 * r] = r % 7
        x[4 * r + 1] = r % 5
        x[4 * r + 2] = r % 3
        x[4 * r + 3] = 1
      }
      // Its plain-JavaScript control computes the same predictions from the same rows.
      const plain = () => {
        const y = new Float32Array(rows)
        for (let r = 0; r < rows; r++) y[r] = 2 * x[4 * r] - x[4 * r + 1] + 0.5 * x[4 * r + 2] + 1
        return y
      }
      return { out: rows * 4, plain, step: (i) => {
        const y = m.predict({ data: x, rows, cols: 4 })
        if (!(y instanceof Float32Array) || y.length !== rows) fail('wrong predictions')
        const r = (i * 7919) % rows
        const want = 2 * (r % 7) - (r % 5) + 0.5 * (r % 3) + 1
        if (Math.abs(y[r] - want) > 1e-3) fail(`y[${r}] = ${y[r]}, expected ${want}`)
      } }
    }
    case 'views': {
      // Zero-copy views: no copy at all, so the loop costs no memory; writes show through.
      const f = SafeTensorsFile.open(big)
      const first = f.getTensor('w', { copy: false }).data
      return { out: N * 4, step: (i) => {
        const d = f.getTensor('w', { copy: false }).data
        if (d.buffer.byteLength !== N * 4) fail('not a view of the tensor')
        const k = (i * 7919) % N
        d[k] = -i
        if (first[k] !== -i) fail(`a write through view ${i} is not seen by the first view`)
      } }
    }
  }
  fail(`unknown case ${mode}`)
}

/** Resident KiB of the mappings of `path` (/proc/self/smaps). */
function mappedKiB(path) {
  let kib = 0
  let inFile = false
  for (const line of readFileSync('/proc/self/smaps', 'utf8').split('\n')) {
    if (/^[0-9a-f]+-[0-9a-f]+ /.test(line)) inFile = line.endsWith(path)
    else if (inFile && line.startsWith('Rss:')) kib += Number(line.split(/\s+/)[1])
  }
  return kib
}

/** Which pages of a BF16 file stay mapped after upcasts (a report, not a loop). */
function pages() {
  const path = join(dir, 'bf16.safetensors')
  const f = SafeTensorsFile.open(path)
  const keep = [f.getTensor('h').data]
  const afterFirst = mappedKiB(path)
  keep.push(f.getTensor('h').data)
  const afterSecond = mappedKiB(path)
  // A raw view written through, then an upcast of the same tensor: the view's pages stay,
  // and with them the write (a private copy-on-write page given back would lose it).
  const g = SafeTensorsFile.open(path)
  const raw = g.getTensor('h', { as: 'raw', copy: false }).data
  raw[1] = 0x40 // h[0]: BF16 0xc080 (-4) becomes 0x4080 (+4)
  const up = g.getTensor('h').data
  const viewed = mappedKiB(path) - afterSecond
  const again = g.getTensor('h', { as: 'raw', copy: false }).data
  return { afterFirst, afterSecond, viewed, upcastSeesWrite: up[0], rawKeepsWrite: raw[1], newViewSeesWrite: again[1], keep: keep.length }
}

/**
 * Rounds of a dropping loop, each after a full collection (a benchmark's pattern): the peak
 * resident set of each round. A forced collection that took the dropped outputs for kept
 * ones let each round hold more than the one before.
 */
async function rounds() {
  const f = SafeTensorsFile.open(join(dir, 'big.safetensors'))
  const peaks = []
  for (let round = 0; round < iterations; round++) {
    await collect(2)
    let peak = 0
    let d = null
    for (let i = 0; i < 10; i++) {
      d = f.getTensor('h', { as: 'F64' }).data
      expectAt(d, (i * 7919) % N, hAt((i * 7919) % N), 'h as F64')
      peak = Math.max(peak, rssMiB())
    }
    d = null
    peaks.push(peak)
  }
  return { peaks, outMiB: (N * 8) / 1048576 }
}

async function main() {
  if (mode === 'pages') {
    process.stdout.write(JSON.stringify(pages()) + '\n')
    return
  }
  if (mode === 'rounds') {
    process.stdout.write(JSON.stringify(await rounds()) + '\n')
    return
  }
  const made = setup()
  const { out } = made
  // `control`: the same loop in plain JavaScript, without the addon: an array of the output's
  // size made and written whole each time (kept, where the case keeps its outputs).
  const kept = []
  const step = control === 'control'
    ? made.plain ?? ((i) => {
        const d = out === N * 8 ? new Float64Array(out / 8) : new Float32Array(out / 4)
        d.fill(i)
        if (mode === 'keep') kept.push(d)
      })
    : made.step
  await collect(3)
  // Full (mark-compact) collections that start during the loop, forced or V8's own.
  const gcStarts = []
  const observer = new PerformanceObserver((list) => {
    for (const e of list.getEntries()) if (e.detail?.kind === perf.NODE_PERFORMANCE_GC_MAJOR) gcStarts.push(e.startTime)
  })
  const observing = !process.versions.bun && !process.versions.deno
  if (observing) observer.observe({ entryTypes: ['gc'] })
  const baseMiB = rssMiB()
  let peakMiB = baseMiB
  const started = Date.now()
  const t0 = performance.now()
  for (let i = 0; i < iterations; i++) {
    step(i)
    peakMiB = Math.max(peakMiB, rssMiB())
  }
  const t1 = performance.now()
  const ms = Date.now() - started
  await turn()
  await turn()
  if (observing) observer.disconnect()
  const majorGcs = observing ? gcStarts.filter((t) => t >= t0 && t <= t1).length : -1
  await collect(3)
  const yieldedMiB = rssMiB()
  process.stdout.write(JSON.stringify({ baseMiB, peakMiB, yieldedMiB, outMiB: out / 1048576, ms, majorGcs }) + '\n')
}

main().catch((e) => {
  process.stderr.write(`child failed: ${e && e.stack}\n`)
  process.exit(3)
})

// One implementation of one benchmark row, in its own process (so its peak RSS is its own):
//   node --expose-gc benches/lib/child.mjs CASE REPS 'JSON-PARAMS'
// Runs one untimed warm-up, then REPS timed repetitions, and prints one line
// `RESULT {json}` with the times (ms), peak RSS (KiB) and a check value of the output.
// Between repetitions (outside the timed region) it collects garbage, so a fresh 256 MiB
// output per repetition is freed before the next one starts.
import { execFileSync } from 'node:child_process'
import { closeSync, fsyncSync, openSync, readFileSync, readdirSync, renameSync, rmSync, statSync, writeFileSync, writeSync } from 'node:fs'
import { createRequire } from 'node:module'
import { join } from 'node:path'
import { performance } from 'node:perf_hooks'
import { ROOT, features, peakRssKib } from './common.mjs'
import { f16ToF32, f32Views, tensorBytes } from './safetensors-js.mjs'

const require = createRequire(import.meta.url)
const st = require(ROOT)

const [caseName, repsArg, paramsArg] = process.argv.slice(2)
const reps = Number(repsArg)
const P = JSON.parse(paramsArg ?? '{}')
const rssStart = peakRssKib(process.resourceUsage().maxRSS)

if (typeof globalThis.gc !== 'function') throw new Error('run with node --expose-gc')
const tick = () => new Promise((resolve) => setImmediate(resolve))
async function collect() {
  // Finalizers of external array buffers (our outputs) run after the GC, in an immediate.
  globalThis.gc()
  await tick()
  globalThis.gc()
  await tick()
}
const syncDisks = () => execFileSync('sync')
const rm = (p) => rmSync(p, { force: true })

/** Sum of every 4,099th element (a cheap fingerprint of a large output). */
function strideSum(a, stride = 4099) {
  let s = 0
  for (let i = 0; i < a.length; i += stride) s += a[i]
  return s
}
function sumAll(arrays) {
  let s = 0
  for (const a of arrays) {
    let t = 0
    for (let i = 0; i < a.length; i++) t += a[i]
    s += t
  }
  return s
}
function count(arrays) {
  let n = 0
  for (const a of arrays) n += a.length
  return n
}

// ---------------------------------------------------------------------------------------
// Cases: setup() → ctx (untimed), run(ctx) → result (timed), check(ctx, result) (untimed, once),
// before(ctx) (untimed, before each repetition).

const cases = {}

// Row 1: upcast ------------------------------------------------------------------------
cases['upcast-ours-file'] = {
  setup: () => ({ f: st.SafeTensorsFile.open(P.path) }),
  run: (c) => c.f.getTensor(P.name).data,
  // Repeated calls (P.loop): the same call in a loop that never yields, or awaited.
  call: (c) => c.f.getTensor(P.name).data,
  callAsync: async (c) => (await c.f.getTensorAsync(P.name)).data,
  check: (_, out) => ({ n: out.length, sum: strideSum(out) }),
}
cases['slice-ours'] = {
  // Columns [0, cols) of every row: one run per row gathered, then upcast.
  setup: () => ({ f: st.SafeTensorsFile.open(P.path) }),
  run: (c) => c.f.getSlice(P.name, [null, [0, P.cols]], { as: 'F32' }).data,
  call: (c) => c.f.getSlice(P.name, [null, [0, P.cols]], { as: 'F32' }).data,
  callAsync: async (c) => (await c.f.getSliceAsync(P.name, [null, [0, P.cols]], { as: 'F32' })).data,
  check: (_, out) => ({ n: out.length, sum: strideSum(out) }),
}
cases['upcast-ours-open'] = {
  // A new SafeTensorsFile (a new mapping) every repetition: the first read of a tensor.
  setup: () => ({}),
  run: () => st.SafeTensorsFile.open(P.path).getTensor(P.name).data,
  check: (_, out) => ({ n: out.length, sum: strideSum(out) }),
}
cases['upcast-ours-bytes'] = {
  // The file's bytes in memory: validated (copied) and the tensor upcast.
  setup: () => ({ bytes: readFileSync(P.path) }),
  run: (c) => st.SafeTensorsFile.fromBytes(c.bytes).getTensor(P.name).data,
  check: (_, out) => ({ n: out.length, sum: strideSum(out) }),
}
cases['upcast-js'] = {
  setup: () => {
    const t = tensorBytes(readFileSync(P.path), P.name)
    const src = new Uint16Array(t.bytes.buffer, 0, t.bytes.length / 2)
    let table = null
    if (t.dtype === 'F16') {
      table = new Float32Array(65536)
      for (let h = 0; h < 65536; h++) table[h] = f16ToF32(h)
    }
    return { src, table, dtype: t.dtype }
  },
  run: (c) => {
    const { src, table } = c
    const n = src.length
    const out = new Float32Array(n)
    if (table) {
      for (let i = 0; i < n; i++) out[i] = table[src[i]]
    } else {
      const bits = new Uint32Array(out.buffer)
      for (let i = 0; i < n; i++) bits[i] = src[i] << 16
    }
    return out
  },
  check: (_, out) => ({ n: out.length, sum: strideSum(out) }),
}
cases['memcpy-js'] = {
  setup: () => {
    const src = new Float32Array(P.n)
    for (let i = 0; i < src.length; i++) src[i] = i & 1023
    return { src }
  },
  run: (c) => {
    const out = new Float32Array(c.src.length)
    out.set(c.src)
    return out
  },
  check: (_, out) => ({ n: out.length, sum: strideSum(out) }),
}

// Row 2: open + get every tensor (and touch every element) -------------------------------
const loadCheck = (_, r) => ({ n: r.n, sum: r.sum })
const loaded = (record) => {
  const all = Object.values(record).map((t) => t.data)
  return { n: count(all), sum: P.touch ? sumAll(all) : null, all }
}
// `P.copy`: false for zero-copy views of the mapping; unset for the default, copies.
const loadOptions = () => (P.copy === false ? { copy: false } : {})
cases['load-ours-loadfile'] = {
  setup: () => ({}),
  run: () => loaded(st.loadFile(P.path, loadOptions())),
  call: () => loaded(st.loadFile(P.path, loadOptions())),
  callAsync: async () => loaded(await st.loadFileAsync(P.path, loadOptions())),
  check: loadCheck,
}
cases['load-ours-open-get'] = {
  setup: () => ({}),
  run: () => {
    const f = st.SafeTensorsFile.open(P.path)
    const all = f.tensorNames.map((name) => f.getTensor(name).data)
    return { n: count(all), sum: P.touch ? sumAll(all) : null, all }
  },
  check: loadCheck,
}
cases['load-js'] = {
  setup: () => ({}),
  run: () => {
    const all = Object.values(f32Views(readFileSync(P.path)))
    return { n: count(all), sum: P.touch ? sumAll(all) : null, all }
  },
  check: loadCheck,
}

// Row 3: save ----------------------------------------------------------------------------
function saveInputs() {
  // Fresh, owned arrays (as a user's would be), not views of the source file.
  const tensors = {}
  for (const [name, t] of Object.entries(st.loadFile(P.src, { copy: true }))) {
    tensors[name] = { dtype: t.dtype, shape: t.shape, data: t.data }
  }
  return tensors
}
const saveBefore = () => {
  rm(P.out)
  syncDisks()
}
cases['save-ours'] = {
  setup: () => ({ tensors: saveInputs() }),
  before: saveBefore,
  run: (c) => {
    const options = P.durable ? { durable: true } : undefined
    return P.async ? st.saveFileAsync(P.out, c.tensors, options) : st.saveFile(P.out, c.tensors, options)
  },
  check: () => ({ bytes: readFileSync(P.out).length }),
}
cases['save-js-write'] = {
  // The bound: the same bytes (the source file is what the writers produce) written by fs.
  setup: () => ({ bytes: readFileSync(P.src) }),
  before: saveBefore,
  run: (c) => {
    if (!P.fsync) return writeFileSync(P.out, c.bytes)
    const tmp = `${P.out}.tmp`
    const fd = openSync(tmp, 'w')
    let off = 0
    while (off < c.bytes.length) off += writeSync(fd, c.bytes, off, c.bytes.length - off)
    fsyncSync(fd)
    closeSync(fd)
    renameSync(tmp, P.out)
  },
  check: () => ({ bytes: readFileSync(P.out).length }),
}

// Row 4: predict -------------------------------------------------------------------------
function loadModel() {
  return P.kind === 'linear'
    ? st.LinearRegression.loadSafetensors(P.model)
    : st.LogisticRegression.loadSafetensors(P.model)
}
const predictCheck = (_, out) => ({ n: out.length, sum: strideSum(out, 7) })
const predictSync = (c) => (P.kind === 'linear' ? c.m.predict(c.x) : c.m.predictProba(c.x))
const predictAsync = (c) => (P.kind === 'linear' ? c.m.predictAsync(c.x) : c.m.predictProbaAsync(c.x))
cases['predict-ours'] = {
  setup: () => ({ m: loadModel(), x: { data: features(P.rows, P.cols), rows: P.rows, cols: P.cols } }),
  run: (c) => (P.async ? predictAsync(c) : predictSync(c)),
  call: predictSync,
  callAsync: predictAsync,
  check: predictCheck,
}
cases['predict-ort'] = {
  setup: async () => {
    const ort = require('onnxruntime-node')
    const session = await ort.InferenceSession.create(P.onnx)
    const output = P.kind === 'linear' ? 'variable' : 'probabilities'
    const input = new ort.Tensor('float32', features(P.rows, P.cols), [P.rows, P.cols])
    return { session, output, input, ortVersion: require('onnxruntime-node/package.json').version }
  },
  run: async (c) => (await c.session.run({ input: c.input }, [c.output]))[c.output].data,
  check: predictCheck,
}
cases['predict-js'] = {
  setup: () => {
    const m = loadModel()
    return { coef: Float64Array.from(m.coefficients), b: P.kind === 'linear' ? m.intercept : Float64Array.from(m.intercept), x: features(P.rows, P.cols) }
  },
  run: (c) => {
    const { coef, b, x } = c
    const { rows, cols } = P
    if (P.kind === 'linear') {
      const out = new Float32Array(rows)
      for (let r = 0, o = 0; r < rows; r++, o += cols) {
        let s = b
        for (let j = 0; j < cols; j++) s += x[o + j] * coef[j]
        out[r] = s
      }
      return out
    }
    const k = b.length === 1 ? 2 : b.length
    const out = new Float32Array(rows * k)
    if (k === 2) {
      const b0 = b[0]
      for (let r = 0, o = 0; r < rows; r++, o += cols) {
        let z = b0
        for (let j = 0; j < cols; j++) z += x[o + j] * coef[j]
        const p = 1 / (1 + Math.exp(-z))
        out[2 * r] = 1 - p
        out[2 * r + 1] = p
      }
      return out
    }
    const z = new Float64Array(k)
    for (let r = 0, o = 0; r < rows; r++, o += cols) {
      let max = -Infinity
      for (let c = 0; c < k; c++) {
        let s = b[c]
        const w = c * cols
        for (let j = 0; j < cols; j++) s += x[o + j] * coef[w + j]
        z[c] = s
        if (s > max) max = s
      }
      let total = 0
      for (let c = 0; c < k; c++) total += (z[c] = Math.exp(z[c] - max))
      for (let c = 0; c < k; c++) out[r * k + c] = z[c] / total
    }
    return out
  },
  check: predictCheck,
}

// Row 5: quantize ------------------------------------------------------------------------
cases['quant-ours'] = {
  setup: () => ({}),
  before: () => {
    rm(P.out)
    syncDisks()
  },
  run: () => st.convert(P.path, P.out, { to: 'gguf', quantization: P.q }),
  check: (_, report) => ({ fileBytes: report.outputBytes }),
}
cases['llama-ours'] = {
  setup: () => ({}),
  before: () => {
    rm(P.out)
    syncDisks()
  },
  // maxShardBytes (row 16): a split GGUF, its files beside P.out.
  run: () => st.convert(P.dir, P.out, { to: 'gguf', quantization: P.q, ...(P.maxShardBytes ? { maxShardBytes: P.maxShardBytes } : {}) }),
  check: (_, report) => ({ fileBytes: report.outputBytes, architecture: report.architecture, files: report.files?.length }),
}
cases['quant-io'] = {
  // The file I/O inside convert, without the conversion: map the input and touch each page
  // (warm page cache), then write an output-sized buffer to a temp file and rename it (what
  // convert does by default: no fsync).
  setup: () => ({ out: Buffer.alloc(P.outBytes, 1) }),
  before: () => {
    rm(P.out)
    syncDisks()
  },
  run: (c) => {
    const f = st.SafeTensorsFile.open(P.path)
    const raw = f.getTensor(f.tensorNames[0], { as: 'raw' }).data
    let s = 0
    for (let i = 0; i < raw.length; i += 4096) s += raw[i]
    const tmp = `${P.out}.tmp`
    const fd = openSync(tmp, 'w')
    let off = 0
    while (off < c.out.length) off += writeSync(fd, c.out, off, c.out.length - off)
    closeSync(fd)
    renameSync(tmp, P.out)
    return s
  },
  check: () => ({}),
}

// Row 6: dequantize a GGUF tensor of one ggml type --------------------------------------
cases['dequant-ours'] = {
  setup: () => ({}),
  before: () => {
    rm(P.out)
    syncDisks()
  },
  run: () => st.convert(P.path, P.out, { to: 'safetensors' }),
  check: () => {
    const f = st.SafeTensorsFile.open(P.out)
    const a = f.getTensor(f.tensorNames[0]).data
    return { n: a.length, sum: strideSum(a) }
  },
}
cases['dequant-io'] = {
  // The file I/O inside that convert: read the input (warm page cache) and write an
  // output-sized file, renamed into place.
  setup: () => ({ out: Buffer.alloc(P.outBytes, 1) }),
  before: () => {
    rm(P.out)
    syncDisks()
  },
  run: (c) => {
    const raw = readFileSync(P.path)
    const tmp = `${P.out}.tmp`
    const fd = openSync(tmp, 'w')
    let off = 0
    while (off < c.out.length) off += writeSync(fd, c.out, off, c.out.length - off)
    closeSync(fd)
    renameSync(tmp, P.out)
    return raw.length
  },
  check: () => ({}),
}

// Row 7: a llama-quantize preset of a whole model ------------------------------------------
cases['preset-ours'] = {
  setup: () => ({}),
  before: () => {
    rm(P.out)
    syncDisks()
  },
  run: () => st.convert(P.path, P.out, { to: 'gguf', quantization: P.preset }),
  check: (_, report) => ({ tensors: report.tensors }),
}
// (llama-quantize, row 7's peer, runs under benches/lib/exec_rusage.py: a Node parent's peak
// RSS would be this process's, not the program's.)

// Row 6, in memory: getTensor of a GGUF file's block tensor, decoded to F32 ----------------
// The file is opened (mapped) once, untimed; each call decodes the tensor into a new array.
const asF32 = { as: 'F32' }
cases['gguf-get'] = {
  setup: () => ({ f: st.GgufFile.open(P.path) }),
  run: (c) => c.f.getTensor(P.name, asF32).data,
  call: (c) => c.f.getTensor(P.name, asF32).data,
  callAsync: async (c) => (await c.f.getTensorAsync(P.name, asF32)).data,
  check: (_, out) => ({ n: out.length, sum: strideSum(out) }),
}

// Row 9: a whole checkpoint, every tensor as F32 ---------------------------------------------
// Each repetition loads the directory afresh (a user loads a checkpoint once per process) and
// keeps every array until the next one; the fingerprint sums a stride of every tensor. Before
// each, the previous one's arrays are collected and finalized, with a pause between two
// collections: every load starts from memory as a fresh process's would, with none of the
// previous load's outputs still waiting for Node to finalize them.
const freshStart = async () => {
  await collect()
  await new Promise((resolve) => setTimeout(resolve, 2000))
  await collect()
}
function checkpointCheck(_, arrays) {
  let n = 0
  let sum = 0
  for (const a of arrays) {
    n += a.length
    sum += strideSum(a, 4099)
  }
  return { n, sum }
}
cases['ckpt-ours-sync'] = {
  setup: () => ({}),
  before: freshStart,
  run: async () => {
    const m = await st.Model.loadPretrained(P.dir, { as: 'F32' })
    const arrays = []
    for (const name of m.tensorNames) arrays.push(m.getTensor(name).data)
    return arrays
  },
  check: checkpointCheck,
}
cases['ckpt-ours-async'] = {
  setup: () => ({}),
  before: freshStart,
  run: async () => {
    const m = await st.Model.loadPretrained(P.dir, { as: 'F32' })
    return Object.values(await m.tensorsAsync()).map((t) => t.data)
  },
  check: checkpointCheck,
}
cases['ckpt-ours-open'] = {
  setup: () => ({}),
  run: async () => {
    const m = await st.Model.loadPretrained(P.dir, { as: 'F32' })
    return { n: m.numParameters, sum: null, m }
  },
  check: (_, r) => ({ n: r.n }),
}

// Row 10: a pytorch_model.bin → model.safetensors (convert.py's work) -----------------------
cases['pytorch-ours'] = {
  setup: () => ({}),
  before: () => {
    rm(P.out)
    syncDisks()
  },
  run: () => st.convert(P.path, P.out, { to: 'safetensors' }),
  check: (_, report) => ({ tensors: report.tensors, dropped: report.dropped?.length }),
}

// Row 11: an .npz read, every array touched once per 4 KiB ----------------------------------
// (numpy.load reads each member into memory; a stored .npz's members are views of our mapping,
// so the touch makes both pay for the bytes they return.)
const touch = (a) => {
  let s = 0
  for (let i = 0; i < a.length; i += 1024) s += a[i]
  return s
}
cases['npz-ours'] = {
  setup: () => ({}),
  run: () => {
    const f = st.openWeightsSync(P.path)
    const out = []
    let s = 0
    for (const name of f.tensorNames) {
      const a = f.getTensor(name).data
      s += touch(a)
      out.push(a)
    }
    return { out, s, f }
  },
  check: (_, r) => checkpointCheck(_, r.out),
}
cases['npz-ours-async'] = {
  setup: () => ({}),
  run: async () => {
    const f = await st.openWeights(P.path)
    const out = []
    let s = 0
    for (const name of f.tensorNames) {
      const a = (await f.getTensorAsync(name)).data
      s += touch(a)
      out.push(a)
    }
    return { out, s, f }
  },
  check: (_, r) => checkpointCheck(_, r.out),
}
cases['read-js'] = {
  // The bound of reading a file: `readFileSync` of its bytes, touched once per 4 KiB.
  setup: () => ({}),
  run: () => {
    const b = readFileSync(P.path)
    let s = 0
    for (let i = 0; i < b.length; i += 4096) s += b[i]
    return { n: b.length, s }
  },
  check: () => ({}),
}

// Rows 12–14: download from a local Hub, verify, diff ----------------------------------------
/** Files and bytes of a snapshot directory (its links followed). */
function snapshotCheck(dir) {
  let n = 0
  let bytes = 0
  for (const e of readdirSync(dir, { withFileTypes: true, recursive: true })) {
    if (e.isDirectory()) continue
    n++
    bytes += statSync(join(e.parentPath ?? e.path, e.name)).size
  }
  return { n, bytes }
}
cases['download-ours'] = {
  setup: () => ({}),
  before: () => rmSync(P.cache, { recursive: true, force: true }),
  run: () => st.download(P.id, { cacheDir: P.cache, endpoint: P.endpoint }),
  check: (_, dir) => snapshotCheck(dir),
}
cases['verify-ours'] = {
  setup: () => ({}),
  run: () => st.verify(P.dir),
  check: (_, r) => ({ n: r.files.length, bytes: r.files.reduce((s, f) => s + f.bytes, 0), ok: r.ok }),
}
cases['diff-ours'] = {
  setup: () => ({}),
  run: () => st.diff(P.a, P.b),
  check: (_, r) => ({ n: r.summary.numel, sum: r.summary.meanAbs * r.summary.numel }),
}

// ---------------------------------------------------------------------------------------

let spec = cases[caseName]
if (!spec) throw new Error(`unknown case ${caseName}`)
// P.loop = K: each repetition makes K calls — in one loop that never yields ('sync'), or each
// awaited ('async') — and the time per call is reported.
const loopCalls = P.loop ?? 1
if (P.loop) {
  const base = spec
  const f = P.loopMode === 'async' ? base.callAsync : base.call
  if (!f) throw new Error(`case ${caseName} has no ${P.loopMode} call to repeat`)
  spec = {
    ...base,
    run: P.loopMode === 'async'
      ? async (c) => {
          let r = null
          for (let k = 0; k < P.loop; k++) r = await f(c)
          return r
        }
      : (c) => {
          let r = null
          for (let k = 0; k < P.loop; k++) r = f(c)
          return r
        },
  }
}
const ctx = await spec.setup()
const times = []
let warmupMs = null
let last = null
// reps 0: this process is fresh for its one timed run (no warm-up, nothing before it).
const fresh = reps === 0
for (let i = 0; i <= reps; i++) {
  if (spec.before && !fresh) await spec.before(ctx)
  if (!fresh) await collect()
  const t0 = performance.now()
  let r = spec.run(ctx)
  if (r && typeof r.then === 'function') r = await r
  const ms = (performance.now() - t0) / loopCalls
  if (i === 0 && !fresh) warmupMs = ms
  else times.push(ms)
  if (i === reps) last = r
  r = null
}
const check = spec.check(ctx, last)
last = null
await collect()
const result = {
  case: caseName,
  times_ms: times,
  warmup_ms: warmupMs,
  max_rss_kib: peakRssKib(process.resourceUsage().maxRSS),
  ru_maxrss_kib: process.resourceUsage().maxRSS,
  rss_start_kib: rssStart,
  check,
  info: { node: process.version, ort: ctx.ortVersion },
}
process.stdout.write(`RESULT ${JSON.stringify(result)}\n`)

// Child process of hostile-args.spec.ts (run with --expose-gc): calls every binding entry that
// takes a buffer with arguments whose getters, Proxy traps and element accessors detach,
// transfer, resize or rewrite the buffers while the call converts its arguments, and checks
// each outcome: the right data (the file, bytes or result equal what the arrays hold when the
// call takes them), or ERR_INVALID_ARGUMENT — never a crash, never other bytes.
//
//   node --expose-gc hostile_args.cjs cases DIR           the fixed table of cases
//   node --expose-gc hostile_args.cjs random DIR SEED N   N generated tensor maps
//
// Prints one JSON line per case: { id, outcome, expected, ok, why? }, then "done".
'use strict'
const fs = require('node:fs')
const path = require('node:path')
const { MessageChannel } = require('node:worker_threads')
const st = require('../../index.js')
// Internal entries of the binding (the HTTP layer's), wrapped by index.js like the public ones.
const binding = require('../../binding.js')

const [mode, dir, seedArg, countArg] = process.argv.slice(2)
if (typeof global.gc !== 'function') throw new Error('run with --expose-gc')

// ------------------------------------------------------------------------------------------
// Ways to take a buffer away, all from plain JavaScript.

/** Buffers this script detached (a detached buffer's byteLength is 0, as an empty one's). */
const detached = new WeakSet()
function detach(buffer) {
  structuredClone(buffer, { transfer: [buffer] })
  detached.add(buffer)
}
/** `ArrayBuffer.prototype.transfer` where Node has it (≥ 21), else a MessagePort transfer. */
function transfer(buffer) {
  if (typeof buffer.transfer === 'function') buffer.transfer()
  else {
    const { port1, port2 } = new MessageChannel()
    port1.postMessage(buffer, [buffer])
    port1.close()
    port2.close()
  }
  detached.add(buffer)
}
/** Keep garbage that may land where freed buffers were: a use-after-free reads this marker. */
let garbage = []
const MARKER = 0x5a
function collect() {
  global.gc()
  global.gc()
  garbage = Array.from({ length: 32 }, () => new Uint8Array(64 * 1024).fill(MARKER))
}

const ACTIONS = {
  detach: (t) => detach(t.buffer),
  transfer: (t) => transfer(t.buffer),
  'detach+gc': (t) => {
    detach(t.buffer)
    collect()
  },
  shrink: (t) => t.buffer.resize(Math.floor(t.buffer.byteLength / 2)),
  grow: (t) => {
    const before = t.buffer.byteLength
    t.buffer.resize(before * 2)
    new Uint8Array(t.buffer, before).fill(0x3c)
  },
  'shrink-to-0': (t) => t.buffer.resize(0),
  rewrite: (t) => new Uint8Array(t.buffer, t.byteOffset, t.byteLength).fill(0x41),
  gc: () => collect(),
}

// ------------------------------------------------------------------------------------------
// Typed arrays over the kinds of buffer a caller can have.

const KINDS = [Float32Array, Float64Array, Uint8Array, Int16Array, Int32Array, BigInt64Array, Uint32Array, Int8Array]
const DTYPE = new Map([
  [Float32Array, 'F32'], [Float64Array, 'F64'], [Uint8Array, 'U8'], [Int16Array, 'I16'], [Int32Array, 'I32'],
  [BigInt64Array, 'I64'], [Uint32Array, 'U32'], [Int8Array, 'I8'],
])

/** `n` elements of `Kind` over a buffer of style `style`, filled with a pattern from `seed`. */
function makeArray(Kind, n, style, seed) {
  const size = Kind.BYTES_PER_ELEMENT * n
  let array
  if (style === 'plain') array = new Kind(n)
  else if (style === 'resizable') array = new Kind(new ArrayBuffer(size, { maxByteLength: size * 4 + 64 }))
  else if (style === 'fixed-on-resizable') array = new Kind(new ArrayBuffer(size, { maxByteLength: size * 4 + 64 }), 0, n)
  else if (style === 'offset') array = new Kind(new ArrayBuffer(size + 2 * Kind.BYTES_PER_ELEMENT * 8), Kind.BYTES_PER_ELEMENT * 8, n)
  else throw new Error(style)
  const bytes = new Uint8Array(array.buffer, array.byteOffset, array.byteLength)
  for (let i = 0; i < bytes.length; i++) bytes[i] = (seed * 31 + i * 7) & 0xff
  return array
}

const bytesOf = (a) => Buffer.from(new Uint8Array(a.buffer, a.byteOffset, a.byteLength))
const numel = (shape) => shape.reduce((n, d) => n * d, 1)

// ------------------------------------------------------------------------------------------
// The oracle for tensor maps: every getter records what it returned; after the call, the
// outcome must be ERR_INVALID_ARGUMENT if any array read is detached or no longer matches its
// shape, else exactly the arrays' bytes (as the call found them: nothing runs JS after it has
// read the last property).

/** A tensor entry whose properties are getters running `hooks[prop]` before returning. */
function entry(spec, seen, hooks = {}) {
  const record = { name: spec.name }
  seen.push(record)
  const obj = {}
  for (const prop of ['dtype', 'shape', 'data']) {
    if (!(prop in spec)) continue
    Object.defineProperty(obj, prop, {
      enumerable: true,
      get() {
        for (const h of hooks[prop] ?? []) h()
        const value = typeof spec[prop] === 'function' ? spec[prop]() : spec[prop]
        record[prop] = value
        return value
      },
    })
  }
  return obj
}

function expectedOutcome(seen) {
  const tensors = []
  for (const r of seen) {
    const data = r.data
    if (Array.isArray(data)) {
      if (data.length !== numel(r.shape)) return { code: 'ERR_INVALID_ARGUMENT' }
      tensors.push({ name: r.name, dtype: r.dtype ?? 'F32', shape: r.shape, bytes: Buffer.from(new Float32Array(data).buffer) })
      continue
    }
    if (detached.has(data.buffer)) return { code: 'ERR_INVALID_ARGUMENT' }
    if (data.byteLength !== numel(r.shape) * data.BYTES_PER_ELEMENT) return { code: 'ERR_INVALID_ARGUMENT' }
    tensors.push({ name: r.name, dtype: r.dtype ?? DTYPE.get(data.constructor), shape: r.shape, bytes: bytesOf(data) })
  }
  return { tensors }
}

/** Tensors of a SafeTensors file, read here in JS (not by the code under test). */
function parseSafetensors(buf) {
  const n = Number(buf.readBigUInt64LE(0))
  const header = JSON.parse(buf.subarray(8, 8 + n).toString('utf8'))
  const data = buf.subarray(8 + n)
  const out = new Map()
  for (const [name, t] of Object.entries(header)) {
    if (name === '__metadata__') continue
    out.set(name, { dtype: t.dtype, shape: t.shape, bytes: data.subarray(t.data_offsets[0], t.data_offsets[1]) })
  }
  return out
}

function compareFile(buf, expected) {
  const got = parseSafetensors(buf)
  if (got.size !== expected.tensors.length) return `file has ${got.size} tensors, expected ${expected.tensors.length}`
  for (const t of expected.tensors) {
    const g = got.get(t.name)
    if (!g) return `tensor ${t.name} missing`
    if (g.dtype !== t.dtype) return `${t.name}: dtype ${g.dtype}, expected ${t.dtype}`
    if (JSON.stringify(g.shape) !== JSON.stringify(t.shape)) return `${t.name}: shape ${g.shape}, expected ${t.shape}`
    if (!g.bytes.equals(t.bytes)) {
      const marker = g.bytes.indexOf(MARKER) >= 0 && t.bytes.indexOf(MARKER) < 0 ? ' (holds the garbage marker)' : ''
      return `${t.name}: bytes differ${marker}`
    }
  }
  return null
}

const results = []
function report(id, outcome, expected, why) {
  const line = { id, outcome, expected, ok: !why }
  if (why) line.why = why
  results.push(line)
  process.stdout.write(JSON.stringify(line) + '\n')
}

const describeExpected = (e) => (e.code ? e.code : 'data')

/** Check a settled call against the oracle; `output` is the file or bytes it produced. */
function judge(id, expected, error, output) {
  if (error) {
    const code = error.code
    if (expected.code && code === expected.code) return report(id, code, expected.code)
    return report(id, String(code), describeExpected(expected), `${error.message}`)
  }
  if (expected.code) return report(id, 'data', expected.code, 'the call succeeded')
  const why = compareFile(output, expected)
  report(id, 'data', 'data', why)
}

let fileNo = 0
const nextPath = () => path.join(dir, `t${fileNo++}.safetensors`)

/** Run one tensor-map entry point on `tensors` (built with `seen` recording) and judge it. */
async function runTensors(id, fn, tensors, seen, options, after) {
  const out = nextPath()
  let error = null
  let output = null
  if (fn === 'saveFileAsync') {
    let promise
    try {
      promise = st.saveFileAsync(out, tensors, options)
    } catch (e) {
      error = e
    }
    // The call has returned: its input is copied. Whatever happens to the arrays now must not
    // reach the file.
    const expected = expectedOutcome(seen)
    if (after) after()
    if (!error) {
      try {
        await promise
      } catch (e) {
        error = e
      }
    }
    if (!error) output = fs.readFileSync(out)
    return judge(id, expected, error, output)
  }
  try {
    if (fn === 'saveFile') {
      st.saveFile(out, tensors, options)
      output = fs.readFileSync(out)
    } else if (fn === 'serialize') {
      output = st.serialize(tensors, options)
    } else throw new Error(fn)
  } catch (e) {
    error = e
  }
  judge(id, expectedOutcome(seen), error, output)
}

// ------------------------------------------------------------------------------------------
// The fixed table.

const TENSOR_FNS = ['saveFile', 'saveFileAsync', 'serialize']
const VICTIM_ACTIONS = [
  ['detach', 'plain'],
  ['transfer', 'plain'],
  ['detach+gc', 'plain'],
  ['shrink', 'resizable'],
  ['shrink', 'fixed-on-resizable'],
  ['grow', 'resizable'],
  ['shrink-to-0', 'resizable'],
  ['rewrite', 'plain'],
  ['gc', 'plain'],
]
/** Where the hostile JavaScript runs while the call reads its arguments. */
const HOOK_POINTS = [
  'later entry shape getter',
  'later entry dtype getter',
  'later entry data getter',
  'victim shape getter (after its data is known)',
  'tensor map Proxy ownKeys',
  'tensor map Proxy get',
  'options.metadata getter',
  'options.durable getter',
]

function tensorCase(fn, hookPoint, action, style, victimShape) {
  const seen = []
  const victim = makeArray(Float32Array, 1024, style, 1)
  const act = () => ACTIONS[action](victim)
  // The victim's shape: fixed, or (when the hook is in its own shape getter) what it holds then.
  const shapeOf = victimShape === 'current' ? () => [victim.length] : [1024]
  const entries = {}
  // The victim is read first, so a later hook finds its bytes already known to the old code.
  entries.a = entry({ name: 'a', shape: shapeOf, data: victim }, seen, hookPoint.startsWith('victim') ? { shape: [act] } : {})
  const later = { name: 'b', dtype: 'F32', shape: [4], data: new Float32Array([1, 2, 3, 4]) }
  const hooks = {}
  if (hookPoint === 'later entry shape getter') hooks.shape = [act]
  if (hookPoint === 'later entry dtype getter') hooks.dtype = [act]
  if (hookPoint === 'later entry data getter') hooks.data = [act]
  entries.b = entry(later, seen, hooks)
  let tensors = entries
  if (hookPoint === 'tensor map Proxy ownKeys') {
    tensors = new Proxy(entries, { ownKeys(t) { act(); return Reflect.ownKeys(t) } })
  } else if (hookPoint === 'tensor map Proxy get') {
    let n = 0
    tensors = new Proxy(entries, { get(t, k) { if (k === 'b' && n++ === 0) act(); return Reflect.get(t, k) } })
  }
  let options
  if (hookPoint === 'options.metadata getter') options = { metadata: { get note() { act(); return 'x' } } }
  if (hookPoint === 'options.durable getter') options = { get durable() { act(); return false } }
  return { tensors, seen, options }
}

async function tensorCases() {
  for (const fn of TENSOR_FNS) {
    for (const hookPoint of HOOK_POINTS) {
      for (const [action, style] of VICTIM_ACTIONS) {
        // The victim's own shape getter: the shape is read after the hook, with its length then.
        const victimShape = hookPoint.startsWith('victim') ? 'current' : 'fixed'
        const { tensors, seen, options } = tensorCase(fn, hookPoint, action, style, victimShape)
        const id = `${fn} | ${hookPoint} | ${action} (${style})`
        await runTensors(id, fn, tensors, seen, options, () => {
          // After an async call returned: take everything away, then collect.
          for (const r of seen) if (r.data && r.data.buffer && !detached.has(r.data.buffer)) detach(r.data.buffer)
          collect()
        })
      }
    }
  }
  // Inputs that are refused whatever happens.
  const refused = [
    ['SharedArrayBuffer view', () => new Float32Array(new SharedArrayBuffer(16))],
    ['detached before the call', () => { const a = new Float32Array(4); detach(a.buffer); return a }],
  ]
  for (const fn of TENSOR_FNS) {
    for (const [what, make] of refused) {
      const tensors = { a: { shape: [4], data: make() } }
      const id = `${fn} | ${what}`
      let error = null
      try {
        if (fn === 'saveFile') st.saveFile(nextPath(), tensors)
        else if (fn === 'serialize') st.serialize(tensors)
        else await st.saveFileAsync(nextPath(), tensors)
      } catch (e) {
        error = e
      }
      judge(id, { code: 'ERR_INVALID_ARGUMENT' }, error, null)
    }
  }
}

/** The remote reader of `file` (bytes in memory), opened through the core's opener. */
function remoteOf(file) {
  const opener = binding.RemoteOpener.create('mem://file', 'file', null)
  for (;;) {
    const step = opener.step()
    if (!Array.isArray(step)) return step
    for (const r of step) opener.reply(r.id, file.subarray(r.start, Math.min(r.end, file.length)), file.length)
  }
}

// RemoteWeights#serve(name, bytes, options) and #serveSlice(name, ranges, bytes, options): the
// options and the ranges' elements are read while `bytes` is already an argument.
async function serveCases() {
  // `w` (1024 F32, 4096 bytes) read by its range: the file is larger than the first range.
  const file = st.serialize({ w: { shape: [1024], data: new Float32Array(1024) }, pad: { shape: [30_000], data: new Float32Array(30_000) } })
  const remote = remoteOf(file)
  const hookPoints = ['options.as getter', 'options.copy getter', 'ranges element getter']
  const actions = [
    ['detach', 'plain'], ['transfer', 'plain'], ['detach+gc', 'plain'], ['shrink', 'resizable'],
    ['shrink', 'fixed-on-resizable'], ['grow', 'resizable'], ['rewrite', 'plain'], ['gc', 'plain'],
  ]
  for (const hookPoint of hookPoints) {
    for (const [action, style] of actions) {
      for (const as of ['native', 'F64', 'raw']) {
        const bytes = makeArray(Uint8Array, 4096, style, 3)
        const act = () => ACTIONS[action](bytes)
        const options = { copy: false, as }
        if (hookPoint === 'options.as getter') Object.defineProperty(options, 'as', { get() { act(); return as } })
        if (hookPoint === 'options.copy getter') Object.defineProperty(options, 'copy', { get() { act(); return false } })
        const range = [0, 1024]
        if (hookPoint === 'ranges element getter') Object.defineProperty(range, 0, { get() { act(); return 0 } })
        const id = `RemoteWeights#serve | ${hookPoint} | ${action} (${style}) | as ${as}`
        let error = null
        let t = null
        try {
          t = hookPoint === 'ranges element getter' ? remote.serveSlice('w', [range], bytes, options) : remote.serve('w', bytes, options)
        } catch (e) {
          error = e
        }
        const expected = detached.has(bytes.buffer) || bytes.byteLength !== 4096 ? { code: 'ERR_INVALID_ARGUMENT' } : { bytes: bytesOf(bytes) }
        if (error) {
          judge(id, expected, error, null)
          continue
        }
        if (expected.code) {
          report(id, 'data', expected.code, 'the call succeeded')
          continue
        }
        const want = new Float32Array(new Uint8Array(expected.bytes).buffer)
        let why = null
        if (as === 'raw') why = Buffer.from(t.data.buffer, t.data.byteOffset, t.data.byteLength).equals(expected.bytes) ? null : 'raw bytes differ'
        else {
          for (let i = 0; i < want.length && !why; i++) if (!Object.is(t.data[i], as === 'F64' ? want[i] : want[i])) why = `element ${i}: ${t.data[i]} != ${want[i]}`
          if (t.data.length !== want.length) why = `length ${t.data.length}`
        }
        report(id, 'data', 'data', why)
      }
    }
  }
}

// Single-buffer entries: nothing runs JavaScript during their conversion, but a buffer that is
// already detached or shared must be refused, and a resized one read at its current size.
async function singleBufferCases() {
  const file = st.serialize({ w: { shape: [2], data: new Float32Array([1, 2]) } })
  const cases = {
    'SafeTensorsFile.fromBytes': [file, (b) => st.SafeTensorsFile.fromBytes(b).getTensor('w').data],
    // The first reply: the whole (small) file, then served from memory.
    'RemoteOpener#reply': [file, (b) => {
      const opener = binding.RemoteOpener.create('mem://file', 'file', null)
      const [r] = opener.step()
      opener.reply(r.id, b, file.length)
      return opener.step().serve('w', null).data
    }],
  }
  for (const [fn, [src, call]] of Object.entries(cases)) {
    const variants = [
      ['detached', () => { const b = new Uint8Array(src); detach(b.buffer); return b }, 'ERR_INVALID_ARGUMENT'],
      ['SharedArrayBuffer view', () => { const b = new Uint8Array(new SharedArrayBuffer(src.length)); b.set(src); return b }, 'ERR_INVALID_ARGUMENT'],
      ['a Float32Array', () => new Float32Array(4), 'ERR_INVALID_ARGUMENT'],
      ['resized before the call', () => {
        const b = new Uint8Array(new ArrayBuffer(src.length, { maxByteLength: src.length * 2 }))
        b.set(src)
        b.buffer.resize(src.length * 2)
        b.buffer.resize(src.length)
        return b
      }, null],
    ]
    for (const [what, make, code] of variants) {
      const id = `${fn} | ${what}`
      let error = null
      let value = null
      try {
        value = call(make())
      } catch (e) {
        error = e
      }
      const wrongData = Array.from(value ?? []).join() !== '1,2'
      if (code) judge(id, { code }, error, null)
      else if (error) report(id, String(error.code), 'data', error.message)
      else report(id, 'data', 'data', wrongData ? `read ${Array.from(value)}` : null)
    }
  }
}

// Matrices of the classical models and Model.predict: x = { data, rows, cols } and y.
async function matrixCases() {
  const rows = 64
  const cols = 4
  const fitX = new Float64Array(rows * cols).map((_, i) => Math.sin(i))
  const fitY = Array.from({ length: rows }, (_, r) => fitX[r * cols] * 2 + fitX[r * cols + 1] - 1)
  const labels = fitY.map((v) => (v > -1 ? 1 : 0))
  const linear = new st.LinearRegression().fit({ data: fitX, rows, cols }, fitY)
  const logistic = new st.LogisticRegression().fit({ data: fitX, rows, cols }, labels)
  const modelDir = path.join(dir, 'linear-model')
  await linear.save(modelDir)
  const model = st.Model.loadPretrainedSync(modelDir)

  const calls = {
    'LinearRegression#predict': (x) => linear.predict(x),
    'LinearRegression#predictAsync': (x) => linear.predictAsync(x),
    'LinearRegression#score': (x, y) => linear.score(x, y),
    'LinearRegression#fit': (x, y) => new st.LinearRegression().fit(x, y).coefficients,
    'LogisticRegression#predict': (x) => logistic.predict(x),
    'LogisticRegression#predictProba': (x) => logistic.predictProba(x),
    'LogisticRegression#predictAsync': (x) => logistic.predictAsync(x),
    'LogisticRegression#predictProbaAsync': (x) => logistic.predictProbaAsync(x),
    'LogisticRegression#score': (x, y) => logistic.score(x, y),
    'LogisticRegression#fit': (x, y) => new st.LogisticRegression().fit(x, y).coefficients,
    'Model#predict': (x) => model.predict(x),
  }
  const usesY = (name) => /#(fit|score)$/.test(name)
  const yFor = (name) => (name.startsWith('Logistic') ? labels : fitY)
  const hookPoints = ['x.rows getter', 'x.cols getter', 'x.data getter', 'y element getter', 'y typed array, x.rows getter']
  const actions = [['detach', 'plain'], ['transfer', 'plain'], ['detach+gc', 'plain'], ['shrink', 'resizable'], ['grow', 'resizable'], ['rewrite', 'plain'], ['gc', 'plain']]
  for (const [name, call] of Object.entries(calls)) {
    for (const hookPoint of hookPoints) {
      if (hookPoint.startsWith('y') && !usesY(name)) continue
      for (const [action, style] of actions) {
        const data = makeArray(Float64Array, rows * cols, 'plain', 0)
        data.set(fitX)
        let victimData = data
        if (style === 'resizable') {
          victimData = new Float64Array(new ArrayBuffer(data.byteLength, { maxByteLength: data.byteLength * 4 }))
          victimData.set(fitX)
        }
        const yTyped = hookPoint === 'y typed array, x.rows getter'
        const y = yTyped ? makeArray(Float64Array, rows, style, 0) : yFor(name).slice()
        if (yTyped) y.set(yFor(name))
        // The victim: y's buffer when y is a typed array, else x.data's.
        const victim = yTyped ? y : victimData
        const act = () => ACTIONS[action](victim)
        let seenRows = rows
        const x = { cols }
        Object.defineProperty(x, 'rows', { enumerable: true, get() { if (hookPoint.includes('x.rows')) act(); seenRows = rows; return rows } })
        Object.defineProperty(x, 'data', { enumerable: true, get() { if (hookPoint === 'x.data getter') act(); return victimData } })
        if (hookPoint === 'x.cols getter') Object.defineProperty(x, 'cols', { get() { act(); return cols } })
        let yArg = y
        if (hookPoint === 'y element getter') {
          yArg = y.slice()
          Object.defineProperty(yArg, 0, { get() { act(); return y[0] } })
        }
        const id = `${name} | ${hookPoint} | ${action} (${style})`
        let error = null
        let value = null
        let expected
        try {
          const r = call(x, yArg)
          // The arguments are consumed once the call returns (async calls copied them).
          expected = matrixExpected(name, victimData, seenRows, cols, y, yTyped, calls)
          value = r
          if (r instanceof Promise) {
            // Take everything away before the task runs.
            if (!detached.has(victimData.buffer)) detach(victimData.buffer)
            collect()
            value = await r
          }
        } catch (e) {
          error = e
          expected = expected ?? matrixExpected(name, victimData, seenRows, cols, y, yTyped, calls)
        }
        if (error) {
          judge(id, expected, error, null)
          continue
        }
        if (expected.code) {
          report(id, 'data', expected.code, 'the call succeeded')
          continue
        }
        const got = typeof value === 'number' ? [value] : Array.from(value)
        const want = typeof expected.value === 'number' ? [expected.value] : Array.from(expected.value)
        const why = got.length === want.length && got.every((v, i) => Object.is(v, want[i])) ? null : `result differs: ${got.slice(0, 4)} vs ${want.slice(0, 4)}`
        report(id, 'data', 'data', why)
      }
    }
  }
}

/** What a matrix call must give for the arrays as they are now: computed on clean copies. */
function matrixExpected(name, data, rows, cols, y, yTyped, calls) {
  if (detached.has(data.buffer) || data.length !== rows * cols) return { code: 'ERR_INVALID_ARGUMENT' }
  if (yTyped && (detached.has(y.buffer) || y.length !== rows)) return { code: 'ERR_INVALID_ARGUMENT' }
  const clean = { data: new Float64Array(data), rows, cols }
  const cleanY = Array.from(y)
  try {
    return { value: calls[name.replace(/Async$/, '')](clean, cleanY) }
  } catch (e) {
    return { code: e.code }
  }
}

// ------------------------------------------------------------------------------------------
// Generated cases: random tensor maps whose getters and traps do random damage.

function rng(seed) {
  let s = seed >>> 0 || 1
  return () => {
    s ^= s << 13
    s >>>= 0
    s ^= s >>> 17
    s ^= s << 5
    s >>>= 0
    return s / 4294967296
  }
}

async function randomCases(seed, count) {
  const r = rng(seed)
  const pick = (xs) => xs[Math.floor(r() * xs.length)]
  const styles = ['plain', 'resizable', 'fixed-on-resizable', 'offset']
  for (let c = 0; c < count; c++) {
    const seen = []
    const n = 1 + Math.floor(r() * 4)
    const arrays = []
    const specs = []
    for (let i = 0; i < n; i++) {
      const name = `t${i}`
      if (r() < 0.15) {
        const values = Array.from({ length: 1 + Math.floor(r() * 8) }, () => Math.round(r() * 100))
        specs.push({ name, shape: [values.length], data: values })
        continue
      }
      const Kind = pick(KINDS)
      const len = 1 + Math.floor(r() * 3000)
      const style = pick(styles)
      const array = makeArray(Kind, len, style, c * 7 + i)
      arrays.push(array)
      const spec = { name, data: array }
      // The shape: as made, or what the array holds when the shape is read.
      spec.shape = r() < 0.5 ? [len] : () => [array.length]
      if (r() < 0.3) spec.dtype = DTYPE.get(Kind)
      specs.push(spec)
    }
    const randomDamage = () => {
      const k = Math.floor(r() * 3)
      for (let j = 0; j < k; j++) {
        if (arrays.length === 0) return
        const victim = pick(arrays)
        const buffer = victim.buffer
        if (detached.has(buffer)) continue
        const what = r()
        if (what < 0.2) detach(buffer)
        else if (what < 0.3) transfer(buffer)
        else if (what < 0.55 && buffer.resizable) buffer.resize(Math.floor(r() * buffer.maxByteLength))
        else if (what < 0.7) new Uint8Array(buffer).fill(Math.floor(r() * 256))
        else if (what < 0.8) collect()
      }
    }
    const tensors = {}
    for (const spec of specs) {
      const hooks = {}
      for (const prop of ['dtype', 'shape', 'data']) if (r() < 0.35) hooks[prop] = [randomDamage]
      tensors[spec.name] = entry(spec, seen, hooks)
    }
    let arg = tensors
    if (r() < 0.2) arg = new Proxy(tensors, { ownKeys(t) { randomDamage(); return Reflect.ownKeys(t) }, get(t, k) { randomDamage(); return Reflect.get(t, k) } })
    const options = r() < 0.2 ? { get metadata() { randomDamage(); return { a: 'b' } } } : undefined
    const fn = pick(TENSOR_FNS)
    await runTensors(`random ${seed}/${c} ${fn} (${specs.length} tensors)`, fn, arg, seen, options, () => {
      for (const a of arrays) if (!detached.has(a.buffer)) (r() < 0.5 ? detach(a.buffer) : new Uint8Array(a.buffer).fill(MARKER))
      collect()
    })
  }
}

async function main() {
  fs.mkdirSync(dir, { recursive: true })
  if (mode === 'cases') {
    await tensorCases()
    await serveCases()
    await singleBufferCases()
    await matrixCases()
  } else if (mode === 'random') {
    await randomCases(Number(seedArg), Number(countArg))
  } else throw new Error(`unknown mode ${mode}`)
  process.stdout.write('done\n')
}

main().catch((e) => {
  console.error(e)
  process.exit(3)
})

// Child process of hostile.spec.ts and pytorch.spec.ts: opens one file every way the package
// can, reads every tensor of an accepted file (an even sample of 10,000 when it has more), and
// prints one JSON line. Run in its own process so that a crash (or runaway allocation) cannot
// take the test runner down.
//
//   node --expose-gc open_hostile.cjs PATH safetensors|gguf|pytorch
//
// `pytorch` (any weights format read by openWeights): openWeights and openWeightsSync (every
// tensor read), inspect, validate, convert to SafeTensors and, when PATH's directory has a
// config.json, Model.loadPretrained of it; each outcome with its elapsed milliseconds.
'use strict'
const { existsSync, rmSync } = require('node:fs')
const { dirname, join } = require('node:path')
const { Model, SafeTensorsFile, convert, inspect, openWeights, openWeightsSync, validate } = require('../../index.js')

const [path, format] = process.argv.slice(2)
/** Files with more tensors than this are read by sample, and skip `tensorsAsync`. */
const MANY = 10_000

function failure(e) {
  return { ok: false, code: e && e.code, message: String(e && e.message), path: e && e.path }
}

const turn = () => new Promise((resolve) => setImmediate(resolve))

/** Every tensor's name, or for files with more than MANY tensors an even sample of MANY. */
function chosen(names) {
  if (names.length <= MANY) return names
  const step = names.length / MANY
  return Array.from({ length: MANY }, (_, i) => names[Math.floor(i * step)]).concat(names[names.length - 1])
}

/**
 * Read the tensors (raw and native), checking sizes; returns a summary that must match
 * across modes. Yields to the event loop now and then, as any real program does: Node runs
 * the finalizers of external buffers only between turns.
 */
async function readAll(file) {
  const names = file.tensorNames
  let bytes = 0
  let checksum = 0
  let read = 0
  for (const name of chosen(names)) {
    const info = file.info(name)
    const raw = file.getTensor(name, { as: 'raw' })
    if (raw.data.byteLength !== info.byteLength) throw new Error(`${name}: raw ${raw.data.byteLength} bytes, info ${info.byteLength}`)
    const view = new Uint8Array(raw.data.buffer, raw.data.byteOffset, raw.data.byteLength)
    for (let i = 0; i < view.length; i += 1) checksum = (checksum * 31 + view[i]) >>> 0
    bytes += view.length
    const native = file.getTensor(name)
    if (native.dtype !== info.dtype) throw new Error(`${name}: dtype ${native.dtype} vs ${info.dtype}`)
    if (++read % 1000 === 0) await turn()
  }
  return { ok: true, tensors: names.length, read, bytes, checksum, metadata: file.metadata }
}

async function settle() {
  global.gc()
  await turn()
  global.gc()
}

/** Run `fn`, recording its outcome (or its error) and how long it took. */
async function timed(fn) {
  const started = process.hrtime.bigint()
  let outcome
  try {
    outcome = await fn()
  } catch (e) {
    outcome = failure(e)
  }
  return { ...outcome, ms: Number(process.hrtime.bigint() - started) / 1e6 }
}

async function main() {
  const out = { format }
  if (format === 'pytorch') {
    const started = process.hrtime.bigint()
    out.openWeights = await timed(async () => readAll(await openWeights(path)))
    await settle()
    out.openWeightsSync = await timed(() => readAll(openWeightsSync(path)))
    await settle()
    out.inspect = await timed(async () => ({ ok: true, tensors: (await inspect(path)).tensors.length }))
    out.validate = await timed(async () => {
      const report = await validate(path)
      return report.ok ? { ok: true } : { ok: false, code: report.errors[0].code, message: report.errors[0].message }
    })
    const converted = `${path}.converted.safetensors`
    out.convert = await timed(async () => ({ ok: true, tensors: (await convert(path, converted, { to: 'safetensors' })).tensors }))
    rmSync(converted, { force: true })
    await settle()
    if (existsSync(join(dirname(path), 'config.json'))) {
      out.loadPretrained = await timed(async () => readAll(await Model.loadPretrained(dirname(path))))
      await settle()
    }
    out.ms = Number(process.hrtime.bigint() - started) / 1e6
  } else if (format === 'gguf') {
    try {
      const report = await inspect(path)
      out.inspect = { ok: true, tensors: report.tensors && report.tensors.length }
    } catch (e) {
      out.inspect = failure(e)
    }
    const report = await validate(path)
    out.validate = { ok: report.ok, codes: report.errors.map((e) => e.code) }
  } else {
    for (const backend of ['mmap', 'read']) {
      try {
        out[backend] = await readAll(SafeTensorsFile.open(path, { backend }))
      } catch (e) {
        out[backend] = failure(e)
      }
      await settle()
    }
    try {
      const file = await SafeTensorsFile.openAsync(path)
      const summary = await readAll(file)
      if (file.tensorNames.length <= MANY) {
        const all = await file.tensorsAsync({ as: 'raw' })
        const some = await Promise.all(file.tensorNames.slice(0, 100).map((n) => file.getTensorAsync(n, { as: 'raw' })))
        // Every tensor must be an own property of the record (names like '__proto__' too).
        summary.asyncTensors = file.tensorNames.filter((n) => Object.prototype.hasOwnProperty.call(all, n)).length
        summary.asyncBytes = some.reduce((s, t) => s + t.data.byteLength, 0)
        summary.syncBytes = file.tensorNames.slice(0, 100).reduce((s, n) => s + file.info(n).byteLength, 0)
      }
      out.async = summary
    } catch (e) {
      out.async = failure(e)
    }
    await settle()
  }
  out.maxRSSKiB = process.resourceUsage().maxRSS
  process.stdout.write(JSON.stringify(out) + '\n')
}

main().catch((e) => {
  process.stderr.write(`child failed: ${e && e.stack}\n`)
  process.exit(3)
})

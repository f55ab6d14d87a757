// Child process of close.spec.ts: one synchronous loop (it never yields) of
// open → getTensor → close, sampling RSS and the number of /proc/self/maps lines that map
// the file every 1,000 cycles.
//
//   node close_cycles.cjs PATH CYCLES MODE
//
// MODE: `close` — read the BF16 tensor (an upcast copy) and the F32 one with default
//       options (copies), then close(); `dispose` — the same with `using`-style disposal
//       ([Symbol.dispose]); `drop` — the same reads, no close; `views` — read the F32 tensor as a
//       view of the mapping (`copy: false`), then close(); `control` — no addon: the file
//       read whole and two arrays of the same size made, as a plain JavaScript loop would.
// Prints one JSON line: { samples: [{ cycle, rssMiB, maps }], final: { rssMiB, maps }, ms }.
'use strict'
const { readFileSync } = require('node:fs')
const { SafeTensorsFile, openWeightsSync, Model } = require('../../index.js')
const { plainCycle } = require('./plain_cycle.cjs')

const [path, cyclesArg, mode, kind = 'file'] = process.argv.slice(2)
const cycles = Number(cyclesArg)
const rssMiB = () => process.memoryUsage().rss / 1048576
// A full, synchronous collection: Node's and Deno's `gc` (--expose-gc), Bun's own.
const gc = globalThis.gc ?? (() => globalThis.Bun.gc(true))
const maps = () => readFileSync('/proc/self/maps', 'utf8').split('\n').filter((l) => l.endsWith(path)).length
const open = { file: (p) => SafeTensorsFile.open(p), weights: (p) => openWeightsSync(p), model: (p) => Model.loadPretrainedSync(p.replace(/\/[^/]*$/, '')) }[kind]

function cycle(i) {
  if (mode === 'control') return plainCycle(path, i)
  const file = open(path)
  const k = i % 65536
  if (mode === 'views') {
    const w = file.getTensor('w', { copy: false })
    if (w.data[k] !== k * 0.5) throw new Error(`w[${k}] = ${w.data[k]}`)
  } else {
    const h = file.getTensor('h') // BF16: an upcast copy
    const w = file.getTensor('w')
    if (h.data[k] !== (k % 100) - 50 || w.data[k] !== k * 0.5) throw new Error(`h[${k}] = ${h.data[k]}, w[${k}] = ${w.data[k]}`)
  }
  if (mode === 'dispose') file[Symbol.dispose]()
  else if (mode !== 'drop') file.close()
}

const started = Date.now()
gc()
const samples = [{ cycle: 0, rssMiB: rssMiB(), maps: maps() }]
for (let i = 1; i <= cycles; i++) {
  cycle(i)
  if (i % 1000 === 0) {
    gc() // a full collection, synchronous: the loop still never yields
    samples.push({ cycle: i, rssMiB: rssMiB(), maps: maps() })
  }
}
const ms = Date.now() - started
setImmediate(() => {
  gc()
  setImmediate(() => {
    process.stdout.write(JSON.stringify({ samples, final: { rssMiB: rssMiB(), maps: maps() }, ms }) + '\n')
  })
})

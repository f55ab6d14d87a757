// Child process of load.spec.ts: open → getTensor → drop, many times, sampling RSS and the
// number of /proc/self/maps lines that map the file.
//
//   node --expose-gc load_cycles.cjs PATH CYCLES YIELD_EVERY [upcast|control]
//
// With `upcast`, a cycle only reads the BF16 tensor (an upcast copy) of one file opened once;
// with `control`, it does without the addon what a cycle does (reads the file, makes two
// 256 KiB arrays): what the runtime itself grows by over the same loop.
// YIELD_EVERY > 0: the loop lets the event loop turn every that many cycles (as a server
// does between requests); 0: one synchronous loop, sampled once at the end before yielding.
// Prints one JSON line: { samples: [{ cycle, rssMiB, maps }], final: {...}, ms }.
'use strict'
const { readFileSync } = require('node:fs')
const { SafeTensorsFile } = require('../../index.js')
const { plainCycle } = require('./plain_cycle.cjs')

const [path, cyclesArg, yieldArg, mode] = process.argv.slice(2)
const cycles = Number(cyclesArg)
const yieldEvery = Number(yieldArg)
const SAMPLE_EVERY = 1000

const turn = () => new Promise((resolve) => setImmediate(resolve))
const rssMiB = () => process.memoryUsage().rss / 1048576
const maps = () => readFileSync('/proc/self/maps', 'utf8').split('\n').filter((l) => l.endsWith(path)).length

async function settle() {
  for (let i = 0; i < 3; i++) {
    global.gc()
    await turn()
  }
}

function cycle(i) {
  const file = SafeTensorsFile.open(path)
  const w = file.getTensor('w') // F32: a view of the mapping
  const h = file.getTensor('h') // BF16: an upcast copy
  const ids = file.getTensor('ids') // I64
  if (w.data[i % w.data.length] !== (i % w.data.length) * 0.5) throw new Error(`w[${i % w.data.length}] = ${w.data[i % w.data.length]}`)
  if (h.data.length !== 65536 || ids.data[3] !== 3n) throw new Error('wrong h or ids')
}

let shared = null
function upcastOnly() {
  shared ??= SafeTensorsFile.open(path)
  if (shared.getTensor('h').data.length !== 65536) throw new Error('wrong h')
}

async function main() {
  const started = Date.now()
  const step = { upcast: upcastOnly, control: (i) => plainCycle(path, i) }[mode] ?? cycle
  const samples = []
  await settle()
  samples.push({ cycle: 0, rssMiB: rssMiB(), maps: maps() })
  for (let i = 1; i <= cycles; i++) {
    step(i)
    if (yieldEvery > 0 && i % yieldEvery === 0) await turn()
    if (yieldEvery > 0 && i % SAMPLE_EVERY === 0) {
      await settle()
      samples.push({ cycle: i, rssMiB: rssMiB(), maps: maps() })
    }
  }
  // Before the loop yields: what a synchronous loop holds at its end.
  const beforeYield = { rssMiB: rssMiB(), maps: maps() }
  await settle()
  const final = { rssMiB: rssMiB(), maps: maps() }
  process.stdout.write(JSON.stringify({ samples, beforeYield, final, maxRSSMiB: process.resourceUsage().maxRSS / 1024, ms: Date.now() - started }) + '\n')
}

main().catch((e) => {
  process.stderr.write(`child failed: ${e && e.stack}\n`)
  process.exit(3)
})

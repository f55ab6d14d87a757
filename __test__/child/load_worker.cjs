// worker_threads worker of load.spec.ts: reads every tensor of one file, sync and async,
// ROUNDS times, and posts back a checksum of everything it read.
'use strict'
const { parentPort, workerData } = require('node:worker_threads')
const { SafeTensorsFile } = require('../../index.js')

/** Sum of the elements (as numbers) of each tensor, in name order. */
function sums(tensors) {
  return Object.keys(tensors)
    .sort()
    .map((name) => {
      let s = 0
      for (const v of tensors[name].data) s += Number(v)
      return [name, s]
    })
}

async function main() {
  const { path, rounds } = workerData
  let last = null
  for (let r = 0; r < rounds; r++) {
    const file = r % 2 ? await SafeTensorsFile.openAsync(path) : SafeTensorsFile.open(path, { backend: r % 4 === 2 ? 'read' : 'mmap' })
    const all = r % 3 ? file.tensors() : await file.tensorsAsync()
    const got = JSON.stringify(sums(all))
    if (last !== null && got !== last) throw new Error(`round ${r} read different values`)
    last = got
  }
  parentPort.postMessage({ sums: JSON.parse(last), rounds })
}

main().catch((e) => {
  throw e
})

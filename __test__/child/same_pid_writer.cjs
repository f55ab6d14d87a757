// Child process of temp-files.spec.ts, started in a PID namespace of its own (so it is PID 1,
// like its twin: two containers sharing a volume): writes one version of a checkpoint to a
// shared destination N times with saveFile, write i starting at START_MS + i × 10 ms, so
// that both writers are at the same write (the same counter, before) at the same moment.
//
//   node same_pid_writer.cjs DEST SEED N START_MS
'use strict'
const { saveFile } = require('../../index.js')

const [dest, seed, n, start] = process.argv.slice(2)
const tensors = {}
for (let t = 0; t < 4; t++) {
  tensors[`w${t}`] = { shape: [64 * 1024], data: new Float32Array(64 * 1024).fill(Number(seed) * 10 + t) }
}
const sleeper = new Int32Array(new SharedArrayBuffer(4))
let failures = 0
for (let i = 0; i < Number(n); i++) {
  const wait = Number(start) + i * 10 - Date.now()
  if (wait > 0) Atomics.wait(sleeper, 0, 0, wait)
  try {
    saveFile(dest, tensors)
  } catch (e) {
    failures++
    process.stderr.write(`write ${i}: ${e.code} ${e.message}\n`)
  }
}
process.stdout.write(`pid ${process.pid}: ${failures} failed writes\n`)

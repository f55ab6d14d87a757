// Child process of load.spec.ts: start worker threads that queue async reads, opens and
// conversions (with a progress callback), and terminate each one mid-flight. A crash here
// (a task completing into a torn-down environment, a finalizer or progress callback running
// after it) kills this process, which the parent sees as a signal.
//
//   node worker_terminate.cjs PATH OUT_DIR ROUNDS
// Prints one JSON line: { rounds, rssMiB }.
'use strict'
const { Worker } = require('node:worker_threads')
const { join } = require('node:path')

const [path, outDir, roundsArg] = process.argv.slice(2)
const rounds = Number(roundsArg)
const INDEX = JSON.stringify(join(__dirname, '..', '..', 'index.js'))

function worker(round) {
  const code = `
    const { SafeTensorsFile, convert, Model } = require(${INDEX})
    const { parentPort } = require('node:worker_threads')
    const path = ${JSON.stringify(path)}
    const f = SafeTensorsFile.open(path)
    for (let i = 0; i < 6; i++) {
      f.tensorsAsync().catch(() => {})
      f.getTensorAsync('h', { as: 'F64' }).catch(() => {})
      SafeTensorsFile.openAsync(path, { backend: i % 2 ? 'read' : 'mmap' }).catch(() => {})
      convert(path, ${JSON.stringify(outDir)} + '/r${round}-' + i + '.gguf', { to: 'gguf', quantization: 'Q8_0', onProgress: () => {} }).catch(() => {})
    }
    parentPort.postMessage('queued')
  `
  return new Worker(code, { eval: true })
}

async function main() {
  for (let r = 0; r < rounds; r++) {
    const w = worker(r)
    await new Promise((resolve, reject) => {
      w.once('message', resolve)
      w.once('error', reject)
    })
    // Terminate at a different point of the work each round.
    await new Promise((resolve) => setTimeout(resolve, r % 5))
    await w.terminate()
  }
  // Let conversions still running on the thread pool finish before exiting.
  await new Promise((resolve) => setTimeout(resolve, 200))
  process.stdout.write(JSON.stringify({ rounds, rssMiB: process.memoryUsage().rss / 1048576 }) + '\n')
}

main().catch((e) => {
  process.stderr.write(`child failed: ${e && e.stack}\n`)
  process.exit(3)
})

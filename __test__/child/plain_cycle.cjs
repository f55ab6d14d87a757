// What one open → read → drop cycle of load_cycles.cjs / close_cycles.cjs does, in plain
// JavaScript without the addon: the file read whole and two 256 KiB float arrays made (the
// F32 tensor copied, the BF16 one widened). Run as a loop, it shows what the runtime itself
// grows by, which the specs' whole-run RSS bounds are relative to.
'use strict'
const { readFileSync } = require('node:fs')

function plainCycle(path, i) {
  const bytes = readFileSync(path)
  const w = new Float32Array(65536)
  const h = new Float32Array(65536)
  for (let k = 0; k < 65536; k += 64) {
    w[k] = bytes[k]
    h[k] = bytes[bytes.length - 1 - k] << 16
  }
  if (w[i % 64] !== 0 && h.length !== 65536) throw new Error('unreachable')
}

module.exports = { plainCycle }

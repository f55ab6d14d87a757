#!/usr/bin/env node
// Quickstart: open a checkpoint, list its tensors, read BF16 weights as Float32Array.
//
//   node examples/quickstart.js [path/to/model.safetensors]
//
// Without an argument it writes a small Llama-shaped BF16 checkpoint (2 layers, hidden 256)
// to examples/data/ first, the way a training script would, then reads it back.
const { existsSync, mkdirSync } = require('node:fs')
const { join } = require('node:path')
const { SafeTensorsFile, saveFile } = require('..')

function writeDemoCheckpoint(path) {
  let seed = 42
  const random = () => ((seed = (seed * 1103515245 + 12345) >>> 0) / 2 ** 32 - 0.5) * 0.08
  const matrix = (rows, cols) => ({ dtype: 'BF16', shape: [rows, cols], data: Float32Array.from({ length: rows * cols }, random) })
  const hidden = 256
  const tensors = { 'model.embed_tokens.weight': matrix(1000, hidden), 'model.norm.weight': { shape: [hidden], data: new Float32Array(hidden).fill(1) } }
  for (let l = 0; l < 2; l++) {
    const p = `model.layers.${l}`
    for (const proj of ['q_proj', 'k_proj', 'v_proj', 'o_proj']) tensors[`${p}.self_attn.${proj}.weight`] = matrix(hidden, hidden)
    tensors[`${p}.mlp.up_proj.weight`] = matrix(4 * hidden, hidden)
    tensors[`${p}.mlp.down_proj.weight`] = matrix(hidden, 4 * hidden)
    tensors[`${p}.input_layernorm.weight`] = { shape: [hidden], data: new Float32Array(hidden).fill(1) }
  }
  mkdirSync(join(path, '..'), { recursive: true })
  saveFile(path, tensors, { metadata: { format: 'pt', source: 'safetensors-node quickstart' } })
}

const path = process.argv[2] ?? join(__dirname, 'data', 'tiny-llama.safetensors')
if (!process.argv[2] && !existsSync(path)) writeDemoCheckpoint(path)

const file = SafeTensorsFile.open(path) // maps the file, validates the header; reads no tensor data yet
console.log(`${path}\n  ${file.tensorNames.length} tensors, ${file.numParameters.toLocaleString()} parameters, ${(file.byteLength / 2 ** 20).toFixed(1)} MiB`)
console.log(`  metadata: ${JSON.stringify(file.metadata)}\n`)
for (const name of file.tensorNames) {
  const { dtype, shape, byteLength } = file.info(name)
  console.log(`  ${name.padEnd(40)} ${dtype.padEnd(5)} ${JSON.stringify(shape).padEnd(12)} ${byteLength.toLocaleString().padStart(10)} B`)
}

const name = file.tensorNames.find((n) => file.info(n).dtype === 'BF16') ?? file.tensorNames[0]
const { dtype, shape, data } = file.getTensor(name) // BF16 → Float32Array (exact upcast)
let sum = 0
for (const v of data) sum += v
console.log(`\n${name}: ${dtype} ${JSON.stringify(shape)} → ${data.constructor.name}(${data.length})`)
console.log(`  first values: ${Array.from(data.subarray(0, 4), (v) => v.toFixed(6)).join(', ')}`)
console.log(`  mean: ${(sum / data.length).toExponential(4)}`)

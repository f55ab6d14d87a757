// Child process of write.spec.ts, run under `strace -f -y -e trace=fsync,fdatasync`: writes
// one file with each writer that takes `durable`, with the option given on the command line
// (one model directory with Model.save, and a LinearRegression's files and directory).
//
//   node durable_writes.cjs DIR default|durable
'use strict'
const { writeFileSync, mkdirSync } = require('node:fs')
const { join } = require('node:path')
const { saveFile, saveFileAsync, convert, Model, LinearRegression } = require('../../index.js')

const [dir, mode] = process.argv.slice(2)
const options = mode === 'durable' ? { durable: true } : {}
const tensors = { w: { shape: [2, 32], data: new Float32Array(64).map((_, i) => i / 7) } }

async function main() {
  saveFile(join(dir, 'sync.safetensors'), tensors, options)
  await saveFileAsync(join(dir, 'async.safetensors'), tensors, options)
  await convert(join(dir, 'sync.safetensors'), join(dir, 'out.gguf'), { to: 'gguf', quantization: 'Q8_0', ...options })
  // A model directory, loaded and saved again (written before tracing matters: no options).
  mkdirSync(join(dir, 'model'))
  writeFileSync(join(dir, 'model', 'config.json'), '{"model_type": "t"}')
  saveFile(join(dir, 'model', 'model.safetensors'), tensors)
  const model = await Model.loadPretrained(join(dir, 'model'))
  await model.save(join(dir, 'saved'), options)
  // Saved again as MLX over a SafeTensors save: the model.safetensors is replaced.
  await model.save(join(dir, 'restyled'))
  await model.save(join(dir, 'restyled'), { ...options, format: 'mlx' })
  const lin = new LinearRegression().fit([[1], [2], [3]], [2, 4, 7])
  lin.saveSafetensors(join(dir, 'lin.safetensors'), options)
  await lin.saveSafetensorsAsync(join(dir, 'lin-async.safetensors'), options)
  await lin.save(join(dir, 'lin'), options)
  lin.toGguf(join(dir, 'lin.gguf'), options)
  lin.toOnnx(join(dir, 'lin.onnx'), options)
}
main().catch((e) => {
  console.error(e)
  process.exit(3)
})

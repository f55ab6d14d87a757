// Child process of crash.spec.ts: write version A, then B, then A, … of one destination
// until killed. Prints "ready MS" once the second write has finished (MS: how long it took),
// so the parent's SIGKILL
// lands while writes are under way, not while Node starts.
//
//   node save_loop.cjs saveFile|saveFileDurable|modelSave|convert DEST SRC_A SRC_B
//
// saveFile: DEST is a .safetensors file, written with saveFile from the tensors of SRC_A/B
// (saveFileDurable: the same with { durable: true }).
// modelSave: DEST is a directory, written with Model.save from the model directories SRC_A/B.
// modelSaveSharded: the same, in shards (maxShardBytes 1.5 MiB); modelSaveMixed: A in shards,
// B as one file (the layout changes on every save); modelSaveRace: in shards, and a failed
// save is reported on stderr and the loop goes on (two of these run at once on one DEST).
// convert: DEST is a .gguf file, converted (Q8_0) from the SafeTensors files SRC_A/B.
'use strict'
const { loadFile, saveFile, Model, convert } = require('../../index.js')

const [mode, dest, srcA, srcB] = process.argv.slice(2)

async function main() {
  const sources = [srcA, srcB]
  const loaded = mode.startsWith('saveFile') ? sources.map((s) => loadFile(s, { as: 'raw' })) : []
  const models = mode.startsWith('modelSave') ? await Promise.all(sources.map((s) => Model.loadPretrained(s))) : []
  const sharded = { maxShardBytes: 1.5 * 1024 * 1024 }
  const saveOptions = { modelSave: [{}, {}], modelSaveSharded: [sharded, sharded], modelSaveMixed: [sharded, {}], modelSaveRace: [sharded, sharded] }[mode]
  let started = Date.now()
  for (let i = 0; ; i++) {
    const which = i % 2
    if (mode.startsWith('saveFile')) {
      const tensors = {}
      for (const [name, t] of Object.entries(loaded[which])) tensors[name] = { dtype: t.dtype, shape: t.shape, data: t.data }
      saveFile(dest, tensors, { durable: mode === 'saveFileDurable' })
    } else if (mode === 'modelSaveRace') {
      await models[which].save(dest, saveOptions[which]).catch((e) => process.stderr.write(`save failed: ${e.code}\n`))
    } else if (mode.startsWith('modelSave')) {
      await models[which].save(dest, saveOptions[which])
    } else if (mode === 'convert') {
      await convert(sources[which], dest, { to: 'gguf', quantization: 'Q8_0' })
    } else {
      throw new Error(`unknown mode ${mode}`)
    }
    // The second write's duration: the parent scales its kill delays to this machine.
    if (i === 1) process.stdout.write(`ready ${Date.now() - started}\n`)
    started = Date.now()
  }
}
main().catch((e) => {
  console.error(e)
  process.exit(3)
})

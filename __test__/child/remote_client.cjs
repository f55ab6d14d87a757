// Child process of remote-bounds.spec.ts: opens one URL (a file with openUrl, or a model
// directory with Model.loadPretrained), reads a tensor when asked, and prints one JSON line
// with the outcome and the peak RSS — in its own process, so the server's memory (in the
// test process) does not count and a runaway allocation cannot take the runner down.
//
//   node remote_client.cjs open|load URL [OPTIONS_JSON] [TENSOR]
'use strict'
const { SafeTensorsFile, Model } = require('../../index.js')

const [how, url, optionsJson, tensor] = process.argv.slice(2)
const options = optionsJson ? JSON.parse(optionsJson) : undefined

async function main() {
  let outcome
  try {
    const f = how === 'open' ? await SafeTensorsFile.openUrl(url, options) : await Model.loadPretrained(url, options)
    outcome = { ok: true, tensors: f.tensorNames.length }
    if (tensor) outcome.length = (await f.getTensorAsync(tensor)).data.length
  } catch (e) {
    outcome = { ok: false, code: e && e.code, message: String(e && e.message) }
  }
  outcome.maxRSSKiB = process.resourceUsage().maxRSS
  process.stdout.write(JSON.stringify(outcome) + '\n')
  // Sockets the client cancelled must not keep the process alive.
  process.exit(0)
}
main()

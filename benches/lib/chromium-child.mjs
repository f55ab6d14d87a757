// One implementation of a benchmark row run in headless Chromium (Debian's /usr/bin/chromium,
// or CHROMIUM): `node benches/lib/chromium-child.mjs CASE REPS 'JSON-PARAMS'`, printing the
// `RESULT {json}` line child.mjs prints. A page served on 127.0.0.1 imports the package's
// browser entry (wasm/index.mjs), fetches the input whole (untimed), opens it from bytes,
// then times one warm-up and REPS calls of the case with `performance.now()` and POSTs the
// times and the output's check value back. Peak RSS is not measured (null): the work runs
// in Chromium's renderer, a process this one does not own the accounting of.
//
// Case `wasm-get`: `getTensor(P.name, { as: P.as })` of the file at P.path. Case
// `copy-bound`: what producing that output costs a page at all — a new Float32Array of the
// tensor's elements, filled by a copy of one made before (the floor under `wasm-get`, whose
// output is such a copy out of WebAssembly memory).
import { spawn } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { createServer } from 'node:http'
import { tmpdir } from 'node:os'
import { extname, join } from 'node:path'
import { ROOT } from './common.mjs'

const [caseName, repsArg, paramsArg] = process.argv.slice(2)
const reps = Number(repsArg)
const P = JSON.parse(paramsArg ?? '{}')
if (!['wasm-get', 'copy-bound'].includes(caseName)) throw new Error(`unknown case ${caseName}`)
const CHROMIUM = process.env.CHROMIUM ?? '/usr/bin/chromium'
const TYPES = { '.mjs': 'text/javascript', '.wasm': 'application/wasm' }

const page = `<!doctype html><script type="module">
  const post = (body) => fetch('/result', { method: 'POST', body: JSON.stringify(body) })
  try {
    const { openWeights } = await import('/wasm/index.mjs')
    const f = await openWeights(new Uint8Array(await (await fetch('/input')).arrayBuffer()))
    const get = () => f.getTensor(${JSON.stringify(P.name)}, { as: ${JSON.stringify(P.as ?? 'native')} })
    const source = ${JSON.stringify(caseName)} === 'copy-bound' ? (await get()).data : null
    const copy = async () => {
      const out = new Float32Array(source.length)
      out.set(source)
      return out
    }
    const run = source ? copy : async () => (await get()).data
    const times = []
    let warmup = null
    let out = null
    for (let i = 0; i <= ${reps}; i++) {
      out = null
      const t0 = performance.now()
      out = await run()
      const ms = performance.now() - t0
      if (i === 0) warmup = ms
      else times.push(ms)
    }
    // The check child.mjs computes: the length and the sum of every 4,099th element.
    let sum = 0
    for (let i = 0; i < out.length; i += 4099) sum += out[i]
    await post({ times, warmup, check: { n: out.length, sum }, userAgent: navigator.userAgent })
  } catch (e) {
    await post({ error: String(e.stack ?? e) })
  }
</script>`

let done
const posted = new Promise((ok) => (done = ok))
const server = createServer((req, res) => {
  const path = new URL(req.url, 'http://x').pathname
  if (path === '/') return void res.writeHead(200, { 'Content-Type': 'text/html' }).end(page)
  if (path === '/input') return void res.writeHead(200).end(readFileSync(P.path))
  if (/^\/wasm\/[\w.-]+$/.test(path)) return void res.writeHead(200, { 'Content-Type': TYPES[extname(path)] ?? 'application/octet-stream' }).end(readFileSync(join(ROOT, path)))
  if (path === '/result' && req.method === 'POST') {
    const chunks = []
    return void req.on('data', (c) => chunks.push(c)).on('end', () => {
      res.writeHead(204).end()
      done(JSON.parse(Buffer.concat(chunks).toString('utf8')))
    })
  }
  res.writeHead(404).end()
})
await new Promise((ok) => server.listen(0, '127.0.0.1', ok))
const profile = mkdtempSync(join(tmpdir(), 'stn-bench-chromium-'))
// Its own process group: the browser and its helpers end together.
const chromium = spawn(CHROMIUM, ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run', `--user-data-dir=${profile}`, `http://127.0.0.1:${server.address().port}/`], { detached: true, stdio: 'ignore' })
const exited = new Promise((_, fail) => chromium.on('exit', (code) => fail(new Error(`chromium exited (${code}) before the page answered`))))
try {
  const r = await Promise.race([posted, exited])
  if (r.error) throw new Error(r.error)
  const result = { case: caseName, times_ms: r.times, warmup_ms: r.warmup, max_rss_kib: null, check: r.check, info: { chromium: r.userAgent } }
  process.stdout.write(`RESULT ${JSON.stringify(result)}\n`)
} finally {
  if (chromium.exitCode === null) process.kill(-chromium.pid, 'SIGKILL')
  server.close()
  rmSync(profile, { recursive: true, force: true })
}

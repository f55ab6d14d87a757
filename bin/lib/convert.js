'use strict'
const { basename } = require('node:path')
const { UsageError } = require('./errors')
const ui = require('./ui')

const FORMATS = ['gguf', 'safetensors', 'mlx', 'onnx']
// llama-quantize's presets (checked against the core's table by crates/core/tests/presets_list.rs).
const QUANTIZATIONS = ['F32', 'F16', 'BF16', 'Q8_0', 'Q6_K', 'Q5_K_M', 'Q5_K_S', 'Q5_1', 'Q5_0', 'Q4_K_M', 'Q4_K_S', 'Q4_1', 'Q4_0', 'Q3_K_L', 'Q3_K_M', 'Q3_K_S', 'Q2_K', 'Q3_K', 'Q4_K', 'Q5_K']

/** `text` broken at spaces into lines of at most `width` characters, each after `indent`. */
function wrap(text, width, indent) {
  const lines = ['']
  for (const word of text.split(' ')) {
    const line = lines[lines.length - 1]
    if (line.length + word.length + 1 > width - indent.length && line !== '') lines.push(word)
    else lines[lines.length - 1] = line === '' ? word : `${line} ${word}`
  }
  return lines.map((l) => `\n${indent}${l}`).join('')
}

const usage = 'safetensors-node convert IN OUT --to gguf|safetensors|mlx|onnx [--quantization TYPE] [--metadata KEY=VALUE]... [--remove-metadata KEY]... [--split-max-size N] [--base DIR | --lora DIR [--lora-scale X]] [--durable] [--quiet] [--json]'

const help = `Usage: ${usage}

Convert IN (a SafeTensors file, sharded index, model directory, GGUF file, PyTorch checkpoint,
NumPy .npy/.npz or weights.mlx) to OUT. Tensors are streamed one at a time and OUT is written
atomically. A PyTorch model directory (or index) to SafeTensors gives a directory, as
Hugging Face's convert.py does (tied tensors written once, listed in the report as dropped).

Options:
  -t, --to FORMAT           gguf | safetensors | mlx | onnx (onnx: a linear or logistic
                            regression model file or directory)
      --quantization TYPE   GGUF only: a llama-quantize preset (below); each tensor gets the
                            type llama-quantize gives it. Without it every tensor keeps its
                            type (integers always do)
      --metadata KEY=VALUE  set KEY in OUT's metadata (repeatable). VALUE is read as JSON when
                            it parses (7 → INT32, 0.5 → FLOAT32, true → BOOL, ["a","b"] → an
                            array, {"type":"UINT32","value":7} → that type), else as a string
      --remove-metadata KEY remove KEY from OUT's metadata (repeatable)
      --split-max-size N    GGUF only: write OUT as a split set (OUT-00001-of-0000N.gguf …)
                            whose files hold at most N bytes of tensors each, as
                            llama-gguf-split does (N in bytes, or with K, M or G: 1000-based)
      --base DIR            IN is a PEFT LoRA adapter directory and DIR its base model: OUT
                            (--to gguf) is a llama.cpp GGUF LoRA (--quantization F32, F16,
                            BF16 or Q8_0; without it the adapter's float types are kept)
      --lora DIR            merge the PEFT LoRA adapter DIR into the model directory IN, as
                            PEFT's merge_and_unload() does (--to safetensors: OUT is a
                            model directory)
      --lora-scale X        with --lora: a multiplier of the adapter's scaling (default 1)
      --durable             fsync OUT before renaming it into place (survives a power cut;
                            without it the write is atomic but may be lost on power loss)
  -q, --quiet               no progress bar and no summary
      --json                print the conversion report on stdout: {input, output, inputFormat,
                            outputFormat, tensors, inputBytes, outputBytes, quantization?}
  -h, --help                show this help

Presets (--quantization):${wrap(QUANTIZATIONS.join(' | '), 88, '  ')}
(Q3_K, Q4_K and Q5_K are llama-quantize's names for the _M mixes.)

On a terminal, a progress bar (bytes done / total, rate, ETA) and then a one-line summary are
written to stderr. When stderr is not a terminal the command prints nothing unless --json.

Examples:
  safetensors-node convert model.safetensors model.gguf --to gguf --quantization Q8_0
  safetensors-node convert model-f16.gguf model-Q4_K_M.gguf --to gguf --quantization Q4_K_M
  safetensors-node convert model.gguf model.safetensors --to safetensors
  safetensors-node convert ./classifier classifier.onnx --to onnx
  safetensors-node convert in.gguf out.gguf --to gguf --metadata general.name=tiny --remove-metadata general.url
  safetensors-node convert ./model model.gguf --to gguf --split-max-size 2G
  safetensors-node convert ./my-adapter adapter.gguf --to gguf --base ./Llama-3.2-1B
  safetensors-node convert ./Llama-3.2-1B ./merged --to safetensors --lora ./my-adapter`

const options = {
  to: { type: 'string', short: 't' },
  quantization: { type: 'string' },
  metadata: { type: 'string', multiple: true },
  'remove-metadata': { type: 'string', multiple: true },
  'split-max-size': { type: 'string' },
  base: { type: 'string' },
  lora: { type: 'string' },
  'lora-scale': { type: 'string' },
  durable: { type: 'boolean' },
  quiet: { type: 'boolean', short: 'q' },
  json: { type: 'boolean' },
}

/** `--metadata KEY=VALUE` and `--remove-metadata KEY` as `convert`'s `metadata` option. */
function metadataEdits(values) {
  const edits = {}
  for (const pair of values.metadata ?? []) {
    const eq = pair.indexOf('=')
    if (eq <= 0) throw new UsageError(`--metadata takes KEY=VALUE, not '${pair}'`, 'convert')
    const text = pair.slice(eq + 1)
    let value
    try {
      value = JSON.parse(text)
    } catch {
      value = text
    }
    // JSON null would remove the key: that is --remove-metadata's job.
    edits[pair.slice(0, eq)] = value === null ? text : value
  }
  for (const key of values['remove-metadata'] ?? []) edits[key] = null
  return Object.keys(edits).length > 0 ? edits : undefined
}

/** `--split-max-size`: bytes, or a number with K, M or G (1000-based, as llama-gguf-split). */
function splitSize(text) {
  const m = /^([0-9]+(?:\.[0-9]+)?)([KMG]?)$/i.exec(text.trim())
  const bytes = m ? Math.round(Number(m[1]) * { '': 1, K: 1e3, M: 1e6, G: 1e9 }[m[2].toUpperCase()]) : NaN
  if (!(bytes >= 1) || !Number.isSafeInteger(bytes)) throw new UsageError(`--split-max-size takes a size such as 50G, 500M or 1000000, not '${text}'`, 'convert')
  return bytes
}

/** The report with keys in reading order (any others after). */
function ordered(report) {
  const keys = ['input', 'output', 'inputFormat', 'outputFormat', 'quantization', 'tensors', 'inputBytes', 'outputBytes']
  const out = {}
  for (const k of keys) if (report[k] !== undefined) out[k] = report[k]
  for (const k of Object.keys(report)) if (!(k in out) && report[k] !== undefined) out[k] = report[k]
  return out
}

async function run(ctx, values, positionals) {
  const [input, output] = positionals
  if (values.to === undefined) throw new UsageError('convert needs --to (gguf, safetensors, mlx or onnx)', 'convert')
  const to = values.to.toLowerCase()
  if (!FORMATS.includes(to)) throw new UsageError(`--to must be one of ${FORMATS.join(', ')}, not '${values.to}'`, 'convert')
  let quantization
  if (values.quantization !== undefined) {
    quantization = values.quantization.toUpperCase()
    if (!QUANTIZATIONS.includes(quantization)) {
      throw new UsageError(`--quantization must be one of ${QUANTIZATIONS.join(', ')}, not '${values.quantization}'`, 'convert')
    }
    if (to !== 'gguf') throw new UsageError('--quantization applies only to --to gguf', 'convert')
  }
  let loraScale
  if (values['lora-scale'] !== undefined) {
    loraScale = Number(values['lora-scale'])
    if (values['lora-scale'].trim() === '' || !Number.isFinite(loraScale)) {
      throw new UsageError(`--lora-scale must be a number, not '${values['lora-scale']}'`, 'convert')
    }
  }

  const metadata = metadataEdits(values)
  let maxShardBytes
  if (values['split-max-size'] !== undefined) {
    maxShardBytes = splitSize(values['split-max-size'])
    if (to !== 'gguf') throw new UsageError('--split-max-size applies only to --to gguf', 'convert')
  }

  const showProgress = Boolean(ctx.stderr.isTTY) && !values.quiet
  const bar = showProgress ? ui.progressBar(ctx.stderr) : null
  ctx.onInterrupt(() => bar && bar.clear())
  const started = process.hrtime.bigint()
  let report
  try {
    report = await ctx.lib().convert(input, output, {
      to,
      ...(quantization !== undefined ? { quantization } : {}),
      ...(metadata !== undefined ? { metadata } : {}),
      ...(maxShardBytes !== undefined ? { maxShardBytes } : {}),
      ...(values.base !== undefined ? { base: values.base } : {}),
      ...(values.lora !== undefined ? { lora: values.lora } : {}),
      ...(loraScale !== undefined ? { loraScale } : {}),
      ...(values.durable ? { durable: true } : {}),
      ...(bar ? { onProgress: bar.update } : {}),
    })
  } finally {
    if (bar) bar.clear()
  }
  const seconds = Number(process.hrtime.bigint() - started) / 1e9
  if (!values.quiet) for (const w of report.warnings ?? []) ctx.err(`${ctx.colors.err.yellow('warning')}: ${ui.truncate(w, ui.MESSAGE_CHARS)}`)

  if (values.json) ctx.out(ui.toJson(ordered(report)))
  else if (showProgress) {
    const c = ctx.colors.err
    const ratio = report.inputBytes > 0 ? ` (${Math.round((report.outputBytes / report.inputBytes) * 100)}%)` : ''
    const q = report.quantization ? ` ${report.quantization}` : ''
    ctx.err(
      `${c.green('converted')} ${ui.printable(basename(report.input))} (${report.inputFormat}) → ${ui.printable(basename(report.output))} (${report.outputFormat}${q}): ` +
        `${ui.formatBytes(report.inputBytes)} → ${ui.formatBytes(report.outputBytes)}${ratio}, ` +
        `${ui.withCommas(report.tensors)} tensor${report.tensors === 1 ? '' : 's'} in ${ui.formatElapsed(seconds)}`,
    )
    const dropped = report.dropped ?? []
    if (dropped.length > 0) {
      const shown = dropped.slice(0, 5).map((d) => `${ui.name(d.name)} (= ${ui.name(d.keptAs)})`).join(', ')
      ctx.err(`  tied tensors written once: ${shown}${dropped.length > 5 ? `, and ${dropped.length - 5} more` : ''}`)
    }
  }
  return 0
}

module.exports = { name: 'convert', summary: 'convert between SafeTensors, GGUF, MLX and ONNX', usage, help, options, argNames: ['IN', 'OUT'], positionals: [2, 2], run }

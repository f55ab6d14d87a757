'use strict'
const { UsageError } = require('./errors')
const ui = require('./ui')

const DEFAULT_LIMIT = 50

const usage = 'safetensors-node inspect PATH [--json] [--limit N] [--filter TEXT]'

const help = `Usage: ${usage}

Describe a SafeTensors file, sharded index (model.safetensors.index.json), GGUF file,
PyTorch checkpoint, NumPy .npy/.npz, weights.mlx or model directory: format, size, tensor count, parameters, metadata, the
config's model_type, and a table of tensors (name, dtype, shape, size) in file order.

Options:
  -l, --limit N       show at most N tensors (default ${DEFAULT_LIMIT}; 0 shows them all)
  -f, --filter TEXT   only tensors whose name contains TEXT (case-sensitive)
      --json          print the report as one JSON object: path, format, fileSize, files,
                      numTensors, numParameters, metadata, config (model directories) and
                      tensors [{name, dtype, shape, byteLength, file?}]. Every tensor is
                      listed unless --filter or --limit is given; numTensors counts them all.
  -h, --help          show this help

GGUF tensors report their ggml type (e.g. Q8_0) as dtype.

Examples:
  safetensors-node inspect model.safetensors
  safetensors-node inspect ./my-model --filter layers.0. --limit 0
  safetensors-node inspect model.gguf --json | jq -r '.tensors[].name'`

const options = {
  json: { type: 'boolean' },
  limit: { type: 'string', short: 'l' },
  filter: { type: 'string', short: 'f' },
}

function parseLimit(text) {
  if (text === undefined) return undefined
  if (!/^\d+$/.test(text.trim())) throw new UsageError(`--limit takes a whole number (0 for all), not '${text}'`, 'inspect')
  return Number(text)
}

/** The report with keys in reading order and tensors as asked. */
function ordered(report, tensors) {
  const first = ['path', 'format', 'fileSize', 'files', 'numTensors', 'numParameters', 'metadata', 'config']
  const out = {}
  for (const k of first) if (report[k] !== undefined) out[k] = report[k]
  for (const k of Object.keys(report)) if (!(k in out) && k !== 'tensors') out[k] = report[k]
  out.tensors = tensors.map((t) => {
    const e = { name: t.name, dtype: t.dtype, shape: t.shape, byteLength: t.byteLength }
    for (const k of Object.keys(t)) if (!(k in e) && t[k] !== undefined) e[k] = t[k]
    return e
  })
  return out
}

async function run(ctx, values, positionals) {
  const [path] = positionals
  const limitArg = parseLimit(values.limit)
  const filter = values.filter
  const report = await ctx.lib().inspect(path)

  const matching = filter === undefined ? report.tensors : report.tensors.filter((t) => t.name.includes(filter))

  if (values.json) {
    const shown = limitArg ? matching.slice(0, limitArg) : matching
    ctx.out(ui.toJson(ordered(report, shown)))
    return 0
  }

  const c = ctx.colors.out
  const limit = limitArg === undefined ? DEFAULT_LIMIT : limitArg
  const shown = limit === 0 ? matching : matching.slice(0, limit)
  const width = Math.max(60, ctx.columns || 100)

  const lines = [c.bold(ui.printable(report.path))]
  const field = (label, value) => lines.push(`  ${c.bold(label.padEnd(11))} ${value}`)
  field('format', report.format)
  field('file size', report.fileSize < 1024 ? `${report.fileSize} bytes` : `${ui.formatBytes(report.fileSize)} (${ui.withCommas(report.fileSize)} bytes)`)
  if (report.files && (report.files.length > 1 || report.config !== undefined)) {
    const list = report.files.slice(0, 3).map((f) => ui.name(f)).join(', ') + (report.files.length > 3 ? `, … ${report.files.length - 3} more` : '')
    field('files', `${report.files.length} (${list})`)
  }
  const count = ui.withCommas(report.numTensors)
  field('tensors', filter === undefined ? count : `${count} (${ui.withCommas(matching.length)} matching ${JSON.stringify(filter)})`)
  const params = report.numParameters
  field('parameters', params >= 1000 ? `${ui.formatCount(params)} (${ui.withCommas(params)})` : String(params))
  const modelType = report.config && report.config.model_type
  if (modelType !== undefined) field('model type', ui.name(typeof modelType === 'string' ? modelType : JSON.stringify(modelType)))
  const meta = report.metadata ? Object.entries(report.metadata) : []
  if (meta.length === 0) field('metadata', c.dim('none'))
  else {
    const keys = meta.map(([k]) => ui.truncate(k, 48))
    const keyWidth = Math.min(32, keys.reduce((w, k) => Math.max(w, k.length), 0))
    const valueWidth = Math.max(20, width - 15 - keyWidth - 3)
    meta.forEach(([, v], i) => {
      const text = `${keys[i].padEnd(keyWidth)} = ${ui.formatValue(v, valueWidth)}`
      if (i === 0) field('metadata', text)
      else lines.push(`  ${' '.repeat(11)} ${text}`)
    })
  }
  lines.push('')

  if (matching.length === 0) {
    lines.push(c.dim(filter === undefined ? 'no tensors' : `no tensor name contains ${JSON.stringify(filter)}`))
  } else {
    const multiFile = shown.some((t) => t.file !== undefined) && report.files && report.files.length > 1
    const columns = [
      { title: 'NAME', align: 'left' },
      { title: 'DTYPE', align: 'left' },
      { title: 'SHAPE', align: 'left' },
      { title: 'SIZE', align: 'right' },
    ]
    if (multiFile) columns.push({ title: 'FILE', align: 'left' })
    const rows = shown.map((t) => {
      // Cells cut to bounded widths: one long name would otherwise pad every row to its length.
      const row = [ui.name(t.name), ui.truncate(t.dtype, 16), ui.truncate(ui.formatShape(t.shape), 40), ui.formatBytes(t.byteLength)]
      if (multiFile) row.push(ui.name(t.file ?? ''))
      return row
    })
    lines.push(...ui.table(columns, rows, c.bold))
    const hidden = matching.length - shown.length
    if (hidden > 0) lines.push(c.dim(`… ${ui.withCommas(hidden)} more${filter === undefined ? '' : ' matching'} (use --limit 0 for all)`))
  }
  ctx.out(lines.join('\n'))
  return 0
}

module.exports = { name: 'inspect', summary: 'describe a weights file or model directory: metadata and tensors', usage, help, options, argNames: ['PATH'], positionals: [1, 1], run }

'use strict'
const { UsageError } = require('./errors')
const ui = require('./ui')

const usage = 'safetensors-node diff A B [--names auto|direct|llama.cpp] [--json]'

const help = `Usage: ${usage}

Compare two weight sources tensor by tensor: files or model directories of any format this
package reads (a GGUF Q4_K_M against the SafeTensors it came from, a fine-tune against its
base, a .bin against its SafeTensors conversion), or model ids in the Hugging Face cache.
Tensors are paired by name, or through llama.cpp's name map when one side is a llama.cpp GGUF
of the other. For each pair: shape and type changes, and over the values as F32: max |Δ|,
mean |Δ|, relative error ‖Δ‖/‖A‖, cosine similarity, and whether they are bit-identical; then
the same per layer. One pair of tensors is in memory at a time.

Options:
      --names MAP   auto (default), direct (by name only) or llama.cpp
      --json        print the whole report: {a, b, formatA, formatB, nameMap, tensors: [...],
                    layers: [...], summary, warnings}
  -h, --help        show this help

Examples:
  safetensors-node diff model.safetensors model-Q4_K_M.gguf
  safetensors-node diff ./base ./finetuned --json | jq '.layers[] | {layer, relError}'`

const options = {
  names: { type: 'string' },
  json: { type: 'boolean' },
}

/** A figure for a table cell: 3 significant digits, '-' when there is none. */
const fig = (v) => (v === null || v === undefined ? '-' : Number.isNaN(v) ? 'NaN' : v === 0 ? '0' : Math.abs(v) >= 1e-3 && Math.abs(v) < 1e4 ? String(Number(v.toPrecision(4))) : v.toExponential(2))

/** Names of a list, the first few, with how many more. */
function some(names, n = 8) {
  const shown = names.slice(0, n).map(ui.name).join(', ')
  return names.length > n ? `${shown}, and ${names.length - n} more` : shown
}

async function run(ctx, values, positionals) {
  const [a, b] = positionals
  if (values.names !== undefined && !['auto', 'direct', 'llama.cpp'].includes(values.names)) throw new UsageError(`--names must be auto, direct or llama.cpp, not '${values.names}'`, 'diff')
  const report = await ctx.lib().diff(a, b, values.names !== undefined ? { names: values.names } : {})
  if (values.json) {
    ctx.out(ui.toJson(report))
    return 0
  }
  const c = ctx.colors.out
  for (const w of report.warnings) ctx.err(`${ctx.colors.err.yellow('warning')}: ${ui.truncate(w, ui.MESSAGE_CHARS)}`)
  const s = report.summary
  ctx.out(`A: ${ui.printable(report.a)} (${report.formatA})`)
  ctx.out(`B: ${ui.printable(report.b)} (${report.formatB})${report.nameMap === 'llama.cpp' ? ", paired through llama.cpp's name map" : ''}`)
  const rows = report.layers.map((l) => [
    l.layer === null ? '(other)' : ui.name(l.layer),
    String(l.compared),
    String(l.identical),
    fig(l.maxAbs),
    fig(l.meanAbs),
    fig(l.relError),
    fig(l.minCosine),
  ])
  rows.push(['(all)', String(s.compared), String(s.identical), fig(s.maxAbs), fig(s.meanAbs), fig(s.relError), fig(s.minCosine)])
  const columns = [
    { title: 'layer', align: 'left' },
    { title: 'tensors', align: 'right' },
    { title: 'identical', align: 'right' },
    { title: 'max|Δ|', align: 'right' },
    { title: 'mean|Δ|', align: 'right' },
    { title: 'rel err', align: 'right' },
    { title: 'min cos', align: 'right' },
  ]
  for (const line of ui.table(columns, rows, c.bold)) ctx.out(line)
  const of = (status) => report.tensors.filter((t) => t.status === status).map((t) => t.name)
  const onlyA = of('only-a')
  const onlyB = of('only-b')
  if (onlyA.length > 0) ctx.out(`only in A (${onlyA.length}): ${some(onlyA)}`)
  if (onlyB.length > 0) ctx.out(`only in B (${onlyB.length}): ${some(onlyB)}`)
  const shapes = report.tensors.filter((t) => t.shapeChanged)
  for (const t of shapes.slice(0, 8)) ctx.out(`shape ${ui.name(t.name)}: ${ui.formatShape(t.shapeA)} → ${ui.formatShape(t.shapeB)}`)
  if (shapes.length > 8) ctx.out(`… and ${shapes.length - 8} more shape changes`)
  const types = new Map()
  for (const t of report.tensors.filter((t) => t.dtypeChanged)) {
    const key = `${t.dtypeA} → ${t.dtypeB}`
    types.set(key, (types.get(key) ?? 0) + 1)
  }
  for (const [k, n] of types) ctx.out(`type ${k}: ${n} tensor${n === 1 ? '' : 's'}`)
  const same = s.compared === s.identical && onlyA.length === 0 && onlyB.length === 0 && shapes.length === 0
  ctx.out(same ? c.green('identical') : `${s.compared} compared, ${s.identical} identical, ${onlyA.length} only in A, ${onlyB.length} only in B, ${shapes.length} shape changes`)
  return 0
}

module.exports = { name: 'diff', summary: 'compare two weight sources tensor by tensor, per layer', usage, help, options, argNames: ['A', 'B'], positionals: [2, 2], run }

'use strict'
const ui = require('./ui')

const usage = 'safetensors-node validate PATH... [--json]'

const help = `Usage: ${usage}

Check each SafeTensors file, sharded index, GGUF file, PyTorch checkpoint, NumPy file,
weights.mlx or model directory the way
the reference implementation does, and report every problem found (not only the first), each
with its error code and the tensor it concerns.

Exit status: 0 when every PATH is valid, 1 when any is not (a missing file is invalid).

Options:
      --json      print one JSON array with a report per PATH, in the order given:
                  [{path, format, ok, errors: [{code, message, tensor?}], omittedErrors}]
                  (errors lists the first 1,000 problems; omittedErrors counts the rest)
  -h, --help      show this help

Examples:
  safetensors-node validate model.safetensors
  safetensors-node validate shards/*.safetensors --json | jq '.[] | select(.ok | not) | .path'`

const options = { json: { type: 'boolean' } }

/**
 * The message without the "PATH: " and "tensor 'x': " prefixes the line already shows (the
 * core shows a name it had to escape or cut differently: up to the first "': " then).
 */
function shortMessage(report, error) {
  let m = error.message
  if (m.startsWith(`${report.path}: `)) m = m.slice(report.path.length + 2)
  if (error.tensor !== undefined && m.startsWith(`tensor '${error.tensor}': `)) m = m.slice(error.tensor.length + 11)
  else if (error.tensor !== undefined && m.startsWith("tensor '") && m.includes("': ")) m = m.slice(m.indexOf("': ") + 3)
  return m
}

/** A report with keys in reading order: path, format, ok, errors [{code, tensor?, message}], omittedErrors. */
function ordered(r) {
  const errors = r.errors.map((e) => ({ code: e.code, ...(e.tensor !== undefined ? { tensor: e.tensor } : {}), message: e.message }))
  return { path: r.path, format: r.format, ok: r.ok, errors, omittedErrors: r.omittedErrors }
}

async function run(ctx, values, positionals) {
  const { validate } = ctx.lib()
  const reports = []
  const c = ctx.colors.out
  for (const path of positionals) {
    const report = await validate(path)
    reports.push(report)
    if (values.json) continue
    const format = report.format ? ` (${report.format})` : ''
    const shown = ui.printable(report.path)
    if (report.ok) {
      ctx.out(`${shown}: ${c.green('ok')}${format}`)
    } else {
      const n = report.errors.length + report.omittedErrors
      ctx.out(`${shown}: ${c.red('invalid')}${format}, ${n} problem${n === 1 ? '' : 's'}`)
      for (const e of report.errors) {
        const where = e.tensor !== undefined ? ` tensor "${ui.name(e.tensor)}"` : ''
        ctx.out(`  ${c.red(`error[${e.code}]`)}${where}: ${ui.truncate(shortMessage(report, e), ui.MESSAGE_CHARS)}`)
      }
      if (report.omittedErrors > 0) ctx.out(`  … and ${report.omittedErrors} more (the first ${report.errors.length} are listed)`)
    }
  }
  const bad = reports.filter((r) => !r.ok).length
  if (values.json) ctx.out(ui.toJson(reports.map(ordered)))
  else if (reports.length > 1) {
    ctx.out(`${reports.length} paths: ${reports.length - bad} ok, ${bad} invalid`)
  }
  return bad === 0 ? 0 : 1
}

module.exports = { name: 'validate', summary: 'check files against the format; exit status 1 if any is invalid', usage, help, options, argNames: ['PATH'], positionals: [1, Infinity], run }

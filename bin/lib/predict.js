'use strict'
const { readFileSync, statSync } = require('node:fs')
const { CliError, UsageError } = require('./errors')
const ui = require('./ui')

const usage = 'safetensors-node predict MODEL [--input FILE|-] [--json] [--proba] [--model linear|logistic]'

const help = `Usage: ${usage}

Run a linear or logistic regression on rows of numbers and print one prediction per line:
the value (linear; the shortest decimal that reads back as the same float32) or the class
label (logistic).

MODEL is a model directory (config.json + weights.safetensors, written by model.save(dir)) or
a .safetensors model file (written by saveSafetensors: its metadata names the model type).
A file without metadata, such as one written by the Rust crate aprender, needs --model.

Rows are read from FILE, or from standard input when --input is absent or '-', as either
  JSON   an array of rows: [[1.5, 2], [3, 4]]
  CSV    comma- (or tab-) separated numbers, one row per line; a first line that is not all
         numbers is a header and is skipped.
Every column is a feature: a target column is NOT dropped, so remove it first
(e.g. cut -d, -f1-10 data.csv).

Options:
  -i, --input FILE    read rows from FILE ('-': standard input, the default)
  -m, --model KIND    linear | logistic: the model a .safetensors file holds (required when
                      the file has no model_type metadata; otherwise must agree with it)
      --proba         logistic: print class probabilities instead of labels, comma-separated
                      in ascending class order, one row per line
      --json          print a JSON array: predictions, labels, or (with --proba) rows of
                      probabilities
  -h, --help          show this help

Examples:
  safetensors-node predict ./price-model --input rows.json
  cut -d, -f1-30 breast_cancer.csv | safetensors-node predict clf.safetensors --proba
  echo '[[1, 1]]' | safetensors-node predict linreg.safetensors --model linear`

const options = {
  input: { type: 'string', short: 'i' },
  model: { type: 'string', short: 'm' },
  proba: { type: 'boolean' },
  json: { type: 'boolean' },
}

const KINDS = { linear: 'linear_regression', linear_regression: 'linear_regression', logistic: 'logistic_regression', logistic_regression: 'logistic_regression' }

const NUMBER = /^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$/

const badInput = (source, message) => new CliError('ERR_INVALID_ARGUMENT', `${source}: ${message}`)

/** JSON rows: an array of arrays of numbers. */
function parseJsonRows(text, source) {
  let value
  try {
    value = JSON.parse(text)
  } catch (e) {
    throw badInput(source, `not valid JSON (${e.message})`)
  }
  if (!Array.isArray(value) || !value.every(Array.isArray)) throw badInput(source, 'JSON input must be an array of rows, e.g. [[1, 2], [3, 4]]')
  value.forEach((row, i) =>
    row.forEach((v, j) => {
      if (typeof v !== 'number') throw badInput(source, `row ${i + 1}, column ${j + 1}: ${JSON.stringify(v)} is not a number`)
    }),
  )
  return value
}

/** CSV rows of numbers; a first row with any non-number is a header and is skipped. */
function parseCsvRows(text, source) {
  const lines = text.split(/\r?\n/)
  const delimiter = lines.find((l) => l.trim() !== '')?.includes(',') === false && /\t/.test(text) ? '\t' : ','
  const rows = []
  let first = true
  lines.forEach((line, i) => {
    if (line.trim() === '') return
    const cells = line.split(delimiter).map((c) => c.trim().replace(/^"(.*)"$/, '$1').trim())
    const bad = cells.findIndex((c) => !NUMBER.test(c))
    if (first) {
      first = false
      if (bad >= 0) return // header
    }
    if (bad >= 0) throw badInput(source, `line ${i + 1}, column ${bad + 1}: ${JSON.stringify(cells[bad])} is not a number`)
    rows.push(cells.map(Number))
  })
  return rows
}

async function readInput(ctx, input) {
  if (input === undefined || input === '-') {
    if (ctx.stdin.isTTY) ctx.err('reading rows from standard input (JSON or CSV; end with Ctrl-D)')
    const chunks = []
    for await (const chunk of ctx.stdin) chunks.push(chunk)
    return { text: Buffer.concat(chunks).toString('utf8'), source: 'stdin' }
  }
  try {
    return { text: readFileSync(input, 'utf8'), source: input }
  } catch (e) {
    throw new CliError(e.code === 'ENOENT' ? 'ERR_NOT_FOUND' : 'ERR_IO', `${input}: ${e.code === 'ENOENT' ? 'no such file or directory' : e.message}`)
  }
}

/** Rows as a flat Float64Array matrix, checked against the model's width. */
function toMatrix(rows, source, nFeatures) {
  if (rows.length === 0) throw badInput(source, 'no rows to predict')
  const cols = rows[0].length
  rows.forEach((r, i) => {
    if (r.length !== cols) throw badInput(source, `row ${i + 1} has ${r.length} values, row 1 has ${cols}`)
  })
  if (Number.isInteger(nFeatures) && cols !== nFeatures) {
    const hint = cols > nFeatures ? ` (every column is a feature; a target column is not dropped: remove it first, e.g. cut -d, -f1-${nFeatures})` : ''
    throw badInput(source, `rows have ${cols} values, but the model takes ${nFeatures} features${hint}`)
  }
  const data = new Float64Array(rows.length * cols)
  rows.forEach((r, i) => data.set(r, i * cols))
  return { data, rows: rows.length, cols }
}

/**
 * Load MODEL: `{ kind, nFeatures, predict(x), proba(x) → {classes, probs} }` for a model
 * directory (Model.loadPretrained) or a .safetensors file (LinearRegression/LogisticRegression).
 */
async function loadModel(lib, path, requested) {
  let stat
  try {
    stat = statSync(path)
  } catch (e) {
    throw new CliError(e.code === 'ENOENT' ? 'ERR_NOT_FOUND' : 'ERR_IO', `${path}: ${e.code === 'ENOENT' ? 'no such file or directory' : e.message}`)
  }
  if (stat.isDirectory()) {
    const model = await lib.Model.loadPretrained(path)
    const kind = model.config.model_type
    if (kind !== 'linear_regression' && kind !== 'logistic_regression') {
      throw new CliError('ERR_INVALID_MODEL', `${path}: config.json model_type ${JSON.stringify(kind)} is not a model predict can run (linear_regression or logistic_regression)`)
    }
    if (requested && requested !== kind) throw new CliError('ERR_INVALID_MODEL', `${path}: the directory holds a '${kind}' model, not a '${requested}'`)
    const proba = (x) => {
      const probs = model.predictProba(x)
      const k = probs.length / x.rows
      const classes = Array.isArray(model.config.classes) && model.config.classes.length === k ? model.config.classes : Array.from({ length: k }, (_, i) => i)
      return { classes, probs }
    }
    // Model.predict gives what the class's predict gives: values, or class labels.
    return { kind, nFeatures: model.config.n_features, predict: (x) => ({ values: model.predict(x), float: kind === 'linear_regression' }), proba }
  }
  let kind = requested
  if (kind === undefined) {
    const metadata = lib.SafeTensorsFile.open(path).metadata
    kind = metadata && metadata.model_type
    if (kind === undefined || kind === null) {
      throw new CliError('ERR_INVALID_MODEL', `${path}: the file has no model_type metadata (an aprender file?): say which model it holds with --model linear or --model logistic`)
    }
    if (!Object.values(KINDS).includes(kind)) throw new CliError('ERR_INVALID_MODEL', `${path}: model_type '${kind}' is not a model predict can run (linear_regression or logistic_regression)`)
  }
  if (kind === 'linear_regression') {
    const model = lib.LinearRegression.loadSafetensors(path)
    return { kind, nFeatures: model.nFeatures, predict: (x) => ({ values: model.predict(x), float: true }) }
  }
  const model = lib.LogisticRegression.loadSafetensors(path)
  return {
    kind,
    nFeatures: model.nFeatures,
    predict: (x) => ({ values: model.predict(x), float: false }),
    proba: (x) => ({ classes: Array.from(model.classes), probs: model.predictProba(x) }),
  }
}

async function run(ctx, values, positionals) {
  const [modelPath] = positionals
  let requested
  if (values.model !== undefined) {
    requested = KINDS[values.model.toLowerCase()]
    if (requested === undefined) throw new UsageError(`--model must be linear or logistic, not '${values.model}'`, 'predict')
  }
  const model = await loadModel(ctx.lib(), modelPath, requested)
  if (values.proba && model.kind !== 'logistic_regression') throw new UsageError('--proba needs a logistic regression model', 'predict')

  const { text, source } = await readInput(ctx, values.input)
  const trimmed = text.trimStart()
  const rows = trimmed.startsWith('[') ? parseJsonRows(text, source) : parseCsvRows(text, source)
  const x = toMatrix(rows, source, model.nFeatures)

  if (values.proba) {
    const { classes, probs } = model.proba(x)
    const k = classes.length
    const table = []
    for (let i = 0; i < x.rows; i++) table.push(Array.from(probs.subarray(i * k, (i + 1) * k), ui.f32Number))
    ctx.out(values.json ? ui.toJson(table) : table.map((r) => r.join(',')).join('\n'))
    return 0
  }
  const { values: out, float } = model.predict(x)
  const list = Array.from(out, (v) => (float ? ui.f32Number(v) : v))
  ctx.out(values.json ? ui.toJson(list) : list.map((v) => (v === null ? 'NaN' : String(v))).join('\n'))
  return 0
}

module.exports = { name: 'predict', summary: 'run a saved linear/logistic regression on rows of JSON or CSV', usage, help, options, argNames: ['MODEL'], positionals: [1, 1], run }

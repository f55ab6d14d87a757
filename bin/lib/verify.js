'use strict'
const ui = require('./ui')

const usage = 'safetensors-node verify PATH|ORG/NAME [--id ORG/NAME] [--revision R] [--cache-dir DIR] [--endpoint URL] [--json]'

const help = `Usage: ${usage}

Hash every file (SHA-256 for LFS files, the git blob id for small files) and compare it with
the hash the Hugging Face Hub names it by: a snapshot directory of the cache, or a model id
(its snapshot in the cache), file by file against the blob each links to; with --id, a plain
directory against the hashes the Hub publishes for that model. Files are hashed on several
threads. A corrupted file of the right size fails here.

Exit status: 0 when every file matches, 1 when any does not (or cannot be read).

Options:
      --id ORG/NAME     check the plain directory PATH against this model's published hashes
  -r, --revision R      a branch, tag or commit (default main)
      --cache-dir DIR   the cache a model id is looked up in
      --endpoint URL    with --id: the Hub (default HF_ENDPOINT, else https://huggingface.co)
      --json            print the report: {dir, ok, files: [{file, ok, expected, actual,
                        algorithm, bytes, error?}]}
  -h, --help            show this help

Examples:
  safetensors-node verify Qwen/Qwen3-0.6B
  safetensors-node verify ./my-copy --id Qwen/Qwen3-0.6B`

const options = {
  id: { type: 'string' },
  revision: { type: 'string', short: 'r' },
  'cache-dir': { type: 'string' },
  endpoint: { type: 'string' },
  json: { type: 'boolean' },
}

async function run(ctx, values, positionals) {
  const report = await ctx.lib().verify(positionals[0], {
    ...(values.id !== undefined ? { id: values.id } : {}),
    ...(values.revision !== undefined ? { revision: values.revision } : {}),
    ...(values['cache-dir'] !== undefined ? { cacheDir: values['cache-dir'] } : {}),
    ...(values.endpoint !== undefined ? { endpoint: values.endpoint } : {}),
  })
  if (values.json) {
    ctx.out(ui.toJson(report))
    return report.ok ? 0 : 1
  }
  const c = ctx.colors.out
  for (const f of report.files) {
    if (f.ok) ctx.out(`${c.green('ok')}        ${ui.name(f.file)}`)
    else if (f.error !== undefined) ctx.out(`${c.red('unchecked')} ${ui.name(f.file)}: ${ui.truncate(f.error, ui.MESSAGE_CHARS)}`)
    else ctx.out(`${c.red('mismatch')}  ${ui.name(f.file)}: ${f.algorithm} ${f.actual}, expected ${f.expected}`)
  }
  const bad = report.files.filter((f) => !f.ok).length
  const bytes = report.files.reduce((n, f) => n + f.bytes, 0)
  ctx.out(`${ui.printable(report.dir)}: ${report.files.length} files (${ui.formatBytes(bytes)}), ${bad === 0 ? c.green('all match') : c.red(`${bad} do not match`)}`)
  return report.ok ? 0 : 1
}

module.exports = { name: 'verify', summary: 'check files against the hashes the Hugging Face Hub publishes; exit status 1 on a mismatch', usage, help, options, argNames: ['PATH'], positionals: [1, 1], run }

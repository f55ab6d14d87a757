'use strict'
const ui = require('./ui')

const usage = 'safetensors-node download ORG/NAME [--revision R] [--include GLOB]... [--exclude GLOB]... [--cache-dir DIR] [--endpoint URL] [--quiet] [--json]'

const help = `Usage: ${usage}

Download a model from the Hugging Face Hub into the shared Hugging Face cache, laid out as
huggingface_hub lays it out (Python, transformers and Model.loadPretrained('org/name') read it
offline), and print its snapshot directory. Files already in the cache are not fetched again;
an interrupted download resumes where it stopped. Every file is hashed as it streams and
checked against the hash the Hub publishes before it lands.

Options:
  -r, --revision R      a branch, tag or commit (default main)
  -i, --include GLOB    only the files matching GLOB (repeatable; fnmatch: '*' crosses '/',
                        'dir/' takes a folder)
  -x, --exclude GLOB    none of the files matching GLOB (repeatable)
      --cache-dir DIR   the cache (default HF_HUB_CACHE, else HF_HOME/hub, else
                        ~/.cache/huggingface/hub)
      --endpoint URL    the Hub (default HF_ENDPOINT, else https://huggingface.co); the token
                        (HF_TOKEN) goes to its origin only
  -q, --quiet           no progress bar
      --json            print {id, revision, snapshot} instead of the directory
  -h, --help            show this help

On a terminal a progress bar is written to stderr. Ctrl-C stops; the next run resumes.

Examples:
  safetensors-node download Qwen/Qwen3-0.6B
  safetensors-node download org/model --include '*.safetensors' --include '*.json'`

const options = {
  revision: { type: 'string', short: 'r' },
  include: { type: 'string', short: 'i', multiple: true },
  exclude: { type: 'string', short: 'x', multiple: true },
  'cache-dir': { type: 'string' },
  endpoint: { type: 'string' },
  quiet: { type: 'boolean', short: 'q' },
  json: { type: 'boolean' },
}

async function run(ctx, values, positionals) {
  const [id] = positionals
  const bar = ctx.stderr.isTTY && !values.quiet ? ui.progressBar(ctx.stderr) : null
  const stop = new AbortController()
  ctx.onInterrupt(() => {
    if (bar) bar.clear()
    stop.abort()
  })
  let snapshot
  try {
    snapshot = await ctx.lib().download(id, {
      ...(values.revision !== undefined ? { revision: values.revision } : {}),
      ...(values.include !== undefined ? { include: values.include } : {}),
      ...(values.exclude !== undefined ? { exclude: values.exclude } : {}),
      ...(values['cache-dir'] !== undefined ? { cacheDir: values['cache-dir'] } : {}),
      ...(values.endpoint !== undefined ? { endpoint: values.endpoint } : {}),
      ...(bar ? { onProgress: (p) => bar.update({ doneBytes: p.loadedBytes, totalBytes: p.totalBytes ?? p.loadedBytes }) } : {}),
      signal: stop.signal,
    })
  } finally {
    if (bar) bar.clear()
  }
  if (values.json) ctx.out(ui.toJson({ id, revision: values.revision ?? 'main', snapshot }))
  else ctx.out(ui.printable(snapshot))
  return 0
}

module.exports = { name: 'download', summary: 'download a model from the Hugging Face Hub into the shared cache', usage, help, options, argNames: ['ORG/NAME'], positionals: [1, 1], run }

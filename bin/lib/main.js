'use strict'
// The `safetensors-node` command line: argument parsing (node:util parseArgs), help, and the
// one error path (`error[CODE]: message` on stderr; exit 1 for failures, 2 for usage).
const { parseArgs } = require('node:util')
const { UsageError } = require('./errors')
const { colorsFor, printable, truncate, MESSAGE_CHARS } = require('./ui')

const COMMANDS = [require('./inspect'), require('./validate'), require('./convert'), require('./predict'), require('./download'), require('./verify'), require('./diff')]
const byName = new Map(COMMANDS.map((c) => [c.name, c]))

const BIN = 'safetensors-node'

const version = () => require('../../package.json').version

function mainHelp() {
  const rows = [
    ['inspect PATH', byName.get('inspect').summary],
    ['validate PATH...', byName.get('validate').summary],
    ['convert IN OUT --to FORMAT', byName.get('convert').summary],
    ['predict MODEL', byName.get('predict').summary],
    ['download ORG/NAME', byName.get('download').summary],
    ['verify PATH|ORG/NAME', byName.get('verify').summary],
    ['diff A B', byName.get('diff').summary],
    ['help [COMMAND]', 'show the help of a command'],
  ]
  return `${BIN} ${version()}: inspect, validate, convert, run, download, verify and diff model weights

Usage: ${BIN} <command> [options]

Commands:
${rows.map(([a, b]) => `  ${a.padEnd(28)}${b}`).join('\n')}

Options:
  -h, --help      show this help (a command's: ${BIN} help COMMAND)
  -V, --version   print the version
      --debug     print the stack trace of an error

PATH may be a SafeTensors file, a sharded model.safetensors.index.json, a GGUF file, a
PyTorch checkpoint (.bin/.pt/.pth), a NumPy .npy/.npz, a weights.mlx file, or a model
directory (config.json + weights). Files are recognised by
their bytes, not their names; any other kind (ONNX, a zip, a pickle, ...) is
ERR_UNKNOWN_FORMAT naming what it looks like.

Exit status: 0 success, 1 the operation failed (an invalid file, bad input, ...), 2 usage error.
Colors are used only on a terminal, and never when NO_COLOR is set.`
}

const mainUsage = `usage: ${BIN} <command> [options]   (commands: ${COMMANDS.map((c) => c.name).join(', ')}, help)`

/** parseArgs' messages, shortened to what a user needs. */
function usageFromParseError(e, command) {
  const m = e.message
  const unknown = /^Unknown option '([^']+)'/.exec(m)
  if (unknown) return new UsageError(`unknown option '${unknown[1]}'`, command)
  const option = /^Option '(?:-\w, )?(--[\w-]+)/.exec(m)
  if (option && /argument missing/.test(m)) return new UsageError(`option '${option[1]}' needs a value`, command)
  if (option && /ambiguous/.test(m)) return new UsageError(`option '${option[1]}' needs a value (write ${option[1]}=VALUE for a value that starts with '-')`, command)
  return new UsageError(m.split('\n')[0].replace(/^Option/, 'option'), command)
}

/** The arguments before a literal `--`. */
const beforeDashDash = (args) => {
  const i = args.indexOf('--')
  return i < 0 ? args : args.slice(0, i)
}

async function dispatch(argv, ctx) {
  let i = 0
  for (; i < argv.length && argv[i].startsWith('-') && argv[i] !== '-'; i++) {
    const a = argv[i]
    if (a === '--help' || a === '-h') return ctx.out(mainHelp()), 0
    if (a === '--version' || a === '-V') return ctx.out(version()), 0
    if (a === '--debug') continue
    if (a === '--') {
      i++
      break
    }
    throw new UsageError(`unknown option '${a}'`)
  }
  const name = argv[i]
  const rest = argv.slice(i + 1)
  if (name === undefined) throw new UsageError('missing command')
  if (name === 'help') {
    const topic = rest.find((a) => !a.startsWith('-'))
    if (topic === undefined) return ctx.out(mainHelp()), 0
    const command = byName.get(topic)
    if (!command) throw new UsageError(`unknown command '${topic}'`)
    return ctx.out(command.help), 0
  }
  const command = byName.get(name)
  if (!command) throw new UsageError(`unknown command '${name}'`)
  if (beforeDashDash(rest).some((a) => a === '--help' || a === '-h')) return ctx.out(command.help), 0

  let parsed
  try {
    parsed = parseArgs({ args: rest, options: { ...command.options, debug: { type: 'boolean' } }, allowPositionals: true, strict: true })
  } catch (e) {
    if (typeof e.code === 'string' && e.code.startsWith('ERR_PARSE_ARGS')) throw usageFromParseError(e, command.name)
    throw e
  }
  const { values, positionals } = parsed
  const [min, max] = command.positionals
  if (positionals.length < min) throw new UsageError(`missing ${command.argNames.slice(positionals.length).join(' and ')}`, command.name)
  if (positionals.length > max) throw new UsageError(`unexpected argument '${positionals[max]}'`, command.name)
  return command.run(ctx, values, positionals)
}

/** Run the command line; resolves to the exit status. */
async function run(argv, io = {}) {
  const stdout = io.stdout ?? process.stdout
  const stderr = io.stderr ?? process.stderr
  const env = io.env ?? process.env
  const debug = beforeDashDash(argv).includes('--debug')
  let interruptHandler = null
  const ctx = {
    stdout,
    stderr,
    stdin: io.stdin ?? process.stdin,
    env,
    columns: stdout.isTTY ? stdout.columns : undefined,
    colors: { out: colorsFor(stdout, env), err: colorsFor(stderr, env) },
    out: (text) => stdout.write(text.endsWith('\n') ? text : `${text}\n`),
    err: (text) => stderr.write(text.endsWith('\n') ? text : `${text}\n`),
    lib: () => require('../..'),
    /** Run `fn` (e.g. clear a progress bar) if the user presses Ctrl-C, then exit 130. */
    onInterrupt: (fn) => {
      if (interruptHandler) process.removeListener('SIGINT', interruptHandler)
      interruptHandler = () => {
        fn()
        process.exit(130)
      }
      process.once('SIGINT', interruptHandler)
    },
  }
  try {
    return await dispatch(argv, ctx)
  } catch (e) {
    return reportError(e, ctx, debug)
  } finally {
    if (interruptHandler) process.removeListener('SIGINT', interruptHandler)
  }
}

function reportError(e, ctx, debug) {
  const c = ctx.colors.err
  const err = e instanceof Error ? e : new Error(String(e))
  const code = typeof err.code === 'string' && err.code !== '' ? err.code : 'ERR_UNEXPECTED'
  // A message may quote a file (a name, a key, a value): escaped and bounded like all of it.
  ctx.err(`${c.bold(c.red(`error[${printable(code)}]`))}: ${truncate(err.message, MESSAGE_CHARS)}`)
  if (err instanceof UsageError) {
    const command = err.command && byName.get(err.command)
    ctx.err(command ? `usage: ${command.usage}` : mainUsage)
    ctx.err(`Run '${BIN} ${command ? `help ${command.name}` : '--help'}' for more.`)
  }
  if (debug && err.stack) ctx.err(c.dim(err.stack.split('\n').map(printable).join('\n')))
  return err instanceof UsageError ? 2 : 1
}

module.exports = { run, COMMANDS }
